// chorus.Communicator and chorus.Work of the numpy binding (communicator.h).
#include "numpy_binding/communicator.h"

#include "core/deadline.h"
#include "numpy_binding/errors.h"

#include <chorus/error.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace py = pybind11;

namespace chorus::python {
namespace {

// What ended a wait other than the call itself.
enum class WaitEnd { completed, signal, timed_out };

}  // namespace

py::object PyWork::wait(std::optional<double> timeout) {
  return comm_.cast<PyCommunicator&>().wait_op(*op_, timeout);
}

bool PyWork::done() {
  return comm_.cast<PyCommunicator&>().done_op(*op_);
}

PyCommunicator::~PyCommunicator() {
  if (comm_) {
    py::gil_scoped_release nogil;  // destruction says goodbye to the peers
    comm_.reset();
  }
  pending_.clear();
}

std::string PyCommunicator::repr() const {
  if (!comm_) return "<chorus.Communicator (closed)>";
  return "<chorus.Communicator rank " + std::to_string(comm_->rank()) + " of " +
         std::to_string(comm_->size()) + " over " + comm_->transport() + ">";
}

py::object PyCommunicator::run(py::object self, Request request, bool async_op) {
  Busy busy(*this);
  collect_finished();
  Work work = live().submit(request.call);
  if (async_op) {
    auto op = std::make_shared<AsyncOp>();
    op->work = std::move(work);
    op->views = std::move(request.views);
    op->result = std::move(request.result);
    op->what = request.what;
    pending_.push_back(op);
    return py::cast(PyWork(std::move(self), std::move(op)));
  }
  wait_or_raise(work, std::nullopt, request.what);
  return request.result;
}

py::object PyCommunicator::prepare(py::object self, Request request) {
  Busy busy(*this);
  auto call = std::make_shared<PreparedCall>();
  {
    py::gil_scoped_release nogil;  // the algorithm choice may ask the peers
    call->plan = live().prepare(request.call);
  }
  call->views = std::move(request.views);
  call->result = std::move(request.result);
  call->what = request.what;
  return py::cast(PyPlan(std::move(self), std::move(call)));
}

py::object PyCommunicator::start(py::object self, const std::shared_ptr<PreparedCall>& call) {
  Busy busy(*this);
  collect_finished();
  auto op = std::make_shared<AsyncOp>();
  op->work = call->plan.start();
  op->plan = call;
  op->result = call->result;
  op->what = call->what;
  pending_.push_back(op);
  return py::cast(PyWork(std::move(self), std::move(op)));
}

py::object PyPlan::start() {
  return comm_.cast<PyCommunicator&>().start(comm_, call_);
}

py::object PyCommunicator::wait_op(AsyncOp& op, std::optional<double> timeout) {
  if (!op.completed) {
    Busy busy(*this);
    try {
      wait_or_raise(op.work, timeout, op.what + " (Work.wait)");
    } catch (const py::error_already_set&) {
      finish(op);  // the communicator is aborted: the call has ended
      throw;
    } catch (const Error&) {
      finish(op);
      throw;
    }
    finish(op);
  }
  if (op.error) std::rethrow_exception(op.error);
  return op.result;
}

bool PyCommunicator::done_op(AsyncOp& op) {
  if (op.completed) return true;
  Busy busy(*this);
  if (!op.work.done()) return false;
  finish(op);
  return true;
}

Window PyCommunicator::window(py::ssize_t nbytes) {
  if (nbytes < 0) invalid("window: negative nbytes " + std::to_string(nbytes));
  const auto bytes = static_cast<size_t>(nbytes);
  Busy busy(*this);
  collect_finished();
  Communicator& c = live();
  Window w;
  block_or_raise([&] { w = c.window(bytes); }, std::nullopt, "window");
  return w;
}

std::shared_ptr<PyCommunicator> PyCommunicator::split(int color, int key) {
  Busy busy(*this);
  collect_finished();
  Communicator& c = live();
  std::optional<Communicator> child;
  block_or_raise([&] { child = c.split(color, key); }, std::nullopt, "split");
  return child ? std::make_shared<PyCommunicator>(std::move(*child)) : nullptr;
}

py::list PyCommunicator::stragglers(int calls) {
  Busy busy(*this);
  collect_finished();
  Communicator& c = live();
  std::vector<StragglerStats> report;
  block_or_raise([&] { report = c.stragglers(calls); }, std::nullopt, "stragglers");
  py::list out;
  for (const StragglerStats& s : report) {
    py::dict d;
    d["rank"] = s.rank;
    d["calls"] = s.calls;
    d["last_count"] = s.last_count;
    d["mean_late_s"] = s.mean_late_s;
    d["p90_late_s"] = s.p90_late_s;
    d["wait_share"] = s.wait_share;
    d["error_s"] = s.error_s;
    out.append(std::move(d));
  }
  return out;
}

std::shared_ptr<PyCommunicator> PyCommunicator::split_by_host() {
  Busy busy(*this);
  collect_finished();
  Communicator& c = live();
  std::optional<Communicator> child;
  block_or_raise([&] { child = c.split_by_host(); }, std::nullopt, "split_by_host");
  return std::make_shared<PyCommunicator>(std::move(*child));
}

namespace {

// A recovery call's timeout in seconds (None: the communicator's), as the
// C++ call takes it (0: the communicator's).
std::chrono::milliseconds recovery_timeout(const char* what, std::optional<double> timeout) {
  if (timeout && !(*timeout >= 0))
    invalid(std::string(what) + ": timeout must be a number of seconds >= 0, got " +
            std::to_string(*timeout));
  return std::chrono::milliseconds(timeout ? static_cast<int64_t>(std::ceil(*timeout * 1000.0))
                                           : int64_t{0});
}

}  // namespace

std::shared_ptr<PyCommunicator> PyCommunicator::shrink(std::optional<double> timeout) {
  const auto ms = recovery_timeout("shrink", timeout);
  Busy busy(*this);
  collect_finished();
  Communicator& c = live();
  std::optional<Communicator> next;
  block_or_raise([&] { next = c.shrink(ms); }, std::nullopt, "shrink");
  return std::make_shared<PyCommunicator>(std::move(*next));
}

std::shared_ptr<PyCommunicator> PyCommunicator::grow(int joining, std::optional<double> timeout) {
  const auto ms = recovery_timeout("grow", timeout);
  Busy busy(*this);
  collect_finished();
  Communicator& c = live();
  std::optional<Communicator> next;
  block_or_raise([&] { next = c.grow(joining, ms); }, std::nullopt, "grow");
  return std::make_shared<PyCommunicator>(std::move(*next));
}

int PyCommunicator::recv_any(void* data, size_t count, DataType type, const CallOptions& options) {
  Busy busy(*this);
  collect_finished();
  Communicator& c = live();
  int from = -1;
  block_or_raise([&] { from = c.recv_any(data, count, type, options); }, std::nullopt, "recv_any");
  return from;
}

void PyCommunicator::close() {
  if (!comm_) return;
  {
    Busy busy(*this);
    for (auto& op : pending_) {
      if (op->completed) continue;
      try {
        wait_or_raise(op->work, std::nullopt, op->what);
      } catch (const Error&) {
        // Recorded in the op; its own wait() raises it.
      }
      finish(*op);
    }
  }
  pending_.clear();
  waiter_.reset();
  py::gil_scoped_release nogil;  // destruction says goodbye to the peers
  comm_.reset();
}

void PyCommunicator::exit(py::handle exc_type, py::handle exc_value) {
  if (comm_ && !exc_type.is_none()) {
    std::string reason = py::str(exc_type.attr("__name__")).cast<std::string>();
    const std::string text = py::str(exc_value).cast<std::string>();
    if (!text.empty()) reason += ": " + text;
    comm_->abort("the with-block of rank " + std::to_string(comm_->rank()) + " raised " + reason);
  }
  close();
}

Communicator& PyCommunicator::live() const {
  if (!comm_) invalid("the communicator is closed");
  return const_cast<Communicator&>(*comm_);
}

PyCommunicator::Busy::Busy(PyCommunicator& c) : c_(c) {
  c_.live();
  if (c_.busy_)
    invalid(
        "this communicator is in use by another thread (a communicator is used by one "
        "thread at a time)");
  c_.busy_ = true;
}

void PyCommunicator::finish(AsyncOp& op) {
  if (op.completed) return;
  try {
    op.work.wait();  // ended already: returns or raises at once
  } catch (...) {
    op.error = std::current_exception();
  }
  op.completed = true;
  op.views.clear();
  op.plan.reset();
}

void PyCommunicator::collect_finished() {
  std::vector<std::shared_ptr<AsyncOp>> keep;
  for (auto& op : pending_) {
    if (!op->completed && op.use_count() == 1 && op->work.done()) finish(*op);
    if (!op->completed || op.use_count() > 1) keep.push_back(op);
  }
  pending_.swap(keep);
}

void PyCommunicator::wait_or_raise(Work& work, std::optional<double> timeout,
                                   const std::string& what) {
  // The wait runs on this thread, in slices (Work::wait_for): between two,
  // with the GIL, it looks for a signal and for `timeout`. Between slices,
  // and while this thread holds the GIL, the communicator's progress thread
  // advances the call.
  std::optional<Clock::time_point> give_up;
  if (timeout) give_up = Clock::now() + seconds_to_ms(*timeout, what + ": timeout");
  const bool signals = on_main_thread();
  WaitEnd end = WaitEnd::completed;
  std::exception_ptr error;
  {
    py::gil_scoped_release nogil;
    if (!signals && !give_up) {
      work.wait();
      return;
    }
    while (true) {
      auto slice = std::chrono::duration_cast<std::chrono::nanoseconds>(kSignalSlice);
      if (give_up)
        slice = std::min(slice, std::max(std::chrono::nanoseconds(0), *give_up - Clock::now()));
      if (work.wait_for(slice)) return;  // raises the call's error, if any
      if (give_up && Clock::now() >= *give_up) {
        end = WaitEnd::timed_out;
      } else if (signals) {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) {
          end = WaitEnd::signal;
          error = std::make_exception_ptr(py::error_already_set());
        }
      }
      if (end != WaitEnd::completed) break;
    }
    live().abort(end == WaitEnd::signal
                     ? "interrupted by a signal (KeyboardInterrupt) in " + what
                     : what + " did not complete within " + std::to_string(*timeout) + " s");
  }
  if (end == WaitEnd::signal) std::rethrow_exception(error);
  throw Error(ErrorCode::timeout, "rank " + std::to_string(live().rank()) + ": " + what +
                                      " did not complete within " + std::to_string(*timeout) +
                                      " s; the communicator is aborted");
}

void PyCommunicator::block_or_raise(const std::function<void()>& job, std::optional<double> timeout,
                                    const std::string& what) {
  std::optional<Clock::time_point> give_up;
  if (timeout) give_up = Clock::now() + seconds_to_ms(*timeout, what + ": timeout");
  const bool signals = on_main_thread();
  WaitEnd end = WaitEnd::completed;
  std::exception_ptr error;
  {
    py::gil_scoped_release nogil;
    if (!signals && !give_up) {
      job();
      return;
    }
    if (!waiter_) waiter_ = std::make_unique<Waiter>();
    waiter_->start(job);
    while (true) {
      auto slice = std::chrono::duration_cast<std::chrono::nanoseconds>(kSignalSlice);
      if (give_up)
        slice = std::min(slice, std::max(std::chrono::nanoseconds(0), *give_up - Clock::now()));
      if (waiter_->wait_for(slice)) break;
      if (give_up && Clock::now() >= *give_up) {
        end = WaitEnd::timed_out;
      } else if (signals) {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) {
          end = WaitEnd::signal;
          error = std::make_exception_ptr(py::error_already_set());
        }
      }
      if (end == WaitEnd::completed) continue;
      live().abort(end == WaitEnd::signal
                       ? "interrupted by a signal (KeyboardInterrupt) in " + what
                       : what + " did not complete within " + std::to_string(*timeout) + " s");
      waiter_->wait();  // an abort ends a blocked wait within milliseconds
      break;
    }
  }
  if (end == WaitEnd::signal) std::rethrow_exception(error);
  if (end == WaitEnd::timed_out)
    throw Error(ErrorCode::timeout, "rank " + std::to_string(live().rank()) + ": " + what +
                                        " did not complete within " + std::to_string(*timeout) +
                                        " s; the communicator is aborted");
  if (auto e = waiter_->error()) std::rethrow_exception(e);
}

}  // namespace chorus::python
