// Timelines of real runs: with CHORUS_TRACE=DIR every communicator records
// each op its calls run (send, recv, recv_reduce, copy, reduce, divide) and,
// when it is destroyed, writes them as a Chrome trace (the JSON of
// chrome://tracing and Perfetto) to DIR/chorus-trace-rank<R>-comm<K>.json:
// K counts the traced communicators this rank made before (0, 1, ...), so
// that the files of one communicator share K on every rank that made its
// communicators in the same order.
//
//   {"traceEvents": [
//     {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank 1"}},
//     {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": "send to 0"}},
//     {"ph": "X", "name": "send", "cat": "allreduce", "pid": 1, "tid": 0,
//      "ts": 12.345, "dur": 0.420,
//      "args": {"bytes": 4096, "peer": 0, "call": 3, "algorithm": "ring", "op": 5}}, ...],
//    "displayTimeUnit": "ns", "otherData": {"rank": 1, "size": 4, "transport": "shm",
//    "dropped": 0, "clock_offset_ns": -1520}}
//
// pid is the rank; each peer channel has two rows (tid 2p: sends to peer p,
// tid 2p + 1: receives from p) and local work one (tid 2N: copy, reduce,
// divide). An event spans an op from its start (a message op: when it was
// posted to the transport; a local op: when it ran) to its completion as the
// engine saw it. "call" is the stamp's number (a collective's call number,
// or a point-to-point message's number on its pair), "cat" the collective or
// "send to peer"/"recv from peer". ts and dur are microseconds on rank 0's
// steady clock, counted from the moment rank 0 aligned the clocks: each rank
// measured its offset to rank 0 when the communicator was made (the best of
// a few ping-pongs; see align_clocks in api/communicator.cc), so the ranks'
// rows line up to within about half a round trip. (Those ping-pongs are the
// first 8 point-to-point messages each way between rank 0 and every other
// rank: a traced communicator's own messages start numbering at 9 there.)
//
// Off (the default), the engine tests one pointer per op and records
// nothing. On, an op costs two reads of the CPU's time-stamp counter (where
// it is invariant: constant_tsc and nonstop_tsc; else of the steady clock),
// shared by the ops that end together, and a store into a buffer whose
// pages are mapped in ahead (32768 events, 2.3 MB, at a time); ticks become nanoseconds when the
// trace is written, by the rate measured against the steady clock over the communicator's life. A
// communicator keeps at most kTraceEvents events and counts the rest as dropped.
#pragma once

#include "schedule/program.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus {

inline constexpr size_t kTraceEvents = size_t{1} << 20;

// One op of one rank in a Chrome trace, times in microseconds.
struct TraceOp {
  double start_us = 0;
  double dur_us = 0;
  uint64_t bytes = 0;
  uint32_t call = 0;
  uint32_t op = 0;
  OpKind kind = OpKind::copy;
  int peer = -1;               // -1: a local op
  std::string_view category;   // "allreduce", "send to peer", ...
  std::string_view algorithm;  // "" for point-to-point
};
struct RankTrace {
  int rank = 0;
  std::vector<TraceOp> ops;
};
// The Chrome trace document of the ranks' ops, in the format above (rows
// named per rank, peer and direction); `other_json` is the JSON object
// stored as "otherData".
std::string chrome_trace(int size, const std::vector<RankTrace>& ranks,
                         const std::string& other_json);

class Tracer {
 public:
  Tracer(int rank, int size);

  // The local steady clock in nanoseconds.
  static int64_t now_ns();
  // A timestamp for events: time-stamp counter ticks (or steady-clock
  // nanoseconds where the counter is not invariant).
  static int64_t ticks();

  // Maps this rank's clock onto rank 0's: rank 0's clock = local + offset;
  // `epoch_ns` (on rank 0's clock) becomes ts 0.
  void set_clock(int64_t offset_ns, int64_t epoch_ns) {
    offset_ns_ = offset_ns;
    epoch_ns_ = epoch_ns;
  }

  struct Event {
    int64_t start;  // ticks()
    int64_t end;
    uint64_t bytes;
    uint32_t call;
    uint32_t op;
    OpKind kind;
    int32_t peer;               // -1: local op
    std::string_view category;  // static strings (collective names, registry)
    std::string_view algorithm;
  };
  void record(const Event& e) {
    if (used_ == kChunkEvents && !next_chunk()) {
      ++dropped_;
      return;
    }
    chunks_.back().events[used_++] = e;
  }
  size_t recorded() const;

  std::string to_json(std::string_view transport) const;
  // Writes DIR/chorus-trace-rank<R>-comm<K>.json; "" on success, else why not.
  std::string write(const std::string& dir, int comm_index, std::string_view transport) const;

 private:
  int rank_;
  int size_;
  // ticks() and now_ns() read together at construction: the origin of the
  // conversion from ticks to nanoseconds.
  int64_t ticks0_ = 0;
  int64_t ns0_ = 0;
  int64_t offset_ns_ = 0;
  int64_t epoch_ns_ = 0;
  uint64_t dropped_ = 0;
  // Events live in chunks whose pages are mapped in when the chunk is made
  // (MAP_POPULATE): recording an event never takes a page fault, which on a
  // virtual machine can stall a rank for longer than its peers spin.
  static constexpr size_t kChunkEvents = size_t{1} << 15;
  struct Chunk {
    Event* events = nullptr;
    explicit Chunk(Event* e) : events(e) {}
    Chunk(Chunk&& o) noexcept : events(std::exchange(o.events, nullptr)) {}
    Chunk& operator=(Chunk&&) = delete;
    ~Chunk();
  };
  // Maps the next chunk; false when the cap is reached or memory is short.
  bool next_chunk();
  std::vector<Chunk> chunks_;
  size_t used_ = kChunkEvents;  // events in the last chunk
};

}  // namespace chorus
