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
//
// One-sided ops (shared windows: every rank of the call can read its peers'
// memory; schedule/one_sided.h has the protocol):
//   get          dst <- peer's `remote`
//   get_reduce   dst <- src (+) peer's `remote`  (src may equal dst)
//   signal       raises flag `flag` at peer: "this rank's part for it is done"
//   wait         completes once peer has raised flag `flag` at this rank
//
// A get's `remote` names a buffer of the peer: its shared input or shared
// output (the call's own buffer where it lies in a window, else the place in
// the peer's staging window where the peer's Program put it), or its staging
// window. Flags are per (signalling rank, flag number) and per call: a wait
// matches the one signal of this call from that peer with that number, and
// every read of a peer's buffer must follow a wait for the signal the peer
// raised after writing it, and precede the signal that lets the peer write
// it again. The verifier proves both (verify/verifier.h).
#pragma once

#include "schedule/collective.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// `window`: this rank's staging window, shared with the other ranks of the
// call (Programs with one-sided ops only; Program::window_count elements).
enum class BufferKind : uint8_t { input, output, scratch, window };
std::string_view to_string(BufferKind kind);

// A window of a buffer, in elements.
struct Region {
  BufferKind buffer = BufferKind::input;
  size_t offset = 0;
  size_t count = 0;

  size_t end() const { return offset + count; }
  friend bool operator==(const Region&, const Region&) = default;
};

enum class OpKind : uint8_t {
  send,
  recv,
  recv_reduce,
  copy,
  reduce,
  divide,
  get,
  get_reduce,
  signal,
  wait
};
inline constexpr int kOpKindCount = 10;
std::string_view to_string(OpKind kind);

bool is_receive(OpKind kind);    // recv or recv_reduce
bool reads_src(OpKind kind);     // send, recv_reduce, copy, reduce, get_reduce
bool reads_dst(OpKind kind);     // reduce, divide: dst is an operand too
bool writes_dst(OpKind kind);    // every kind but send, signal and wait
bool has_peer(OpKind kind);      // send, recv, recv_reduce: a message
bool is_one_sided(OpKind kind);  // get, get_reduce, signal, wait
bool reads_remote(OpKind kind);  // get, get_reduce
// Flags per (peer, call) that one-sided Programs may use: 0 .. kMaxFlags - 1.
inline constexpr uint32_t kMaxFlags = 8;

using OpIndex = uint32_t;

struct Op {
  OpKind kind = OpKind::copy;
  int peer = -1;      // for send, recv, recv_reduce and the one-sided ops
  Region src;         // read by send, recv_reduce, copy, reduce, get_reduce
  Region dst;         // written by all but send, signal and wait
  uint32_t step = 0;  // algorithm step, for tracing and step counts
  std::vector<OpIndex> deps;
  uint32_t divisor = 0;  // for divide
  Region remote;         // get, get_reduce: the peer's buffer (input, output or window)
  uint32_t flag = 0;     // signal, wait
};

// Count of elements an op moves or computes (src for send, dst otherwise; 0
// for signal and wait).
size_t op_count(const Op& op);

struct Program {
  size_t input_count = 0;
  size_t output_count = 0;
  size_t scratch_count = 0;  // elements of scratch the executor must provide
  // One-sided Programs: elements of this rank's staging window the Program
  // uses, and where in it the Program stages its shared input and output
  // (what a peer's get of `input` or `output` reads); SIZE_MAX where it
  // does not stage them (the call's buffers lie in windows, or no peer
  // reads them).
  size_t window_count = 0;
  size_t window_input = SIZE_MAX;
  size_t window_output = SIZE_MAX;
  std::vector<Op> ops;

  bool one_sided() const;  // has a one-sided op
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
  static Region window(size_t offset, size_t count) { return {BufferKind::window, offset, count}; }

  OpIndex send(int peer, Region src, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex recv(int peer, Region dst, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex recv_reduce(int peer, Region src, Region dst, std::vector<OpIndex> deps = {},
                      uint32_t step = 0);
  OpIndex copy(Region src, Region dst, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex reduce(Region src, Region dst, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex divide(Region dst, uint32_t divisor, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex get(int peer, Region remote, Region dst, std::vector<OpIndex> deps = {},
              uint32_t step = 0);
  OpIndex get_reduce(int peer, Region remote, Region src, Region dst,
                     std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex signal(int peer, uint32_t flag, std::vector<OpIndex> deps = {}, uint32_t step = 0);
  OpIndex wait(int peer, uint32_t flag, std::vector<OpIndex> deps = {}, uint32_t step = 0);

  // One-sided Programs: reserves `count` elements of the staging window and
  // returns their offset; marks where the shared input and output are staged.
  size_t alloc_window(size_t count);
  void stage_input_at(size_t offset) { program_.window_input = offset; }
  void stage_output_at(size_t offset) { program_.window_output = offset; }

  // Reserves `count` scratch elements and returns their offset.
  size_t alloc_scratch(size_t count);

  size_t size() const { return program_.ops.size(); }
  Program finish() &&;

 private:
  OpIndex add(Op op);
  Program program_;
};

}  // namespace chorus
