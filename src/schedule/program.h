// The Program IR: what one rank does in one collective, as a list of Ops.
//
// Builders (src/algorithms) produce Programs; the executor (src/exec), the
// simulator (src/sim) and the verifier (src/verify) interpret them.
//
// Semantics, shared by every interpreter:
//   - An Op may start once every Op in `deps` has completed. deps name earlier
//     ops only (indices smaller than the op's own).
//   - Sends to one peer start in program order, and so do receives (recv and
//     recv_reduce) from one peer. The k-th send from rank a to rank b matches the
//     k-th receive at b from a (FIFO per ordered pair); their counts are equal.
//   - A send completes when its data has left src (src may be reused); a
//     receive completes when dst holds the result.
//   - Builders express every memory hazard through deps: an op that writes a
//     region another op reads or writes must be ordered with it.
//
// Op kinds:
//   send         peer <- src
//   recv         dst <- peer
//   recv_reduce  dst <- src (+) peer's data      (src may equal dst)
//   copy         dst <- src
//   reduce       dst <- dst (+) src
//   divide       dst <- dst / divisor        (the average's last step)
#pragma once

#include "schedule/collective.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

enum class BufferKind : uint8_t { input, output, scratch };
std::string_view to_string(BufferKind kind);

// A window of a buffer, in elements.
struct Region {
  BufferKind buffer = BufferKind::input;
  size_t offset = 0;
  size_t count = 0;

  size_t end() const { return offset + count; }
  friend bool operator==(const Region&, const Region&) = default;
};

enum class OpKind : uint8_t { send, recv, recv_reduce, copy, reduce, divide };
inline constexpr int kOpKindCount = 6;
std::string_view to_string(OpKind kind);

bool is_receive(OpKind kind);  // recv or recv_reduce
bool reads_src(OpKind kind);   // send, recv_reduce, copy, reduce
bool reads_dst(OpKind kind);   // reduce, divide: dst is an operand too
bool has_peer(OpKind kind);    // send, recv, recv_reduce

using OpIndex = uint32_t;

struct Op {
  OpKind kind = OpKind::copy;
  int peer = -1;  // for send / recv / recv_reduce
  Region src;     // unused by recv
  Region dst;     // unused by send
  uint32_t step = 0;  // algorithm step, for tracing and step counts
  std::vector<OpIndex> deps;
  uint32_t divisor = 0;  // for divide
};

// Count of elements an op moves or computes (src for send, dst otherwise).
size_t op_count(const Op& op);

struct Program {
  size_t input_count = 0;
  size_t output_count = 0;
  size_t scratch_count = 0;  // elements of scratch the executor must provide
  std::vector<Op> ops;
};

// The ops no other op depends on: an op that depends on all of them runs after
// every op of the program.
std::vector<OpIndex> sink_ops(const Program& program);

// The one-op Program of a point-to-point call: `kind` is send (of Input) or
// recv (into Output), of `count` elements, with `peer`. A zero-count message
// is still a message, so that it orders and matches.
Program point_to_point_program(OpKind kind, int peer, size_t count);

// "send peer=3 src=input[0,+4) deps={1,2} step=0"
std::string describe(const Op& op);
std::string describe(const Region& region);

// Helper for builders: appends ops and hands back their indices.
//
//   ProgramBuilder b(counts);
//   OpIndex s = b.send(next, b.input(off, n), {}, step);
//   b.recv_reduce(prev, b.output(off, n), b.output(off, n), {s}, step);
class ProgramBuilder {
 public:
  explicit ProgramBuilder(const BufferCounts& counts);

  static Region input(size_t offset, size_t count) { return {BufferKind::input, offset, count}; }
  static Region output(size_t offset, size_t count) { return {BufferKind::output, offset, count}; }
  static Region scratch(size_t offset, size_t count) {
    return {BufferKind::scratch, offset, count};
  }

  OpIndex send(int peer, Region src, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex recv(int peer, Region dst, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex recv_reduce(int peer, Region src, Region dst, std::vector<OpIndex> deps = {},
                      uint32_t step = 0);
  OpIndex copy(Region src, Region dst, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex reduce(Region src, Region dst, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex divide(Region dst, uint32_t divisor, std::vector<OpIndex> deps = {}, uint32_t step = 0);

  // Reserves `count` scratch elements and returns their offset.
  size_t alloc_scratch(size_t count);

  size_t size() const { return program_.ops.size(); }
  Program finish() &&;

 private:
  OpIndex add(Op op);
  Program program_;
};

}  // namespace chorus
