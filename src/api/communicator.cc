// The public handles: Communicator, Work, Window and Call (include/chorus/
// communicator.h). Each named call fills a Call and submits it; only
// chorus::Error leaves them.
#include "engine/communicator_impl.h"
#include "groups/derive.h"
#include "recovery/grow.h"
#include "recovery/shrink.h"

#include "core/check.h"

#include <new>
#include <utility>

namespace chorus {

Communicator make_communicator(std::unique_ptr<Transport> transport, Config config) {
  // The communicator makes its selector (tune/selector.h), which may
  // calibrate the links: every rank calls this at creation.
  auto impl = std::make_unique<detail::CommunicatorImpl>(std::move(transport), std::move(config));
  impl->start_trace();
  return Communicator(std::move(impl));
}

Work::Work() = default;
Work::Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

namespace {

// Runs a public entry point so that only chorus::Error leaves it: running out
// of memory is a system error naming what failed, anything else foreign an
// internal one.
template <typename F>
decltype(auto) guarded(std::string_view what, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::system, what, ": out of memory");
  } catch (const std::exception& e) {
    fail(ErrorCode::internal, what, ": ", e.what());
  }
}

detail::WorkState& live_state(const std::shared_ptr<detail::WorkState>& state, const char* what) {
  if (!state) fail(ErrorCode::invalid_argument, what, " on an empty Work");
  if (state->alive.expired())
    fail(ErrorCode::invalid_argument, what,
         " on a Work whose Communicator has been destroyed (or moved from)");
  return *state;
}

}  // namespace

void Work::wait() {
  guarded("Work::wait()", [&] {
    detail::WorkState& w = live_state(state_, "wait()");
    w.comm->wait(w);
    if (w.error) std::rethrow_exception(w.error);
  });
}

bool Work::done() {
  return guarded("Work::done()", [&] {
    detail::WorkState& w = live_state(state_, "done()");
    return w.finished || w.comm->test(w);
  });
}

bool Work::wait_for(std::chrono::nanoseconds timeout) {
  return guarded("Work::wait_for()", [&] {
    detail::WorkState& w = live_state(state_, "wait_for()");
    return w.comm->wait_for(w, timeout);
  });
}

bool Work::is_completed() const {
  if (!state_) fail(ErrorCode::invalid_argument, "is_completed() on an empty Work");
  return state_->finished.load(std::memory_order_acquire);
}

Plan::Plan() = default;
Plan::Plan(std::shared_ptr<detail::PlanState> state) : state_(std::move(state)) {}

Work Plan::start() {
  return guarded("Plan::start()", [&] {
    if (!state_) fail(ErrorCode::invalid_argument, "start() on an empty Plan");
    if (state_->alive.expired())
      fail(ErrorCode::invalid_argument,
           "start() on a Plan whose Communicator has been destroyed (or moved from)");
    return Work(state_->comm->start_plan(*state_));
  });
}

std::string Plan::algorithm() const {
  return state_ && state_->algorithm != nullptr ? std::string(state_->algorithm->name)
                                                : std::string();
}

Communicator::Communicator(std::unique_ptr<detail::CommunicatorImpl> impl)
    : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

detail::CommunicatorImpl& detail::Access::impl(const Communicator& comm) {
  if (!comm.impl_)
    fail(ErrorCode::invalid_argument,
         "this Communicator has been moved from (or destroyed); use the one it was moved to");
  return *comm.impl_;
}

int Communicator::rank() const {
  return detail::impl_of(*this).rank();
}
int Communicator::size() const {
  return detail::impl_of(*this).size();
}
std::string Communicator::transport() const {
  return std::string(detail::impl_of(*this).transport().name());
}

std::string Communicator::progress() const {
  return std::string(to_string(detail::impl_of(*this).config().progress));
}

std::string Communicator::flight_record() const {
  return guarded("flight_record", [&] { return detail::impl_of(*this).flight_record(); });
}

std::optional<Communicator> Communicator::split(int color, int key) {
  return guarded("split", [&] { return detail::split(*this, color, key, false); });
}

Communicator Communicator::split_by_host() {
  return guarded("split_by_host", [&] { return *detail::split(*this, 0, rank(), true); });
}

Window Communicator::window(size_t bytes) {
  return guarded("window", [&] { return Window(detail::impl_of(*this).create_window(bytes)); });
}

void* Window::data() const {
  return window_ ? window_->data() : nullptr;
}
size_t Window::size() const {
  return window_ ? window_->bytes() : 0;
}

void Communicator::abort(std::string_view reason) {
  guarded("abort", [&] { detail::impl_of(*this).abort(reason); });
}

std::vector<StragglerStats> Communicator::stragglers(int calls) {
  return guarded("stragglers", [&] { return detail::impl_of(*this).stragglers(calls); });
}

void Communicator::revoke() {
  guarded("revoke", [&] {
    detail::CommunicatorImpl& impl = detail::impl_of(*this);
    impl.abort(str_cat("revoke() called on rank ", impl.rank()), ErrorCode::revoked);
    if (impl.has_metrics()) detail::count_metrics_event(detail::MetricsEvent::revoke);
  });
}

Communicator Communicator::shrink(std::chrono::milliseconds timeout) {
  return guarded("shrink", [&] {
    Communicator smaller = detail::shrink(*this, timeout);
    if (detail::impl_of(smaller).has_metrics())
      detail::count_metrics_event(detail::MetricsEvent::shrink);
    return smaller;
  });
}

Communicator Communicator::grow(int joining, std::chrono::milliseconds timeout) {
  return guarded("grow", [&] {
    Communicator larger = detail::grow(*this, joining, timeout);
    if (detail::impl_of(larger).has_metrics())
      detail::count_metrics_event(detail::MetricsEvent::grow);
    return larger;
  });
}

Work Communicator::submit(const Call& call) {
  return guarded(call.name(), [&] { return Work(detail::impl_of(*this).submit(call)); });
}

Work Communicator::submit(const Call& call, std::function<void()> on_complete) {
  return guarded(call.name(),
                 [&] { return Work(detail::impl_of(*this).submit(call, std::move(on_complete))); });
}

Plan Communicator::prepare(const Call& call) {
  return guarded(call.name(), [&] { return Plan(detail::impl_of(*this).prepare_plan(call)); });
}

void Communicator::run(const Call& call) {
  guarded(call.name(), [&] { detail::impl_of(*this).run(call); });
}

// The named forms: each is its Call, submitted.
Call Call::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                     CallOptions options) {
  return {Kind::collective,  Collective::allreduce, send, recv, count, type, op, 0, -1,
          std::move(options)};
}
Call Call::allgather(const void* send, void* recv, size_t send_count, DataType type,
                     CallOptions options) {
  return {
      Kind::collective,  Collective::allgather, send, recv, send_count, type, ReduceOp::sum, 0, -1,
      std::move(options)};
}
Call Call::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                          ReduceOp op, CallOptions options) {
  return {Kind::collective,  Collective::reduce_scatter, send, recv, recv_count, type, op, 0, -1,
          std::move(options)};
}
Call Call::broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                     CallOptions options) {
  return {
      Kind::collective,  Collective::broadcast, send, recv, count, type, ReduceOp::sum, root, -1,
      std::move(options)};
}
Call Call::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
                  CallOptions options) {
  return {Kind::collective,  Collective::reduce, send, recv, count, type, op, root, -1,
          std::move(options)};
}
Call Call::alltoall(const void* send, void* recv, size_t count, DataType type,
                    CallOptions options) {
  return {Kind::collective,  Collective::alltoall, send, recv, count, type, ReduceOp::sum, 0, -1,
          std::move(options)};
}
Call Call::gather(const void* send, void* recv, size_t count, DataType type, int root,
                  CallOptions options) {
  return {Kind::collective,  Collective::gather, send, recv, count, type, ReduceOp::sum, root, -1,
          std::move(options)};
}
Call Call::scatter(const void* send, void* recv, size_t count, DataType type, int root,
                   CallOptions options) {
  return {Kind::collective,  Collective::scatter, send, recv, count, type, ReduceOp::sum, root, -1,
          std::move(options)};
}
Call Call::barrier(CallOptions options) {
  return {Kind::collective, Collective::barrier, nullptr, nullptr, 0,
          DataType::uint8,  ReduceOp::sum,       0,       -1,      std::move(options)};
}
Call Call::send_to(const void* buf, size_t count, DataType type, int peer, CallOptions options) {
  return {Kind::send, Collective::allreduce, buf, nullptr, count,
          type,       ReduceOp::sum,         0,   peer,    std::move(options)};
}
Call Call::recv_from(void* buf, size_t count, DataType type, int peer, CallOptions options) {
  return {Kind::recv, Collective::allreduce, nullptr, buf,  count,
          type,       ReduceOp::sum,         0,       peer, std::move(options)};
}

std::string_view Call::name() const {
  switch (kind) {
    case Kind::send:
      return "send";
    case Kind::recv:
      return "recv";
    case Kind::collective:
      break;
  }
  return to_string(collective);
}

void Communicator::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                             const CallOptions& options) {
  run(Call::allreduce(send, recv, count, type, op, options));
}
void Communicator::allgather(const void* send, void* recv, size_t send_count, DataType type,
                             const CallOptions& options) {
  run(Call::allgather(send, recv, send_count, type, options));
}
void Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                                  ReduceOp op, const CallOptions& options) {
  run(Call::reduce_scatter(send, recv, recv_count, type, op, options));
}
void Communicator::broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                             const CallOptions& options) {
  run(Call::broadcast(send, recv, count, type, root, options));
}
void Communicator::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                          int root, const CallOptions& options) {
  run(Call::reduce(send, recv, count, type, op, root, options));
}
void Communicator::barrier(const CallOptions& options) {
  run(Call::barrier(options));
}
void Communicator::alltoall(const void* send, void* recv, size_t count, DataType type,
                            const CallOptions& options) {
  run(Call::alltoall(send, recv, count, type, options));
}
void Communicator::gather(const void* send, void* recv, size_t count, DataType type, int root,
                          const CallOptions& options) {
  run(Call::gather(send, recv, count, type, root, options));
}
void Communicator::scatter(const void* send, void* recv, size_t count, DataType type, int root,
                           const CallOptions& options) {
  run(Call::scatter(send, recv, count, type, root, options));
}
void Communicator::send(const void* buf, size_t count, DataType type, int peer,
                        const CallOptions& options) {
  run(Call::send_to(buf, count, type, peer, options));
}
void Communicator::recv(void* buf, size_t count, DataType type, int peer,
                        const CallOptions& options) {
  run(Call::recv_from(buf, count, type, peer, options));
}

int Communicator::recv_any(void* buf, size_t count, DataType type, const CallOptions& options) {
  return guarded("recv_any",
                 [&] { return detail::impl_of(*this).recv_any(buf, count, type, options); });
}

Work Communicator::allreduce_async(const void* send, void* recv, size_t count, DataType type,
                                   ReduceOp op, const CallOptions& options) {
  return submit(Call::allreduce(send, recv, count, type, op, options));
}
Work Communicator::allgather_async(const void* send, void* recv, size_t send_count, DataType type,
                                   const CallOptions& options) {
  return submit(Call::allgather(send, recv, send_count, type, options));
}
Work Communicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                        DataType type, ReduceOp op, const CallOptions& options) {
  return submit(Call::reduce_scatter(send, recv, recv_count, type, op, options));
}
Work Communicator::broadcast_async(const void* send, void* recv, size_t count, DataType type,
                                   int root, const CallOptions& options) {
  return submit(Call::broadcast(send, recv, count, type, root, options));
}
Work Communicator::reduce_async(const void* send, void* recv, size_t count, DataType type,
                                ReduceOp op, int root, const CallOptions& options) {
  return submit(Call::reduce(send, recv, count, type, op, root, options));
}
Work Communicator::barrier_async(const CallOptions& options) {
  return submit(Call::barrier(options));
}
Work Communicator::alltoall_async(const void* send, void* recv, size_t count, DataType type,
                                  const CallOptions& options) {
  return submit(Call::alltoall(send, recv, count, type, options));
}
Work Communicator::gather_async(const void* send, void* recv, size_t count, DataType type, int root,
                                const CallOptions& options) {
  return submit(Call::gather(send, recv, count, type, root, options));
}
Work Communicator::scatter_async(const void* send, void* recv, size_t count, DataType type,
                                 int root, const CallOptions& options) {
  return submit(Call::scatter(send, recv, count, type, root, options));
}
Work Communicator::send_async(const void* buf, size_t count, DataType type, int peer,
                              const CallOptions& options) {
  return submit(Call::send_to(buf, count, type, peer, options));
}
Work Communicator::recv_async(void* buf, size_t count, DataType type, int peer,
                              const CallOptions& options) {
  return submit(Call::recv_from(buf, count, type, peer, options));
}

}  // namespace chorus
