// The implementation behind chorus::Communicator: argument checks, the cache
// of each call's algorithm and Program, and the executor engine over one
// transport. Which algorithm a call gets is the selection layer's decision
// (tune/selector.h).
//
// Every public call funnels into one chorus::Call (include/chorus/communicator.h)
// and one enqueue path, submit().
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/deterministic.h"
#include "core/config.h"
#include "engine/flight_recorder.h"
#include "engine/metrics.h"
#include "engine/progress.h"
#include "exec/executor.h"
#include "transport/transport.h"
#include "transport/window.h"
#include "tune/selector.h"

#include <chorus/communicator.h>
#include <chorus/error.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

namespace chorus {

namespace detail {

// Scratch buffers, reused across calls so that a large call does not pay for
// fresh pages every time.
class ScratchPool {
 public:
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    size_t bytes = 0;
  };
  Buffer take(size_t bytes);
  void give(Buffer buffer);

 private:
  std::vector<Buffer> free_;
};

// One call in progress. The communicator recycles these (with their
// Execution's arrays) once nobody holds them, so that a call allocates
// nothing; the engine holds the Execution through an aliasing pointer that
// keeps the whole WorkState alive.
struct WorkState {
  CommunicatorImpl* comm = nullptr;
  // Expires with the communicator: a Work that outlives it raises an Error
  // instead of touching `comm`.
  std::weak_ptr<const void> alive;
  ScratchPool::Buffer scratch;
  bool planned = false;  // a Plan's run: the scratch is the plan's, kept across runs
  Execution exec;
  uint64_t record = 0;     // its entry in the flight recorder
  bool uncounted = false;  // chorus's own message (a clock ping-pong): not in the metrics
  // A call the learner times (tune/learner.h): its class, ticket and start.
  LearnClass* learn = nullptr;
  uint64_t ticket = 0;
  Clock::time_point started;
  std::exception_ptr error;
  // Communicator::submit's on_complete: moved to the communicator's due list
  // when the call completes, run once the completing thread lets go.
  std::function<void()> on_complete;
  // The executor is done with it and its scratch went back (under the turn).
  bool retired = false;
  // Set (after `error`) once the call has completed and its on_complete, if
  // any, has returned, by whichever thread did that: a caller's or the
  // progress thread. Work::done(), is_completed() and wait() read it, so a
  // Work's on_complete has always run when its wait() returns.
  std::atomic<bool> finished{false};
};

// A call prepared once (Communicator::prepare) and started many times on the
// same buffers: its algorithm, Program, stamp and scratch fixed at prepare.
struct PlanState {
  CommunicatorImpl* comm = nullptr;
  std::weak_ptr<const void> alive;  // as WorkState::alive
  Call call;
  // Fixed at prepare for an ordinary collective; null where each start runs
  // the call as submit() does (a message, a deterministic or one-sided call,
  // an empty one).
  const Algorithm* algorithm = nullptr;
  uint8_t stamp_id = 0;
  std::shared_ptr<const PreparedProgram> program;
  std::chrono::milliseconds timeout{0};
  // The run in progress (or the last one); its scratch stays with it.
  std::shared_ptr<WorkState> work;
  // Destroyed while its run is outstanding: says so (the run goes on).
  ~PlanState();
};

class CommunicatorImpl {
 public:
  // `selector` null: the communicator makes its own (make_selector), which
  // may calibrate: collective then.
  CommunicatorImpl(std::unique_ptr<Transport> transport, Config config,
                   std::unique_ptr<Selector> selector = nullptr);
  ~CommunicatorImpl();

  int rank() const { return rank_; }
  int size() const { return size_; }
  Transport& transport() { return *transport_; }
  const Config& config() const { return config_; }
  // Whether this communicator keeps metrics (CHORUS_METRICS).
  bool has_metrics() const { return metrics_ != nullptr; }
  // A grow that failed after its generation was claimed spends it
  // (recovery/grow.cc): the next grow of this communicator takes the next one.
  void spend_generation(int generation) { config_.generation = generation; }
  // Each rank's host (CollectiveSpec::host_of); null for one rank.
  const std::shared_ptr<const std::vector<int>>& host_of() const { return host_of_; }
  Selector& selector() { return *selector_; }
  // Replaces the selector (every rank alike, no call in flight); the cached
  // picks and what its learner learned go with it.
  void set_selector(std::unique_ptr<Selector> selector) {
    selector_ = std::move(selector);
    plans_.clear();
    last_key_ = nullptr;
    last_plan_ = nullptr;
    last_learn_ = nullptr;
  }

  // Validates the call and starts it: a collective (submit_collective) or
  // one side of a message (submit_point_to_point).
  std::shared_ptr<WorkState> submit(const Call& call);
  // Send or receive of `count` elements to/from `peer` as a one-op Program on
  // the same engine (kind is OpKind::send or OpKind::recv;
  // schedule/program.h: point_to_point_program).
  std::shared_ptr<WorkState> submit_point_to_point(OpKind kind, const void* send, void* recv,
                                                   size_t count, DataType type, int peer,
                                                   const CallOptions& options);
  // Communicator::recv_any: finds the first rank whose next message to this
  // one has arrived (Transport::waiting_message), then receives it as
  // recv() from that rank; returns the rank.
  int recv_any(void* buf, size_t count, DataType type, const CallOptions& options);
  // submit(), and `on_complete` runs once the call has completed
  // (Communicator::submit).
  std::shared_ptr<WorkState> submit(const Call& call, std::function<void()> on_complete);
  // Waits at most `timeout` (Work::wait_for): whether the call completed;
  // rethrows its error.
  bool wait_for(WorkState& work, std::chrono::nanoseconds timeout);
  // A blocking call: submit and wait in one turn, so that the progress
  // thread is never woken for it.
  void run(const Call& call);
  // Takes the turn (from the progress thread, which lets go) and advances
  // until the call is done; rethrows its error.
  void wait(WorkState& work);
  // Never blocks: true once the call is done. Advances the executor once
  // where no other thread drives it.
  bool test(WorkState& work);

  // Communicator::prepare and Plan::start (engine/plan.cc).
  std::shared_ptr<PlanState> prepare_plan(const Call& call);
  std::shared_ptr<WorkState> start_plan(PlanState& plan);

  // The flight recorder as JSON (engine/flight_recorder.h).
  std::string flight_record();
  // Communicator::stragglers (engine/stragglers.h); `timeout` bounds its
  // ping-pongs and its exchange (0: CHORUS_TIMEOUT).
  std::vector<StragglerStats> stragglers(int window, std::chrono::milliseconds timeout = {});
  // Switches who advances outstanding work (CHORUS_PROGRESS), for the grids
  // that run both modes on one communicator: starts or stops the progress
  // thread. The thread that uses the communicator.
  void set_progress(ProgressMode mode);
  // The progress thread's rounds (ProgressThread::rounds); 0 without one.
  uint64_t progress_rounds() const { return progress_ ? progress_->rounds() : 0; }

  // With CHORUS_TRACE set: aligns this rank's clock with rank 0's (a few
  // point-to-point ping-pongs, so every rank calls it, at creation) and
  // records every op from then on; the trace is written at destruction.
  void start_trace();

  // Communicator::abort (cause aborted) and Communicator::revoke (cause
  // revoked): any thread, never blocks (see communicator.h). The first
  // request wins; later ones change nothing.
  void abort(std::string_view reason, ErrorCode cause = ErrorCode::aborted);
  // Whether the communicator is broken (a call failed, or it was aborted or
  // revoked): what shrink() starts from. The thread that uses it only.
  bool broken() const { return broken_ != nullptr; }
  // Ends the communicator for shrink(): revokes it where it still works, so
  // that every rank learns of the shrink, and hands the recovery link over.
  std::shared_ptr<RecoveryLink> revoke_for_recovery();
  // The link shrink() agrees over (api/recovery.h); null where the
  // communicator was made without one, or it was handed over already.
  const std::shared_ptr<RecoveryLink>& recovery() const { return recovery_; }

  // Communicator::window: a collective allocation of `bytes` on every rank.
  std::shared_ptr<SharedWindow> create_window(size_t bytes);

  // The exchanges of chorus's own set-up (groups/derive.cc), as calls of this
  // communicator in the order of its other calls: an allgather of `bytes`
  // per rank (`all` receives size() * bytes, rank r's at r * bytes) ...
  void setup_allgather(const void* mine, void* all, size_t bytes);
  // ... and one message to or from `peer`, blocking: kind is OpKind::send or OpKind::recv. It
  // carries kSetupTag, which no user call can, so that a user's message never meets it quietly.
  void setup_message(OpKind kind, void* buf, size_t bytes, int peer);
  static constexpr int kSetupTag = -1;

  // Deterministic calls (engine/deterministic.cc): the plan a deterministic
  // `call` runs (algorithms/deterministic.h: its road and parts, each part's
  // algorithm as this communicator's selector picks it now), for `count`
  // elements of it (a piece; the call's count by default); and what it runs
  // in a word: "gather", "scatter", or the integer pass's algorithm.
  DeterministicPlan deterministic_plan(const Call& call, size_t count = 0);
  std::string deterministic_pick(const Call& call);
  // The calls the last deterministic call ran (every piece's), with the
  // algorithm each ran with, and its plan (the last piece's): the tests hold
  // the runtime to its description with them.
  struct DeterministicRan {
    Collective collective;
    size_t count;
    DataType type;
    ReduceOp op;
    std::string algorithm;
  };
  const std::vector<DeterministicRan>& deterministic_ran() const { return det_ran_; }
  const DeterministicPlan& last_deterministic_plan() const { return det_last_; }

  // The algorithm a call would use (after overrides and fallback).
  const Algorithm& choose(const CollectiveSpec& spec, const CallOptions& options) {
    return selector_->choose(spec, options.algorithm);
  }
  // The algorithm the next call of (spec, type, op) runs once the learner's
  // class has decided: its winner when it has one, else choose()'s.
  const Algorithm& current_algorithm(const CollectiveSpec& spec, DataType type, ReduceOp op,
                                     const CallOptions& options);

 private:
  // The spec of a collective call on this communicator (hosts, windows).
  CollectiveSpec spec_of(const Call& call) const;
  // Picks the algorithm, builds (or reuses) the program, starts it.
  std::shared_ptr<WorkState> submit_collective(const Call& call);
  // Deterministic reductions (engine/deterministic.cc): whether `call` is one
  // (CallOptions::deterministic or CHORUS_DETERMINISTIC, on a floating sum or
  // avg; a floating prod raises), and the call, run to its end as calls of
  // this communicator on integers.
  bool deterministic(const Call& call) const;
  std::shared_ptr<WorkState> submit_deterministic(const Call& call);
  // Submits part k of a deterministic `whole` and waits for it; its stamp says
  // so (CallStamp::part).
  void run_part(Collective whole, uint32_t k, const Call& call);
  uint32_t part_ = 0;  // CallStamp::part of the call being submitted
  int part_root_ = 0;  // CallStamp::root of its parts: a deterministic Reduce's root
  // Their buffers, kept from call to call (each at most a piece's worth).
  struct DeterministicBuffers {
    std::vector<uint8_t> scales;
    std::vector<int64_t> fixed;
    std::vector<int64_t> result;
    std::vector<int64_t> specials;
    std::vector<int64_t> special_sums;
    std::vector<std::byte> gathered;
    std::vector<std::byte> block;
    std::vector<std::byte> padded;
    std::vector<std::byte> result_elements;
  };
  DeterministicBuffers det_;
  DeterministicPlan det_last_;
  std::vector<DeterministicRan> det_ran_;
  void validate(const Call& call) const;
  // What runs a call: its algorithm and prepared Program.
  struct Plan {
    const Algorithm* algorithm = nullptr;
    uint8_t stamp_id = 0;  // the algorithm in call stamps (algorithm_stamp_id)
    std::shared_ptr<const PreparedProgram> program;
  };
  // Everything the choice and the Program depend on besides the fixed config
  // and selector.
  struct PlanKey {
    Collective collective = Collective::allreduce;
    size_t count = 0;
    size_t elem_size = 0;
    int root = 0;
    bool average = false;
    bool window_buffers = false;
    std::string algorithm_option;        // CallOptions::algorithm
    const Algorithm* learned = nullptr;  // the learner's candidate for the call
    auto operator<=>(const PlanKey&) const = default;
  };
  // `learned`: the learner's candidate, taken where it serves the call on
  // every rank (else the selector's choice).
  const Plan& plan_for(const CollectiveSpec& spec, const CallOptions& options,
                       const Algorithm* learned = nullptr);
  void fail_all(std::exception_ptr error);
  // Enters call `stamp` on the transport (which raises a peer's abort);
  // fails the communicator on an error.
  void begin_call(const CallStamp& stamp);
  // A transport's StampMismatch in words with the algorithms' names; any
  // other error as it is.
  std::exception_ptr explain(std::exception_ptr error) const;
  // Throws Error(aborted) once abort() was asked for.
  void check_abort();
  // At the start of a new call: rethrows the failure that broke the
  // communicator, or fails it now if an abort was asked for.
  void enter_call();
  // Holds the communicator's Turn for a caller's scope (submit, wait, test,
  // the set-up exchanges): the progress thread lets go first. On the
  // outermost release with calls outstanding, the progress thread is kicked
  // so that they advance while the caller is away.
  class Hold {
   public:
    explicit Hold(CommunicatorImpl& c) : c_(c), owns_(true) { c_.turn_.lock(); }
    // Only where no other thread holds the turn (owns() says).
    Hold(CommunicatorImpl& c, std::try_to_lock_t) : c_(c), owns_(c_.turn_.try_lock()) {}
    ~Hold();
    bool owns() const { return owns_; }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    CommunicatorImpl& c_;
    bool owns_;
  };
  // The progress thread's round: takes the turn where no caller holds or
  // wants it and drives the executor until nothing is outstanding or a
  // caller asks for the turn.
  void advance();
  // One-sided calls, before the first op of call `stamp`: the control window
  // at the first use, the call's stamp in this rank's record (so that peers
  // compare it before reading), the staging window grown where the Program
  // needs more, and the places its peers read. The exchanges this takes are
  // part of the call: they carry its stamp and end at its deadline.
  void prepare_one_sided(const Call& call, const CollectiveSpec& spec,
                         const PreparedProgram& program, const CallStamp& stamp, Deadline deadline);
  // An allgather of one WindowRecord per rank (how the ranks of a window
  // exchange their files): inside a one-sided call, a part of that call
  // (exchange_call_); else a collective call of its own.
  std::vector<WindowRecord> exchange_records(const WindowRecord& mine);
  // An allgather of `bytes` per rank (a ring of the bytes), as
  // setup_allgather says: a collective call of its own, or inside a one-sided
  // call, a part of it (exchange_call_).
  // `what` names it in errors and the flight recorder; `timeout` (0: the
  // communicator's) bounds it when it is a call of its own.
  void exchange(const void* mine, void* all, size_t bytes, std::string_view what = "exchange",
                std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // The learner's agreement for class `c` (LearnClass::due): waits out the
  // calls in flight, exchanges every rank's figures (a call of its own,
  // bounded by `timeout`), moves the class on with their maximum, and on
  // rank 0 stores a decision in the calibration cache.
  void learn_agree(LearnClass& c, std::chrono::milliseconds timeout);
  bool store_warned_ = false;
  LearnClass* last_learn_ = nullptr;  // the last call's class (classes never move)
  // Warns once that the learner's picks could not be stored (`why`; "" is
  // fine).
  void warn_store(const std::string& why);
  // The learner's key of a call.
  static LearnKey learn_key(const Call& call, const CollectiveSpec& spec);
  struct ExchangeCall {
    CallStamp stamp;
    Deadline deadline;
    std::string_view collective;
    std::string_view algorithm;
  };
  std::optional<ExchangeCall> exchange_call_;
  void retire(const std::shared_ptr<WorkState>& work);
  // Retires every outstanding call whose execution is done, in order.
  void retire_done();
  // A recycled or new WorkState for one call.
  std::shared_ptr<WorkState> new_work();

  // Held while the communicator lives; WorkStates watch it (WorkState::alive).
  std::shared_ptr<const void> alive_ = std::make_shared<int>(0);
  std::unique_ptr<Transport> transport_;
  // Declared before the engine, which points to it: destroyed after it.
  std::unique_ptr<Tracer> tracer_;
  int trace_index_ = 0;  // K of the trace file's name (exec/trace.h)
  int rank_;             // transport_'s, read once: the checks use them on every call
  int size_;
  Config config_;
  Engine engine_;
  std::unique_ptr<Selector> selector_;
  // Each rank's host (Transport::host_layout, which the bootstrap fills in
  // from the ranks' host identities; one host where it is empty), which every
  // call's spec carries (CollectiveSpec::host_of); null for one rank.
  std::shared_ptr<const std::vector<int>> host_of_;
  // Where the ranks meet to shrink (transport/recovery_link.h); it lives as
  // long as this communicator, whatever befalls the transport.
  std::shared_ptr<RecoveryLink> recovery_;
  // Shared windows, where the transport shares memory (shm, inproc).
  std::unique_ptr<WindowSet> windows_;
  ScratchPool pool_;
  std::vector<std::shared_ptr<WorkState>> outstanding_;
  std::exception_ptr broken_;  // set once a call failed: the communicator is unusable
  // Call numbering for the stamps: collective calls on this communicator,
  // and point-to-point messages per peer and direction.
  uint32_t collective_seq_ = 0;
  std::vector<uint32_t> sent_to_;
  std::vector<uint32_t> received_from_;
  FlightRecorder recorder_;
  // With CHORUS_METRICS: this communicator's counters (engine/metrics.h).
  std::shared_ptr<CallMetrics> metrics_;
  // Counts the call of flight record `record` that ended at `now`.
  void count_call(uint64_t record, Deadline now);
  // The call number up to which stragglers() has counted last arrivers in
  // the metrics (each call once).
  uint32_t stragglers_counted_ = 0;
  std::vector<StragglerStats> last_stragglers_;  // the last report
  // This rank's clock offset to rank 0 and its error bar, in ns, from
  // kClockRounds ping-pongs with rank 0 (every rank calls it).
  std::pair<int64_t, int64_t> measure_clock(std::chrono::milliseconds timeout);
  // CHORUS_STRAGGLERS=1: rank 0 prints the summary as the communicator ends.
  void print_stragglers_summary();
  // Who drives the executor (engine/progress.h); the progress thread, in
  // CHORUS_PROGRESS=thread, is declared last so that it goes first.
  Turn turn_{[this] { transport_->interrupt(); }};
  std::atomic<bool> abort_requested_{false};
  ErrorCode abort_cause_ = ErrorCode::aborted;  // under abort_mu_, as abort_reason_
  std::atomic<bool> abort_carried_out_{false};  // fail_all ran after the request
  std::mutex abort_mu_;
  std::string abort_reason_;  // under abort_mu_; set before abort_requested_
  // The one cache of picks: each recent call's algorithm and Program (Programs
  // are pure functions of the algorithm and the call). `last_plan_` points at
  // the last call's entry, so that a loop of equal calls skips the lookup.
  std::map<PlanKey, Plan> plans_;
  const PlanKey* last_key_ = nullptr;
  const Plan* last_plan_ = nullptr;
  // One-op programs of point-to-point calls, by (kind, peer, count).
  std::map<std::tuple<int, int, size_t>, std::shared_ptr<const PreparedProgram>> p2p_programs_;
  // WorkStates to recycle; one is free when only this list holds it.
  std::vector<std::shared_ptr<WorkState>> spare_work_;
  // on_complete callbacks of calls completed during the current turn; the
  // thread that lets go of the turn runs them (run_due), then marks their
  // Works finished.
  struct Due {
    std::function<void()> fn;
    std::shared_ptr<WorkState> work;  // null: its Work was finished already
  };
  std::vector<Due> due_;
  // Retires a call: its on_complete, if any, joins the due list, and the Work
  // is finished once that has run; without one it is finished now.
  void finish_or_defer(const std::shared_ptr<WorkState>& work);
  // Takes the due callbacks (under the turn) ...
  std::vector<Due> take_due() { return std::exchange(due_, {}); }
  // ... and runs them after the turn is let go; one that throws is logged.
  void run_due(std::vector<Due> due);
  // A caller's wait found its Work retired but its on_complete still running
  // on another thread: waits for that (or returns at once inside that very
  // callback, which must not wait for itself).
  static void await_callback(WorkState& w);
  // Set under the turn by the destructor: the progress thread no longer
  // takes the turn.
  bool closing_ = false;
  std::unique_ptr<ProgressThread> progress_;
};

// The implementation behind a Communicator, for chorus's own layers and tools
// (the developer library); not part of the API.
struct Access {
  static CommunicatorImpl& impl(const Communicator& comm);
};
inline CommunicatorImpl& impl_of(const Communicator& comm) {
  return Access::impl(comm);
}
}  // namespace detail

// Wraps a transport into a Communicator.
Communicator make_communicator(std::unique_ptr<Transport> transport, Config config);

}  // namespace chorus
