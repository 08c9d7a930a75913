// The executor: runs Programs over a Transport with real buffers.
//
// An Engine belongs to one communicator. It runs any number of Executions (one
// per collective call) concurrently, in the order they were enqueued: sends to
// one peer, and receives from one peer, are posted in enqueue order and then in
// program order, which is what FIFO matching per ordered pair needs. An op
// starts once its dependencies are done; copy and reduce run inline; the
// transport moves and reduces messages.
#pragma once

#include "exec/trace.h"
#include "schedule/program.h"
#include "transport/transport.h"
#include "transport/window.h"

#include <chorus/types.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

// Names a call in errors, formatted only when an error needs it:
// "allreduce(ring)" or "send to peer 3".
struct CallLabel {
  std::string_view operation;  // "allreduce", "send to peer", ...
  std::string_view algorithm;  // "ring"; empty for point-to-point
  int peer = -1;               // point-to-point only
  std::string str() const;
};

// A Program with its dependency graph inverted once, so that each call only
// copies two small arrays: the cache of the communicator holds these.
struct PreparedProgram {
  Program program;
  std::vector<uint32_t> dep_count;         // per op
  std::vector<uint32_t> dependents_begin;  // CSR offsets, ops + 1 entries
  std::vector<OpIndex> dependents;
  bool one_sided = false;  // has get, get_reduce, signal or wait ops
  // Per op: 1 where it writes Output that no other op of the Program reads
  // (a final result, not one it forwards or reduces into again), which a
  // large call writes with non-temporal stores (Engine::set_stream_bytes).
  std::vector<uint8_t> final_output;
};
// Checks that deps name earlier ops and builds the inverted graph.
std::shared_ptr<const PreparedProgram> prepare(Program program);

struct ExecBuffers {
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
  void* window = nullptr;  // this rank's staging window (one-sided Programs)
};

class Execution {
 public:
  // An execution of no program: done at once; restart() gives it one.
  Execution() = default;
  // `stamp`: the call's fingerprint, carried by every message it sends and
  // expected on every message it receives (core/call_stamp.h).
  Execution(std::shared_ptr<const PreparedProgram> program, ExecBuffers buffers, DataType type,
            ReduceOp op, CallLabel label, Deadline deadline, const CallStamp& stamp = {});
  // Makes this a fresh execution of `program`, reusing the per-op arrays of
  // the previous one (a communicator recycles its executions, so that a call
  // allocates nothing). Only while no Engine runs it.
  void restart(std::shared_ptr<const PreparedProgram> program, ExecBuffers buffers, DataType type,
               ReduceOp op, CallLabel label, Deadline deadline, const CallStamp& stamp = {});

  bool done() const { return remaining_ == 0; }
  // "allreduce(ring)", for messages.
  std::string context() const { return label_.str(); }
  Deadline deadline() const { return deadline_; }
  const CallStamp& stamp() const { return stamp_; }
  // The deadline may be set after enqueue: the clock read is then off the
  // path to the first message.
  void set_deadline(Deadline deadline) { deadline_ = deadline; }
  // When this rank entered the call (its arrival; the flight recorder's
  // start time), for the stall report's lateness of the peers that have
  // not entered it. Unset: the report gives none.
  void set_started(Deadline started) { started_ = started; }
  Deadline started() const { return started_; }
  // Describes what is still pending, for timeout messages.
  std::string pending_summary() const;

 private:
  friend class Engine;
  std::byte* address(const Region& r) const;

  enum : uint8_t { kReady = 1, kFinished = 2 };  // op states (bits)

  std::shared_ptr<const PreparedProgram> prepared_;
  const Program* program_ = nullptr;  // prepared_->program
  ExecBuffers buffers_;
  DataType type_ = DataType::float32;
  ReduceOp op_ = ReduceOp::sum;
  size_t elem_size_ = 0;
  CallLabel label_;
  Deadline deadline_{};
  Deadline started_{};
  CallStamp stamp_;
  // How the ops that write final Output write it (Engine::set_stream_bytes):
  // streaming for a call whose output is too large to stay cached and lies
  // apart from its input.
  WriteMode output_store_ = WriteMode::cached;
  std::vector<uint32_t> missing_deps_;  // per op
  std::vector<uint8_t> state_;          // per op: kReady (deps done, not started), kFinished
  std::vector<int64_t> started_ns_;     // per op, only while traced: Tracer::ticks() at its start
  size_t remaining_ = 0;
};

class Engine {
 public:
  explicit Engine(Transport& transport);

  // Adds an execution and starts whatever it can start now.
  void enqueue(const std::shared_ptr<Execution>& exec);
  // Progresses until `exec` is done. Throws on timeout or transport error.
  void wait(const Execution& exec);
  // The same, giving up (without an error) once `until` has passed.
  void wait_until(const Execution& exec, Deadline until);
  // Progresses, blocked in the transport between completions, until every
  // execution is done or `wanted` is above 0 (a caller asks for the
  // communicator: it interrupts the transport after raising it). What a
  // progress thread runs (engine/progress.h). Throws as wait() does.
  void drive(const std::atomic<int>& wanted);
  // Progresses without blocking.
  void poll();
  bool idle() const { return active_.empty(); }

  // While waiting, whenever `*flag` is set (by another thread, which then
  // interrupts the transport), the engine calls `on_set`, which throws: how a
  // communicator is aborted from another thread.
  void set_stop(const std::atomic<bool>* flag, std::function<void()> on_set) {
    stop_ = flag;
    on_stop_ = std::move(on_set);
  }
  // Records every op of the executions enqueued from now on (exec/trace.h);
  // nullptr: none (the default).
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  // The shared windows that one-sided ops use; a Program with one-sided ops
  // fails without them.
  void set_windows(WindowSet* windows) { windows_ = windows; }
  // Calls whose Output is at least `bytes` (0: none) write it with
  // non-temporal stores (core/stream_copy.h): copies, reductions and
  // receives into it. Output that large leaves the caches before it is read
  // again, so an ordinary store only adds a read of each line from memory.
  void set_stream_bytes(size_t bytes) { stream_bytes_ = bytes; }
  // How long a one-sided wait polls its flags on the core before it naps
  // (CHORUS_SPIN_US), where this rank has a core of its own.
  void set_spin(std::chrono::microseconds spin) { spin_ = spin; }

 private:
  struct Pending {
    Execution* exec;
    OpIndex op;
  };
  // wait() and drive(): progresses until done() holds; a deadline that
  // passes names the active execution it belongs to, else `exec`.
  // `until`: where the caller stops looking (not a call's deadline).
  template <typename Done>
  void run_until(Done done, const Execution* exec, Deadline until = Deadline::max());
  void finish_op(Execution& e, OpIndex op);
  void op_ready(Execution& e, OpIndex op);
  void start_local(Execution& e, OpIndex op);
  // A one-sided op; false for a wait whose flag is not raised yet (queued).
  bool run_one_sided(Execution& e, OpIndex op);
  // Finishes every queued wait whose flag is now raised; whether any did.
  bool check_waits();
  // Throws StampMismatch when `peer` published a stamp for e's call number
  // that differs from e's.
  void check_stamp(const Execution& e, int peer);
  void pump_peer(int peer, bool sends);
  void dispatch(const std::vector<RequestId>& done);
  void track(RequestId id, Pending pending);
  Pending untrack(RequestId id);
  void trace(const Execution& e, OpIndex op, int64_t end);
  [[noreturn]] void timed_out(const Execution& e);
  // Which peers are behind `e`, in words (asks the transport).
  std::string stall_report(const Execution& e);

  // How op `op` of e writes its dst.
  static WriteMode store_for(const Execution& e, OpIndex op) {
    return e.prepared_->final_output[op] ? e.output_store_ : WriteMode::cached;
  }
  Transport& transport_;
  Tracer* tracer_ = nullptr;
  size_t stream_bytes_ = 0;
  std::chrono::microseconds spin_{50};
  WindowSet* windows_ = nullptr;
  // One-sided waits whose flag was not raised when they became ready.
  std::vector<Pending> waits_;
  // While traced: the last Tracer::ticks() read, which ops that start in the
  // same burst (an enqueue, a completion and what it readies) share.
  int64_t now_ticks_ = 0;
  const std::atomic<bool>* stop_ = nullptr;
  std::function<void()> on_stop_;
  int rank_;
  int size_;
  // Per peer, ops waiting to be posted in order (sends, receives).
  std::vector<std::deque<Pending>> send_queue_;
  std::vector<std::deque<Pending>> recv_queue_;
  // Requests posted to the transport and not yet completed, sorted by id.
  // Transports hand out growing ids, so a new request is (nearly always)
  // appended; a completed one becomes a hole (exec == nullptr) until the
  // holes reach the front. No allocation per request, unlike a hash map's
  // nodes, and a lookup is a binary search over the few requests in flight.
  struct InFlight {
    RequestId id;
    Pending pending;
  };
  std::vector<InFlight> in_flight_;
  size_t in_flight_head_ = 0;  // entries before it are all holes
  std::vector<std::shared_ptr<Execution>> active_;
  std::vector<RequestId> done_scratch_;
};

}  // namespace chorus
