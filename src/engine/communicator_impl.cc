// CommunicatorImpl's calls: argument checks, the plan cache, submission,
// completion, failure and abort (communicator_impl.h). The exchanges it runs
// outside the user's calls (windows, one-sided set-up, trace clocks) are in
// communicator_exchanges.cc; the public handles in communicator.cc.
#include "engine/communicator_impl.h"
#include "engine/call_site.h"

#include "bootstrap/bootstrap.h"
#include "core/check.h"
#include "core/log.h"
#include "core/reduce_kernels.h"

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

namespace chorus {
namespace detail {

namespace {

constexpr size_t kProgramCacheEntries = 256;
// WorkStates kept for reuse: a blocking loop needs one; a few more cover
// short bursts of non-blocking calls.
constexpr size_t kSpareWork = 8;

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

ScratchPool::Buffer ScratchPool::take(size_t bytes) {
  if (bytes == 0) return {};
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes)) best = it;
  if (best != free_.end()) {
    Buffer b = std::move(*best);
    free_.erase(best);
    return b;
  }
  // Default-initialized: scratch is always written before it is read.
  std::byte* data = new (std::nothrow) std::byte[bytes];
  if (data == nullptr)
    fail(ErrorCode::system, "cannot allocate ", bytes, " bytes of scratch memory for this call");
  return {std::unique_ptr<std::byte[]>(data), bytes};
}

void ScratchPool::give(Buffer buffer) {
  if (buffer.bytes == 0 || buffer.data == nullptr) return;
  constexpr size_t kKeep = 4;
  free_.push_back(std::move(buffer));
  if (free_.size() > kKeep) {
    auto smallest =
        std::min_element(free_.begin(), free_.end(),
                         [](const Buffer& a, const Buffer& b) { return a.bytes < b.bytes; });
    free_.erase(smallest);
  }
}

namespace {

// The tuner groups ranks into hosts by Config::host_id; fill in the
// bootstrap's own identity where CHORUS_HOST_ID did not name one.
Config with_host_id(Config c) {
  if (c.host_id.empty()) c.host_id = host_identity();
  return c;
}

}  // namespace

CommunicatorImpl::CommunicatorImpl(std::unique_ptr<Transport> transport, Config config,
                                   std::unique_ptr<Selector> selector)
    : transport_(std::move(transport)),
      rank_(transport_->rank()),
      size_(transport_->size()),
      config_(std::move(config)),
      engine_(*transport_),
      selector_(selector ? std::move(selector) : make_selector(*transport_, with_host_id(config_))),
      host_of_(size_ > 1 ? std::make_shared<const std::vector<int>>(
                               transport_->host_layout().size() == static_cast<size_t>(size_)
                                   ? transport_->host_layout()
                                   : std::vector<int>(static_cast<size_t>(size_), 0))
                         : nullptr),
      recovery_(transport_->recovery_link()),
      sent_to_(static_cast<size_t>(size_), 0),
      received_from_(static_cast<size_t>(size_), 0) {
  engine_.set_stop(&abort_requested_, [this] { check_abort(); });
  engine_.set_stream_bytes(config_.stream_bytes);
  engine_.set_spin(config_.spin);
  if (transport_->shares_memory()) {
    windows_ = std::make_unique<WindowSet>(
        rank_, size_, [this](const WindowRecord& mine) { return exchange_records(mine); });
    engine_.set_windows(windows_.get());
  }
  if (!config_.metrics.empty()) {
    // A derived communicator counts under its parent's rank (Config::metrics_rank).
    if (config_.metrics_rank < 0) config_.metrics_rank = rank_;
    metrics_ = register_metrics(config_.metrics, config_.metrics_interval, config_.metrics_rank,
                                size_, std::string(transport_->name()));
  }
  if (config_.progress == ProgressMode::thread && size_ > 1)
    progress_ = std::make_unique<ProgressThread>([this] { advance(); }, config_.progress_cpu);
}

void CommunicatorImpl::count_call(uint64_t record, Deadline now) {
  const FlightRecorder::Entry* e = recorder_.entry(record);
  if (e == nullptr) return;
  metrics_->call_done(e->call, e->algorithm, e->count * dtype_size(e->type),
                      std::chrono::duration<double>(now - e->start).count());
}

CommunicatorImpl::Hold::~Hold() {
  if (!owns_) return;
  if (!c_.turn_.outermost()) {
    c_.turn_.unlock();
    return;
  }
  const bool more = c_.progress_ != nullptr && !c_.outstanding_.empty();
  auto due = c_.take_due();
  c_.turn_.unlock();
  if (more) c_.progress_->kick();
  if (!due.empty()) c_.run_due(std::move(due));
}

void CommunicatorImpl::set_progress(ProgressMode mode) {
  Hold hold(*this);
  config_.progress = mode;
  if (mode == ProgressMode::caller)
    progress_.reset();  // under the turn: the thread has let go of it
  else if (progress_ == nullptr && size_ > 1)
    progress_ = std::make_unique<ProgressThread>([this] { advance(); }, config_.progress_cpu);
}

namespace {

// The Work whose on_complete this thread is running, if any.
thread_local const WorkState* running_callback = nullptr;

}  // namespace

void CommunicatorImpl::run_due(std::vector<Due> due) {
  for (Due& d : due) {
    running_callback = d.work.get();
    try {
      d.fn();
    } catch (const std::exception& e) {
      log_message(config_.log_level, LogLevel::warn, rank_,
                  "a call's on_complete raised: ", e.what());
    } catch (...) {
      log_message(config_.log_level, LogLevel::warn, rank_,
                  "a call's on_complete raised a non-standard exception");
    }
    running_callback = nullptr;
    if (d.work != nullptr) {
      d.work->finished.store(true, std::memory_order_release);
      d.work->finished.notify_all();
    }
  }
}

void CommunicatorImpl::await_callback(WorkState& w) {
  if (running_callback == &w) return;
  w.finished.wait(false, std::memory_order_acquire);
}

void CommunicatorImpl::finish_or_defer(const std::shared_ptr<WorkState>& w) {
  w->retired = true;
  if (w->on_complete) {
    due_.push_back({std::exchange(w->on_complete, nullptr), w});
  } else {
    w->finished.store(true, std::memory_order_release);
  }
}

void CommunicatorImpl::advance() {
  if (!turn_.try_lock_for_progress()) return;  // a caller drives; it kicks again when it leaves
  if (closing_) {
    turn_.unlock_progress();
    return;
  }
  if (!broken_) {
    try {
      engine_.drive(turn_.wanted());
    } catch (...) {
      fail_all(std::current_exception());
    }
    retire_done();
  }
  auto due = take_due();
  turn_.unlock_progress();
  if (!due.empty()) run_due(std::move(due));
}

void CommunicatorImpl::check_abort() {
  if (!abort_requested_.load(std::memory_order_acquire)) return;
  std::string reason;
  ErrorCode cause = ErrorCode::aborted;
  {
    std::lock_guard lock(abort_mu_);
    reason = abort_reason_;
    cause = abort_cause_;
  }
  fail(cause, "rank ", rank_, ": ", to_string(cause), ": ", reason);
}

void CommunicatorImpl::enter_call() {
  if (broken_) std::rethrow_exception(broken_);
  if (abort_requested_.load(std::memory_order_acquire)) {
    try {
      check_abort();
    } catch (...) {
      fail_all(std::current_exception());
      throw;
    }
  }
}

void CommunicatorImpl::abort(std::string_view reason, ErrorCode cause) {
  {
    std::lock_guard lock(abort_mu_);
    if (abort_requested_.load(std::memory_order_relaxed)) return;
    abort_reason_ = std::string(reason);
    abort_cause_ = cause;
  }
  abort_requested_.store(true, std::memory_order_release);
  transport_->interrupt();
  // A thread inside a call notices the request (the interrupt wakes it) and
  // fails the communicator itself. With none inside, carry it out here; a
  // call that is just ending may have missed it, so try for a while, but
  // never block on the other thread.
  constexpr auto kPatience = std::chrono::milliseconds(50);
  const auto give_up = Clock::now() + kPatience;
  while (!abort_carried_out_.load(std::memory_order_acquire)) {
    if (turn_.try_lock()) {
      if (!broken_) {
        try {
          check_abort();
        } catch (...) {
          fail_all(std::current_exception());
        }
      }
      abort_carried_out_.store(true, std::memory_order_release);
      auto due = take_due();
      turn_.unlock();
      if (!due.empty()) run_due(std::move(due));
      return;
    }
    if (Clock::now() >= give_up) return;
    std::this_thread::yield();
  }
}

std::shared_ptr<RecoveryLink> CommunicatorImpl::revoke_for_recovery() {
  Hold hold(*this);
  if (!recovery_)
    fail(ErrorCode::invalid_argument, CallSite{rank_, "shrink"},
         "this communicator was made without a recovery link, so it cannot shrink");
  if (!broken_) {
    try {
      fail(ErrorCode::revoked, "rank ", rank_, ": revoked: shrink() called on rank ", rank_);
    } catch (...) {
      fail_all(std::current_exception());
    }
  }
  // The old communicator's windows go now (a Window handle keeps its own
  // memory); the new one makes its own.
  engine_.set_windows(nullptr);
  windows_.reset();
  return recovery_;
}

CommunicatorImpl::~CommunicatorImpl() {
  // CHORUS_STRAGGLERS=1: a last report, while the progress thread still runs.
  // Not for derived communicators (split, shrink, grow): the job's own one.
  if (config_.stragglers_summary && !config_.derived && size_ > 1 && !broken_)
    print_stragglers_summary();
  if (progress_) {
    // Taking the turn makes the progress thread let go of it, and with
    // closing_ set it never takes it again. The thread is joined without the
    // turn: it may be running an on_complete that calls into this
    // communicator.
    turn_.lock();
    closing_ = true;
    turn_.unlock();
    progress_.reset();
  }
  if (metrics_) flush_metrics();  // the file holds this communicator's last calls
  // The learner's decisions held back from the cache (Selector::note_learned).
  if (rank_ == 0 && selector_ != nullptr) {
    try {
      warn_store(selector_->flush_learned());
    } catch (...) {
      // A destructor gives up the write rather than throw.
    }
  }
  if (tracer_ == nullptr) return;
  engine_.set_tracer(nullptr);
  try {
    const std::string problem = tracer_->write(config_.trace_dir, trace_index_, transport_->name());
    if (!problem.empty()) log_message(config_.log_level, LogLevel::warn, rank_, "trace: ", problem);
  } catch (...) {
    // A destructor gives up the trace rather than throw.
  }
}

void CommunicatorImpl::validate(const Call& c) const {
  const CallSite where{rank(), to_string(c.collective)};
  if (!is_valid(c.type))
    fail(ErrorCode::invalid_argument, where, "invalid DataType value ", static_cast<int>(c.type));
  if (!is_valid(c.op))
    fail(ErrorCode::invalid_argument, where, "invalid ReduceOp value ", static_cast<int>(c.op));
  if (!is_valid(c.collective))
    fail(ErrorCode::invalid_argument, where, "invalid Collective value ",
         static_cast<int>(c.collective));
  if (reduces(c.collective) && !applies(c.op, c.type))
    fail(ErrorCode::invalid_argument, where, "ReduceOp ", to_string(c.op),
         " applies to integer types only, not ", to_string(c.type));
  if (rooted(c.collective) && (c.root < 0 || c.root >= size()))
    fail(ErrorCode::invalid_argument, where, "root ", c.root, " outside [0, ", size(), ")");
  if (c.options.timeout.count() < 0)
    fail(ErrorCode::invalid_argument, where, "negative timeout ", c.options.timeout.count(), " ms");
  if (!has_data(c.collective)) return;

  const size_t es = dtype_size(c.type);
  CollectiveSpec spec{c.collective, size(), rank(), c.count, es, c.root};
  const BufferCounts counts = buffer_counts(spec);
  const size_t in_bytes = checked_mul(counts.input, es, "input size");
  const size_t out_bytes = checked_mul(counts.output, es, "output size");
  // Which buffers this rank touches: broadcast reads send on the root only,
  // reduce writes recv on the root only.
  const bool uses_send = uses_input(c.collective, rank(), c.root);
  const bool uses_recv = uses_output(c.collective, rank(), c.root);
  if (uses_send && in_bytes > 0 && c.send == nullptr)
    fail(ErrorCode::invalid_argument, where, "send buffer is null with count ", c.count);
  if (uses_recv && out_bytes > 0 && c.recv == nullptr)
    fail(ErrorCode::invalid_argument, where, "recv buffer is null with count ", c.count);
  if (!uses_send || !uses_recv) return;
  if (!overlaps(c.send, in_bytes, c.recv, out_bytes)) return;
  // Overlap is allowed only in the exact in-place form.
  const auto* s = static_cast<const std::byte*>(c.send);
  const auto* r = static_cast<const std::byte*>(c.recv);
  bool in_place = false;
  if (auto off = in_place_input_offset(spec)) in_place = s == r + *off * es;
  if (auto off = in_place_output_offset(spec)) in_place = r == s + *off * es;
  if (!in_place)
    fail(ErrorCode::invalid_argument, where,
         "send and recv buffers overlap but are not the in-place form of this collective");
}

const CommunicatorImpl::Plan& CommunicatorImpl::plan_for(const CollectiveSpec& spec,
                                                         const CallOptions& options,
                                                         const Algorithm* learned) {
  if (last_key_ != nullptr && last_key_->collective == spec.collective &&
      last_key_->count == spec.count && last_key_->elem_size == spec.elem_size &&
      last_key_->root == spec.root && last_key_->average == spec.average &&
      last_key_->window_buffers == spec.window_buffers && last_key_->learned == learned &&
      last_key_->algorithm_option == options.algorithm)
    return *last_plan_;
  PlanKey key{spec.collective, spec.count,          spec.elem_size,    spec.root,
              spec.average,    spec.window_buffers, options.algorithm, learned};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    const Algorithm& algo = learned != nullptr && supported_everywhere(*learned, spec)
                                ? *learned
                                : choose(spec, options);
    Plan plan{&algo, algorithm_stamp_id(algo), prepare(build_program(algo, spec))};
    if (plans_.size() >= kProgramCacheEntries) {
      plans_.clear();  // keep the cache bounded; entries are cheap to rebuild
      last_key_ = nullptr;
    }
    it = plans_.emplace(std::move(key), std::move(plan)).first;
  }
  last_key_ = &it->first;
  last_plan_ = &it->second;
  return it->second;
}

LearnKey CommunicatorImpl::learn_key(const Call& call, const CollectiveSpec& spec) {
  return {call.collective, call.type, reduces(call.collective) ? call.op : ReduceOp::sum,
          size_class_of(spec.count * spec.elem_size), spec.window_buffers};
}

const Algorithm& CommunicatorImpl::current_algorithm(const CollectiveSpec& spec, DataType type,
                                                     ReduceOp op, const CallOptions& options) {
  if (selector_->learns(spec, options.algorithm)) {
    Call call;
    call.collective = spec.collective;
    call.type = type;
    call.op = op;
    const auto& classes = selector_->learner()->classes();
    if (auto it = classes.find(learn_key(call, spec)); it != classes.end())
      if (supported_everywhere(it->second.current(), spec)) return it->second.current();
  }
  return choose(spec, options);
}

std::shared_ptr<WorkState> CommunicatorImpl::new_work() {
  for (auto& w : spare_work_) {
    if (w.use_count() != 1) continue;           // a Work handle or the engine still holds it
    pool_.give(std::exchange(w->scratch, {}));  // a failed call's, if any
    w->error = nullptr;
    w->finished = false;
    w->retired = false;
    w->learn = nullptr;
    w->ticket = 0;
    return w;
  }
  auto w = std::make_shared<WorkState>();
  w->comm = this;
  w->alive = alive_;
  if (spare_work_.size() < kSpareWork) spare_work_.push_back(w);
  return w;
}

std::shared_ptr<WorkState> CommunicatorImpl::submit(const Call& call) {
  Hold hold(*this);
  const bool message = call.kind == Call::Kind::send || call.kind == Call::Kind::recv;
  // Negative tags are chorus's own (kSetupTag).
  if (message && call.options.tag < 0)
    fail(ErrorCode::invalid_argument,
         CallSite{rank(), call.kind == Call::Kind::send ? "send to peer" : "recv from peer",
                  call.peer},
         "negative tag ", call.options.tag);
  switch (call.kind) {
    case Call::Kind::collective:
      return deterministic(call) ? submit_deterministic(call) : submit_collective(call);
    case Call::Kind::send:
      return submit_point_to_point(OpKind::send, call.send, nullptr, call.count, call.type,
                                   call.peer, call.options);
    case Call::Kind::recv:
      return submit_point_to_point(OpKind::recv, nullptr, call.recv, call.count, call.type,
                                   call.peer, call.options);
  }
  fail(ErrorCode::invalid_argument, CallSite{rank(), "submit"}, "invalid Call::Kind value ",
       static_cast<int>(call.kind));
}

CollectiveSpec CommunicatorImpl::spec_of(const Call& call) const {
  const size_t es = has_data(call.collective) ? dtype_size(call.type) : 1;
  const bool average = call.op == ReduceOp::avg && reduces(call.collective);
  CollectiveSpec spec{call.collective,       size_,  rank_, call.count, es, call.root,
                      config_.segment_bytes, average};
  spec.host_of = host_of_;
  if (windows_) {
    spec.windows = true;
    const BufferCounts counts = buffer_counts(spec);
    SharedPlace unused;
    spec.window_buffers = call.send != nullptr && call.recv != nullptr &&
                          windows_->find_user_window(call.send, counts.input * es, unused) &&
                          windows_->find_user_window(call.recv, counts.output * es, unused);
  }
  return spec;
}

std::shared_ptr<WorkState> CommunicatorImpl::submit_collective(const Call& call) {
  Hold hold(*this);
  enter_call();
  validate(call);
  const CallOptions& options = call.options;
  const bool empty = has_data(call.collective) && call.count == 0;
  if (empty || (size() == 1 && call.collective == Collective::barrier)) {
    // No message: a number all the same, so that the calls after it keep
    // theirs on every rank.
    CallStamp empty_stamp = collective_stamp(++collective_seq_, call.collective, 0, call.type,
                                             call.op, call.count, call.root);
    empty_stamp.part = part_;
    begin_call(empty_stamp);
    auto work = new_work();
    work->retired = true;
    work->finished = true;  // nothing to move (as NCCL: count 0 returns at once)
    const Deadline now = Clock::now();
    work->record = recorder_.start(collective_seq_, to_string(call.collective), {}, call.type,
                                   call.op, call.count, call.root, -1, now);
    recorder_.finish(work->record, now);
    if (metrics_) count_call(work->record, now);
    return work;
  }
  const size_t es = has_data(call.collective) ? dtype_size(call.type) : 1;
  const CollectiveSpec spec = spec_of(call);
  const auto timeout = options.timeout.count() > 0 ? options.timeout : config_.timeout;
  // The learner's candidate for this call, where it decides the call.
  LearnClass* learning = nullptr;
  LearnStep step;
  const Algorithm* learned = nullptr;
  if (selector_->learns(spec, options.algorithm)) {
    // The class of the last call is the likely one (a loop of one call).
    const LearnKey key = learn_key(call, spec);
    if (last_learn_ != nullptr && last_learn_->key() == key) {
      learning = last_learn_;
    } else {
      learning = selector_->learner()->at(key, [&] { return selector_->learn_candidates(spec); });
      last_learn_ = learning;
    }
    if (learning != nullptr) {
      if (learning->due() != Agreement::none) learn_agree(*learning, timeout);
      step = learning->next();
      learned = learning->candidates()[static_cast<size_t>(step.candidate)].algorithm;
    }
  }
  // A timed call's time starts here: a one-sided call's meeting with its
  // peers (prepare_one_sided) is part of what it costs.
  const auto call_start = learning != nullptr ? Clock::now() : Clock::time_point{};
  const Plan& plan = plan_for(spec, options, learned);
  const std::shared_ptr<const PreparedProgram> program = plan.program;
  CallStamp stamp = collective_stamp(++collective_seq_, call.collective, plan.stamp_id, call.type,
                                     call.op, call.count, call.root);
  stamp.part = part_;
  // A part of a deterministic Reduce carries its root, so that ranks that
  // disagree on it meet a mismatch on every road (an AllGather has none).
  if (part_ != 0) stamp.root = part_root_;
  if (part_ != 0)
    det_ran_.push_back(
        {call.collective, call.count, call.type, call.op, std::string(plan.algorithm->name)});
  begin_call(stamp);
  // One-sided calls meet their peers before the first op (the exchanges of
  // prepare_one_sided), so their deadline starts here.
  const Deadline one_sided_deadline =
      program->one_sided ? deadline_after(timeout, Clock::now()) : Deadline::max();
  if (program->one_sided) {
    try {
      prepare_one_sided(call, spec, *program, stamp, one_sided_deadline);
    } catch (...) {
      fail_all(std::current_exception());
      std::rethrow_exception(broken_);
    }
  }
  auto work = new_work();
  work->scratch = pool_.take(program->program.scratch_count * es);
  ExecBuffers buffers{call.send, call.recv, work->scratch.data.get(),
                      windows_ ? windows_->staging() : nullptr};
  work->exec.restart(program, buffers, call.type, call.op,
                     CallLabel{to_string(call.collective), plan.algorithm->name}, Deadline::max(),
                     stamp);
  auto record = [&](Deadline now) {
    work->record =
        recorder_.start(stamp.seq, to_string(call.collective), plan.algorithm->name, call.type,
                        call.op, call.count, rooted(call.collective) ? call.root : -1, -1, now);
  };
  if (learning != nullptr && plan.algorithm == learned && step.ticket != 0) {
    work->learn = learning;
    work->ticket = step.ticket;
    work->started = call_start;
    if (metrics_) metrics_->exploration(to_string(call.collective));
  }
  try {
    // Aliasing: the engine's pointer keeps the WorkState alive, no allocation.
    engine_.enqueue(std::shared_ptr<Execution>(work, &work->exec));
  } catch (...) {
    record(Clock::now());
    outstanding_.push_back(work);  // so that fail_all records why
    fail_all(std::current_exception());
    throw;
  }
  // After enqueue, which has published the first small messages already.
  const Deadline now = Clock::now();
  work->exec.set_deadline(program->one_sided ? one_sided_deadline : deadline_after(timeout, now));
  work->exec.set_started(now);
  record(now);
  outstanding_.push_back(work);
  return work;
}

std::shared_ptr<WorkState> CommunicatorImpl::submit_point_to_point(OpKind kind, const void* send,
                                                                   void* recv, size_t count,
                                                                   DataType type, int peer,
                                                                   const CallOptions& options) {
  Hold hold(*this);
  enter_call();
  const bool sending = kind == OpKind::send;
  CHORUS_CHECK(sending || kind == OpKind::recv);
  const std::string_view what = sending ? "send to peer" : "recv from peer";
  const CallSite where{rank(), what, peer};
  if (!is_valid(type))
    fail(ErrorCode::invalid_argument, where, "invalid DataType value ", static_cast<int>(type));
  if (peer < 0 || peer >= size())
    fail(ErrorCode::invalid_argument, where, "peer outside [0, ", size(), ")");
  if (peer == rank()) fail(ErrorCode::invalid_argument, where, "peer is this rank itself");
  if (options.timeout.count() < 0)
    fail(ErrorCode::invalid_argument, where, "negative timeout ", options.timeout.count(), " ms");
  if (options.tag < 0 && options.tag != kSetupTag)
    fail(ErrorCode::invalid_argument, where, "negative tag ", options.tag);
  checked_mul(count, dtype_size(type), "message size");
  if (count > 0 && (sending ? send == nullptr : recv == nullptr))
    fail(ErrorCode::invalid_argument, where, "buffer is null with count ", count);

  // One op; a zero-count message is still sent, so that it orders and matches.
  const std::tuple<int, int, size_t> key{static_cast<int>(kind), peer, count};
  if (p2p_programs_.size() >= kProgramCacheEntries && !p2p_programs_.count(key))
    p2p_programs_.clear();  // keep the cache bounded; entries are cheap to rebuild
  auto& cached = p2p_programs_[key];
  if (!cached) cached = prepare(point_to_point_program(kind, peer, count));
  uint32_t& number = (sending ? sent_to_ : received_from_)[static_cast<size_t>(peer)];
  const CallStamp stamp = point_to_point_stamp(++number, type, count, options.tag);
  begin_call(stamp);
  auto work = new_work();
  const auto timeout = options.timeout.count() > 0 ? options.timeout : config_.timeout;
  const Deadline now = Clock::now();
  work->exec.restart(cached, ExecBuffers{send, recv, nullptr}, type, ReduceOp::sum,
                     CallLabel{what, {}, peer}, deadline_after(timeout, now), stamp);
  work->record = recorder_.start(stamp.seq, what, {}, type, ReduceOp::sum, count, -1, peer, now);
  outstanding_.push_back(work);
  try {
    engine_.enqueue(std::shared_ptr<Execution>(work, &work->exec));
  } catch (...) {
    fail_all(std::current_exception());
    throw;
  }
  return work;
}

// Marks a call finished and returns its scratch;
// the caller removes it from outstanding_.
void CommunicatorImpl::retire(const std::shared_ptr<WorkState>& work) {
  WorkState& w = *work;
  if (w.retired) return;
  const Deadline now = Clock::now();
  recorder_.finish(w.record, now);
  if (metrics_ && !w.uncounted) count_call(w.record, now);
  if (!w.planned) pool_.give(std::exchange(w.scratch, {}));
  if (w.learn != nullptr && selector_->learner() != nullptr) {
    double seconds = std::chrono::duration<double>(now - w.started).count();
    if (const Learner::TimingHook& hook = selector_->learner()->timing_hook())
      seconds = hook(w.learn->key(), w.learn->algorithm_of(w.ticket), seconds);
    w.learn->record(w.ticket, seconds);
    w.learn = nullptr;
  }
  finish_or_defer(work);  // last: a thread that sees it finished may drop the Work
}

void CommunicatorImpl::retire_done() {
  size_t keep = 0;
  for (size_t i = 0; i < outstanding_.size(); ++i) {
    if (outstanding_[i]->exec.done()) {
      retire(outstanding_[i]);
    } else {
      outstanding_[keep++] = std::move(outstanding_[i]);
    }
  }
  outstanding_.resize(keep);
}

void CommunicatorImpl::begin_call(const CallStamp& stamp) {
  try {
    transport_->begin_call(stamp);
  } catch (...) {
    fail_all(std::current_exception());
    std::rethrow_exception(broken_);
  }
}

std::exception_ptr CommunicatorImpl::explain(std::exception_ptr error) const {
  try {
    std::rethrow_exception(error);
  } catch (const StampMismatch& m) {
    auto name = [](const CallStamp& s) { return algorithm_of_stamp_id(s.algorithm); };
    return std::make_exception_ptr(
        Error(ErrorCode::mismatch, str_cat("rank ", rank_, ": mismatched calls: ",
                                           describe_mismatch(m.peer, m.theirs, name(m.theirs),
                                                             m.rank, m.mine, name(m.mine)))));
  } catch (...) {
    return error;
  }
}

void CommunicatorImpl::fail_all(std::exception_ptr error) {
  error = explain(std::move(error));
  broken_ = error;
  try {
    std::rethrow_exception(error);
  } catch (const PeerAborted& e) {
    // Pass the origin on, not this rank's echo of it.
    transport_->abort(e.code(), e.origin);
  } catch (const Error& e) {
    transport_->abort(e.code(), e.what());
  } catch (const std::exception& e) {
    transport_->abort(ErrorCode::internal, e.what());
  }
  if (abort_requested_.load(std::memory_order_acquire))
    abort_carried_out_.store(true, std::memory_order_release);
  std::string what = "a non-standard exception";
  ErrorCode kind = ErrorCode::internal;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    what = e.what();
    kind = e.code();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  if (metrics_) count_metrics_error(kind);
  const Deadline now = Clock::now();
  for (auto& w : outstanding_) {
    if (w->retired) continue;
    w->error = error;
    recorder_.fail(w->record, what, w->exec.pending_summary(), now);
    finish_or_defer(w);
  }
  outstanding_.clear();
  if (!config_.flight_recorder_dir.empty()) {
    const std::string problem =
        recorder_.dump(config_.flight_recorder_dir, rank_, size_, transport_->name());
    if (!problem.empty())
      log_message(config_.log_level, LogLevel::warn, rank_, "flight recorder: ", problem);
  }
}

std::shared_ptr<WorkState> CommunicatorImpl::submit(const Call& call,
                                                    std::function<void()> on_complete) {
  Hold hold(*this);
  auto work = submit(call);
  if (work->finished) {
    due_.push_back({std::move(on_complete), nullptr});  // runs as this turn ends
  } else {
    work->on_complete = std::move(on_complete);
  }
  return work;
}

bool CommunicatorImpl::wait_for(WorkState& w, std::chrono::nanoseconds timeout) {
  if (!w.finished) {
    const Deadline until = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
    bool retired = false;
    {
      Hold hold(*this);
      if (!w.retired) {
        if (broken_) std::rethrow_exception(broken_);
        try {
          engine_.wait_until(w.exec, until);
        } catch (...) {
          fail_all(std::current_exception());
        }
        retire_done();
      }
      retired = w.retired;
    }  // runs the due on_complete callbacks, perhaps w's
    if (!retired) return false;
    if (!w.finished) await_callback(w);  // its on_complete runs on another thread
  }
  if (w.error) std::rethrow_exception(w.error);
  return true;
}

void CommunicatorImpl::run(const Call& call) {
  Hold hold(*this);
  wait(*submit(call));
}

void CommunicatorImpl::wait(WorkState& w) {
  if (!w.finished) {
    {
      Hold hold(*this);
      if (!w.retired) {
        if (broken_) std::rethrow_exception(broken_);
        try {
          engine_.wait(w.exec);
        } catch (...) {
          fail_all(std::current_exception());
        }
        // Earlier calls complete first on every rank; finish those that are done.
        retire_done();
      }
    }                                    // runs the due on_complete callbacks, perhaps w's
    if (!w.finished) await_callback(w);  // its on_complete runs on another thread
  }
  if (w.error) std::rethrow_exception(w.error);
}

bool CommunicatorImpl::test(WorkState& w) {
  if (w.finished) return true;
  // Another thread drives the executor (the progress thread, most often):
  // the flag is the answer, and it never waits for that thread.
  Hold hold(*this, std::try_to_lock);
  if (!hold.owns() || w.finished) return w.finished;
  if (broken_) return true;
  try {
    check_abort();
    engine_.poll();
  } catch (...) {
    fail_all(std::current_exception());
    return true;
  }
  retire_done();
  return w.finished;
}

std::string CommunicatorImpl::flight_record() {
  Hold hold(*this);
  return recorder_.to_json(rank_, size_, transport_->name());
}

int CommunicatorImpl::recv_any(void* buf, size_t count, DataType type, const CallOptions& options) {
  const CallSite where{rank(), "recv from any peer"};
  if (!is_valid(type))
    fail(ErrorCode::invalid_argument, where, "invalid DataType value ", static_cast<int>(type));
  if (size_ < 2) fail(ErrorCode::invalid_argument, where, "no other rank in this communicator");
  if (options.timeout.count() < 0)
    fail(ErrorCode::invalid_argument, where, "negative timeout ", options.timeout.count(), " ms");
  if (options.tag < 0) fail(ErrorCode::invalid_argument, where, "negative tag ", options.tag);
  checked_mul(count, dtype_size(type), "message size");
  if (count > 0 && buf == nullptr)
    fail(ErrorCode::invalid_argument, where, "buffer is null with count ", count);
  const auto timeout = options.timeout.count() > 0 ? options.timeout : config_.timeout;
  const Deadline deadline = deadline_after(timeout);
  int source = -1;
  {
    Hold hold(*this);
    enter_call();
    // Spins a little, then naps: a message may take a while. Every 5 ms it
    // asks whether each peer still lives (an exited, closed or aborted peer
    // is peer_failure), as a one-sided wait does: no posted request watches
    // the peers here.
    Deadline next_check = Clock::now();
    for (int round = 0; source < 0; ++round) {
      try {
        check_abort();
        engine_.poll();
        if (Clock::now() >= next_check) {
          for (int peer = 0; peer < size_; ++peer)
            if (peer != rank_) transport_->check_peer(peer);
          next_check = Clock::now() + std::chrono::milliseconds(5);
        }
      } catch (...) {
        fail_all(std::current_exception());
        std::rethrow_exception(broken_);
      }
      retire_done();
      // The ranks after this one first, so that no rank is always looked at last.
      for (int i = 1; i < size_ && source < 0; ++i) {
        const int peer = (rank_ + i) % size_;
        const std::optional<CallStamp> next = transport_->waiting_message(peer);
        if (next && next->point_to_point() && next->root == options.tag &&
            next->seq == received_from_[static_cast<size_t>(peer)] + 1)
          source = peer;
      }
      if (source >= 0) break;
      if (Clock::now() >= deadline)
        fail(ErrorCode::timeout, where, "no message with tag ", options.tag, " arrived within ",
             timeout.count(), " ms");
      if (round < 200)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  wait(*submit_point_to_point(OpKind::recv, nullptr, buf, count, type, source, options));
  return source;
}

}  // namespace detail
}  // namespace chorus
