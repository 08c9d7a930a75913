// The flight recorder: each communicator's last calls, so that a hang or a
// failure can be read after the fact (NCCL's flight recorder, Horovod's
// stall inspector).
//
// Every call (collective or point-to-point) takes one entry of a ring of
// kFlightRecorderCalls: its sequence number among this rank's calls, the
// number its stamp carries (a collective's call number on the communicator,
// as errors cite it, or a point-to-point message's number on its pair), its shape
// (collective, algorithm, dtype, op, count, root or peer), start and end
// times, its state (running, done, failed) and, once it failed, the error
// and the ops it was still waiting for; once Communicator::stragglers has
// looked at a collective, its last arriver, that rank's lateness in
// microseconds and whether it is beyond the clocks' error bar
// ("last_rank": 2, "late_us": 5012.3, "late_beyond_error": true). The start
// time is the rank's arrival at the call (engine/stragglers.h). Recording a call costs a few
// stores; the one clock read it adds is the end time.
//
// Communicator::flight_record() returns it as JSON; with CHORUS_FLIGHT_RECORDER
// set to a directory, every failure writes it to
// DIR/chorus-flight-rank<R>.json (one file per rank, replaced each time).
//
//   {"rank": 1, "size": 4, "transport": "shm", "calls": [
//     {"seq": 17, "number": 17, "call": "broadcast", "algorithm": "binomial", "dtype": "float32",
//      "op": "sum", "count": 1000, "root": 1, "peer": -1, "state": "failed",
//      "start_us": 1234.5, "end_us": 5678.9,
//      "error": "rank 1: broadcast(binomial): timeout ...", "pending": "recv from peer 0 ..."}]}
// Times are microseconds since the communicator was created; calls are
// oldest first.
#pragma once

#include "core/deadline.h"

#include <chorus/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace chorus::detail {

inline constexpr size_t kFlightRecorderCalls = 64;

class FlightRecorder {
 public:
  enum class State : uint8_t { running, done, failed };

  struct Entry {
    uint64_t seq = 0;
    uint32_t number = 0;         // the call stamp's number (core/call_stamp.h)
    std::string_view call;       // "allreduce", "send to peer", ...
    std::string_view algorithm;  // empty for point-to-point
    DataType type = DataType::float32;
    ReduceOp op = ReduceOp::sum;
    size_t count = 0;
    int root = -1;
    int peer = -1;
    State state = State::running;
    Deadline start{};
    Deadline end{};
    std::string error;    // set when failed
    std::string pending;  // the ops a failed call still waited for
    // Set by Communicator::stragglers for the collectives it looked at: the
    // last arriver, its lateness (last arrival minus first) and whether that
    // is beyond the clocks' error bar; -1: not looked at.
    int last_rank = -1;
    int64_t late_ns = 0;
    bool late_beyond_error = false;
  };

  FlightRecorder() : created_(Clock::now()) {}

  // Records the start of a call and returns its sequence number (its handle
  // for finish() and fail()).
  uint64_t start(uint32_t number, std::string_view call, std::string_view algorithm, DataType type,
                 ReduceOp op, size_t count, int root, int peer, Deadline now) {
    Entry& e = ring_[next_ % kFlightRecorderCalls];
    e.seq = next_;
    e.number = number;
    e.call = call;
    e.algorithm = algorithm;
    e.type = type;
    e.op = op;
    e.count = count;
    e.root = root;
    e.peer = peer;
    e.state = State::running;
    e.start = now;
    e.end = Deadline{};
    e.error.clear();
    e.pending.clear();
    e.last_rank = -1;
    return next_++;
  }
  void finish(uint64_t seq, Deadline now) {
    if (Entry* e = find(seq)) {
      e->state = State::done;
      e->end = now;
    }
  }
  void fail(uint64_t seq, std::string error, std::string pending, Deadline now) {
    if (Entry* e = find(seq)) {
      e->state = State::failed;
      e->end = now;
      e->error = std::move(error);
      e->pending = std::move(pending);
    }
  }

  // The record as JSON (see above).
  std::string to_json(int rank, int size, std::string_view transport) const;
  // Writes to_json() to DIR/chorus-flight-rank<R>.json; returns "" or what
  // went wrong (the caller is already reporting a failure: this must not
  // throw over it).
  std::string dump(const std::string& dir, int rank, int size, std::string_view transport) const;

  uint64_t calls() const { return next_; }
  // The entry of call `seq`, or null once the ring has moved past it.
  const Entry* entry(uint64_t seq) const {
    const Entry& e = ring_[seq % kFlightRecorderCalls];
    return e.seq == seq && seq < next_ ? &e : nullptr;
  }
  Entry* entry(uint64_t seq) { return find(seq); }

 private:
  Entry* find(uint64_t seq) {
    Entry& e = ring_[seq % kFlightRecorderCalls];
    return e.seq == seq && seq < next_ ? &e : nullptr;
  }

  Deadline created_;
  uint64_t next_ = 0;
  std::array<Entry, kFlightRecorderCalls> ring_{};
};

}  // namespace chorus::detail
