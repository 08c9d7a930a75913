// Persistent calls: Communicator::prepare and Plan::start (communicator.h).
// prepare() does what every call of a shape would do before its first byte
// moves (checks, the algorithm choice, the Program, its scratch and the
// Execution's arrays); start() only numbers the call, stamps it and hands it
// to the executor.
#include "engine/call_site.h"
#include "engine/communicator_impl.h"

#include "core/log.h"

namespace chorus::detail {

PlanState::~PlanState() {
  if (work == nullptr || work->finished || alive.expired()) return;
  // A destructor reports rather than throws; the run keeps its state (the
  // executor holds its WorkState) and completes on its own.
  log_message(comm->config().log_level, LogLevel::warn, comm->rank(), "a Plan of ",
              to_string(call.collective),
              " was destroyed while its run was outstanding; the run completes unobserved");
}

std::shared_ptr<PlanState> CommunicatorImpl::prepare_plan(const Call& call) {
  Hold hold(*this);
  enter_call();
  auto plan = std::make_shared<PlanState>();
  plan->comm = this;
  plan->alive = alive_;
  plan->call = call;
  plan->timeout = call.options.timeout.count() > 0 ? call.options.timeout : config_.timeout;
  if (call.kind != Call::Kind::collective) {
    if (call.peer < 0 || call.peer >= size_ || call.peer == rank_)
      fail(ErrorCode::invalid_argument,
           CallSite{rank_, call.kind == Call::Kind::send ? "send to peer" : "recv from peer",
                    call.peer},
           "a plan's peer must be another rank in [0, ", size_, ")");
    return plan;
  }
  validate(call);
  const bool empty = has_data(call.collective) && call.count == 0;
  if (empty || deterministic(call) || (size_ == 1 && call.collective == Collective::barrier))
    return plan;
  const CollectiveSpec spec = spec_of(call);
  const Algorithm& algo = current_algorithm(spec, call.type, call.op, call.options);
  auto program = ::chorus::prepare(build_program(algo, spec));
  if (program->one_sided) return plan;  // its windows are set up per call
  plan->algorithm = &algo;
  plan->stamp_id = algorithm_stamp_id(algo);
  plan->program = program;
  auto work = std::make_shared<WorkState>();
  work->comm = this;
  work->alive = alive_;
  work->planned = true;
  work->retired = true;
  work->finished = true;  // no run yet
  work->scratch = pool_.take(program->program.scratch_count * spec.elem_size);
  // Sizes the Execution's per-op arrays now, so that start() allocates nothing.
  work->exec.restart(program,
                     ExecBuffers{call.send, call.recv, work->scratch.data.get(),
                                 windows_ ? windows_->staging() : nullptr},
                     call.type, call.op, CallLabel{to_string(call.collective), algo.name},
                     Deadline::max());
  plan->work = std::move(work);
  return plan;
}

std::shared_ptr<WorkState> CommunicatorImpl::start_plan(PlanState& plan) {
  Hold hold(*this);
  if (plan.algorithm == nullptr) {
    plan.work = submit(plan.call);
    return plan.work;
  }
  enter_call();
  const Call& call = plan.call;
  WorkState& w = *plan.work;
  if (!w.finished)
    fail(ErrorCode::invalid_argument, CallSite{rank_, to_string(call.collective)},
         "start() of a plan whose previous run is still outstanding: wait for it first");
  w.error = nullptr;
  w.retired = false;
  w.finished = false;
  CallStamp stamp = collective_stamp(++collective_seq_, call.collective, plan.stamp_id, call.type,
                                     call.op, call.count, call.root);
  begin_call(stamp);
  w.exec.restart(plan.program,
                 ExecBuffers{call.send, call.recv, w.scratch.data.get(),
                             windows_ ? windows_->staging() : nullptr},
                 call.type, call.op, CallLabel{to_string(call.collective), plan.algorithm->name},
                 Deadline::max(), stamp);
  auto record = [&](Deadline now) {
    w.record =
        recorder_.start(stamp.seq, to_string(call.collective), plan.algorithm->name, call.type,
                        call.op, call.count, rooted(call.collective) ? call.root : -1, -1, now);
  };
  try {
    engine_.enqueue(std::shared_ptr<Execution>(plan.work, &w.exec));
  } catch (...) {
    record(Clock::now());
    outstanding_.push_back(plan.work);  // so that fail_all records why
    fail_all(std::current_exception());
    throw;
  }
  const Deadline now = Clock::now();
  w.exec.set_deadline(deadline_after(plan.timeout, now));
  record(now);
  outstanding_.push_back(plan.work);
  return plan.work;
}

}  // namespace chorus::detail
