// chorus.Communicator and chorus.Work of the numpy binding: one rank's
// communicator, the asynchronous calls it has pending, and how a blocking
// call waits. Every call is submitted asynchronously (a chorus::Call through
// Communicator::submit); a blocking call then waits for it with the GIL
// released, in slices, so that Ctrl-C is seen within a slice (waiter.h): the
// communicator is then aborted (peers raise AbortedError) and the call raises
// KeyboardInterrupt.
#pragma once

#include "numpy_binding/buffers.h"
#include "numpy_binding/waiter.h"

#include <chorus/communicator.h>

#include <pybind11/pybind11.h>

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::python {

// An asynchronous call: its Work and the buffers it uses, held until it ends.
struct AsyncOp {
  Work work;
  std::vector<ViewPtr> views;
  std::shared_ptr<const void> plan;  // a plan's run: the plan holds the views
  pybind11::object result;
  bool completed = false;
  std::exception_ptr error;
  std::string what;  // "allreduce", for messages
};

// chorus.Work: the handle async_op=True returns.
class PyWork {
 public:
  PyWork(pybind11::object comm, std::shared_ptr<AsyncOp> op)
      : comm_(std::move(comm)), op_(std::move(op)) {}
  // Blocks until the call has ended; returns its result or raises its error.
  // A `timeout` (seconds) that passes first aborts the communicator.
  pybind11::object wait(std::optional<double> timeout);
  // Makes progress without blocking; true once the call has ended.
  bool done();

 private:
  pybind11::object comm_;  // keeps the communicator alive while this handle is
  std::shared_ptr<AsyncOp> op_;
};

// What a chorus.Plan holds: the prepared call and the arrays it runs on,
// alive as long as the plan.
struct PreparedCall {
  Plan plan;
  std::vector<ViewPtr> views;
  pybind11::object result;
  std::string what;
};

// chorus.Plan: Communicator.prepare_allreduce's handle (Plan in
// chorus/communicator.h): start() runs the prepared call again on the same
// arrays and returns its chorus.Work.
class PyPlan {
 public:
  PyPlan(pybind11::object comm, std::shared_ptr<PreparedCall> call)
      : comm_(std::move(comm)), call_(std::move(call)) {}
  pybind11::object start();
  std::string algorithm() const { return call_->plan.algorithm(); }

 private:
  pybind11::object comm_;
  std::shared_ptr<PreparedCall> call_;
};

// chorus.Communicator. A communicator is used by one thread at a time; a
// second Python thread calling while the first waits with the GIL released
// raises InvalidArgument.
class PyCommunicator {
 public:
  explicit PyCommunicator(Communicator comm) : comm_(std::move(comm)) {}
  // Garbage collected without close(): the communicator goes first, so that
  // nothing moves into the buffers that the pending calls release after it.
  ~PyCommunicator();

  int rank() const { return live().rank(); }
  int size() const { return live().size(); }
  std::string repr() const;

  // One call, described in full: the chorus::Call to submit, the buffers it
  // uses (held until it ends) and what it returns.
  struct Request {
    std::string what;  // the Python call's name, for messages
    Call call;
    std::vector<ViewPtr> views;
    pybind11::object result = pybind11::none();
  };

  // Submits the request; blocks until it ends unless `async_op`, which
  // returns a chorus.Work instead. `self` is this communicator's Python object.
  pybind11::object run(pybind11::object self, Request request, bool async_op);

  // Prepares the request (Communicator::prepare): a chorus.Plan.
  pybind11::object prepare(pybind11::object self, Request request);
  // PyPlan::start: the plan's next run, as an asynchronous call.
  pybind11::object start(pybind11::object self, const std::shared_ptr<PreparedCall>& call);

  // PyWork's wait() and done().
  pybind11::object wait_op(AsyncOp& op, std::optional<double> timeout);
  bool done_op(AsyncOp& op);

  void abort(const std::string& reason) { live().abort(reason); }
  // Communicator::revoke: any thread, never blocks.
  void revoke() { live().revoke(); }
  std::string flight_record() const { return live().flight_record(); }
  // Communicator::stragglers: a collective that waits for the peers as a
  // blocking call does; one dict per rank (rank, calls, last_count,
  // mean_late_s, p90_late_s, wait_share, error_s).
  pybind11::list stragglers(int calls);

  // A collective: a new window of `nbytes` on every rank. It waits for the
  // peers as a blocking call does (Ctrl-C aborts it).
  Window window(pybind11::ssize_t nbytes);

  // Communicator::split and split_by_host: collectives that wait for the
  // peers as a blocking call does. split gives None for a negative color.
  std::shared_ptr<PyCommunicator> split(int color, int key);
  std::shared_ptr<PyCommunicator> split_by_host();
  // Communicator::shrink: waits for the survivors as a blocking call does;
  // `timeout` in seconds (None: CHORUS_TIMEOUT).
  std::shared_ptr<PyCommunicator> shrink(std::optional<double> timeout);
  // Communicator::grow, waiting as shrink does.
  std::shared_ptr<PyCommunicator> grow(int joining, std::optional<double> timeout);
  // Communicator::recv_any into `count` elements at `data`: waits as a
  // blocking call does; returns the sender.
  int recv_any(void* data, size_t count, DataType type, const CallOptions& options);

  // Waits for the calls still pending (a call's buffers must outlive it),
  // then destroys the communicator. Idempotent.
  void close();

  // `with` leaving through an exception: abort first, so that peers fail
  // now instead of waiting for this rank until their timeout.
  void exit(pybind11::handle exc_type, pybind11::handle exc_value);

  // The communicator, or InvalidArgument once it is closed.
  Communicator& live() const;

 private:
  // Marks the communicator in use for one call (InvalidArgument when it is
  // already).
  class Busy {
   public:
    explicit Busy(PyCommunicator& c);
    ~Busy() { c_.busy_ = false; }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    PyCommunicator& c_;
  };

  // Records the outcome of an op that has ended and lets go of its buffers.
  void finish(AsyncOp& op);
  // Forgets the asynchronous calls that have ended and that no Work handle
  // refers to any more.
  void collect_finished();
  // Waits for `work` with the GIL released, on this thread in slices
  // (Work::wait_for). A signal whose handler raises (Ctrl-C) aborts the
  // communicator and re-raises; so does `timeout` passing, as
  // chorus.TimeoutError. Errors of the call propagate.
  void wait_or_raise(Work& work, std::optional<double> timeout, const std::string& what);
  // Runs `job`, a call that blocks in the communicator and is no Work (a
  // window's creation, split, shrink, grow, recv_any), with the GIL released:
  // on the waiter thread while this one looks for signals (and `timeout`).
  void block_or_raise(const std::function<void()>& job, std::optional<double> timeout,
                      const std::string& what);

  std::optional<Communicator> comm_;
  std::unique_ptr<Waiter> waiter_;
  std::vector<std::shared_ptr<AsyncOp>> pending_;
  bool busy_ = false;
};

}  // namespace chorus::python
