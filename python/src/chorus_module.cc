// chorus._chorus: the numpy binding behind `import chorus`.
//
// Buffers come in through the buffer protocol (numpy arrays, memoryviews,
// bytearrays); the element type is taken from the buffer's format. Every call
// is submitted asynchronously; a blocking call then waits for it with the GIL
// released, in slices, so that Ctrl-C is seen within a slice: the
// communicator is then aborted (peers raise AbortedError) and the call raises
// KeyboardInterrupt.
//
//   with chorus.init() as comm:
//       g = comm.allreduce(np.ones(4, np.float32), op="sum")   # new array
//       comm.allreduce(g, out=g)                               # in place
//       w = comm.allgather(g, async_op=True); ...; rows = w.wait()
//
// chorus::Error becomes a chorus.Error subclass chosen by its ErrorCode
// (InvalidArgument is also a ValueError).
#include "api/communicator_impl.h"
#include "core/config.h"

#include <chorus/chorus.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace py = pybind11;

namespace chorus::python {
namespace {

using std::chrono::milliseconds;

// How often a blocked call looks for a pending signal (Ctrl-C): well inside
// the 100 ms within which KeyboardInterrupt must arrive.
constexpr auto kSignalSlice = milliseconds(20);
// A blocking call first polls this long on its own thread: a short call then
// completes without handing its wait to the waiter thread.
constexpr auto kPollFirst = std::chrono::microseconds(30);

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::invalid_argument, message);
}

// --- the exception classes ---------------------------------------------------

struct ErrorTypes {
  py::handle base, invalid_argument, timeout, peer_failure, mismatch, aborted;

  py::handle for_code(ErrorCode code) const {
    switch (code) {
      case ErrorCode::invalid_argument:
        return invalid_argument;
      case ErrorCode::timeout:
        return timeout;
      case ErrorCode::peer_failure:
        return peer_failure;
      case ErrorCode::mismatch:
        return mismatch;
      case ErrorCode::aborted:
        return aborted;
      case ErrorCode::system:
      case ErrorCode::internal:
        break;
    }
    return base;
  }
};

// The classes live as long as the module: the interpreter owns them, this
// table only names them for the exception translator.
ErrorTypes& error_types() {
  static ErrorTypes types;
  return types;
}

py::handle new_exception(py::module_& m, const char* name, const char* doc,
                         std::initializer_list<py::handle> bases) {
  py::tuple base_tuple(bases.size());
  size_t i = 0;
  for (py::handle b : bases) base_tuple[i++] = py::reinterpret_borrow<py::object>(b);
  const std::string qualified = std::string("chorus.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));  // the module keeps a reference; ours is never dropped
  return cls;
}

void raise_chorus_error(const Error& e) {
  const py::handle cls = error_types().for_code(e.code());
  py::object instance = py::reinterpret_borrow<py::object>(cls)(e.what());
  instance.attr("code") = py::str(std::string(to_string(e.code())));
  PyErr_SetObject(cls.ptr(), instance.ptr());
}

// --- buffers -----------------------------------------------------------------

// One Python object's memory, held through the buffer protocol while a call
// may touch it (an exported buffer cannot be resized or freed meanwhile).
// Only while holding the GIL: construction and destruction call into Python.
class BufferView {
 public:
  enum class Access { read, write };

  // `call` and `name` name the argument in errors ("allreduce: out ...").
  BufferView(py::handle obj, Access access, const std::string& call, const char* name) {
    const std::string who = call + ": " + name;
    if (!PyObject_CheckBuffer(obj.ptr()))
      invalid(who + " (" + Py_TYPE(obj.ptr())->tp_name +
              ") does not support the buffer protocol; pass a numpy array, memoryview or "
              "bytearray");
    const int flags = PyBUF_RECORDS_RO | (access == Access::write ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
      py::error_already_set why;
      if (access == Access::write && PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_RECORDS_RO) == 0) {
        PyBuffer_Release(&view_);
        invalid(who + " is read-only, but this call writes it");
      }
      PyErr_Clear();
      invalid(who + ": " + why.what());
    }
    held_ = true;
    if (!PyBuffer_IsContiguous(&view_, 'C')) {
      std::ostringstream msg;
      msg << who << " is not C-contiguous (shape " << tuple_text(view_.shape) << ", strides "
          << tuple_text(view_.strides)
          << "); chorus moves contiguous memory: np.ascontiguousarray() gives a contiguous copy";
      release();
      invalid(msg.str());
    }
    const std::optional<DataType> t = parse_format();
    if (!t) {
      std::string dtype = view_.format ? std::string("buffer format '") + view_.format + "'" : "";
      if (py::hasattr(obj, "dtype"))
        dtype = "dtype " + py::str(obj.attr("dtype")).cast<std::string>();
      release();
      invalid(who + " has " + dtype +
              ", which chorus does not support; supported: int8, uint8, int32, uint32, int64, "
              "uint64, float16, float32, float64");
    }
    type_ = *t;
    count_ = static_cast<size_t>(view_.len) / static_cast<size_t>(view_.itemsize);
  }
  ~BufferView() { release(); }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;

  void* data() const { return view_.buf; }
  size_t count() const { return count_; }
  size_t bytes() const { return static_cast<size_t>(view_.len); }
  DataType type() const { return type_; }
  std::vector<py::ssize_t> shape() const {
    return std::vector<py::ssize_t>(view_.shape, view_.shape + view_.ndim);
  }
  int ndim() const { return view_.ndim; }

 private:
  void release() {
    if (held_) PyBuffer_Release(&view_);
    held_ = false;
  }

  std::string tuple_text(const Py_ssize_t* v) const {
    std::string s = "(";
    for (int i = 0; i < view_.ndim; ++i) {
      if (i > 0) s += ", ";
      s += std::to_string(v ? v[i] : 0);
    }
    return s + (view_.ndim == 1 ? ",)" : ")");
  }

  // Struct-module format of one native-order element ("f", "<q", "=B") to a
  // DataType: the kind from the letter, the width from the item size.
  std::optional<DataType> parse_format() const {
    std::string f = view_.format ? view_.format : "B";
    if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.erase(0, 1);
    if (f.size() != 1) return std::nullopt;  // big-endian, structured, complex, ...
    const char c = f[0];
    const Py_ssize_t w = view_.itemsize;
    const bool is_signed = c == 'b' || c == 'h' || c == 'i' || c == 'l' || c == 'q' || c == 'n';
    const bool is_unsigned = c == 'B' || c == 'H' || c == 'I' || c == 'L' || c == 'Q' || c == 'N';
    if (is_signed) {
      if (w == 1) return DataType::int8;
      if (w == 4) return DataType::int32;
      if (w == 8) return DataType::int64;
    } else if (is_unsigned) {
      if (w == 1) return DataType::uint8;
      if (w == 4) return DataType::uint32;
      if (w == 8) return DataType::uint64;
    } else if (c == 'e' && w == 2) {
      return DataType::float16;
    } else if (c == 'f' && w == 4) {
      return DataType::float32;
    } else if (c == 'd' && w == 8) {
      return DataType::float64;
    }
    return std::nullopt;
  }

  Py_buffer view_{};
  bool held_ = false;
  DataType type_ = DataType::uint8;
  size_t count_ = 0;
};

using ViewPtr = std::unique_ptr<BufferView>;

py::array new_array(DataType type, const std::vector<py::ssize_t>& shape) {
  return py::array(py::dtype::from_args(py::str(std::string(to_string(type)))), shape);
}

// An `out` argument: writable, contiguous, of x's type and `count` elements.
ViewPtr out_view(py::handle out, const std::string& call, DataType type, size_t count) {
  auto v = std::make_unique<BufferView>(out, BufferView::Access::write, call, "out");
  if (v->type() != type)
    invalid(call + ": out has type " + std::string(to_string(v->type())) + ", x has " +
            std::string(to_string(type)));
  if (v->count() != count)
    invalid(call + ": out has " + std::to_string(v->count()) + " elements, this call writes " +
            std::to_string(count));
  return v;
}

ReduceOp parse_op(py::handle op, const std::string& call) {
  if (py::isinstance<ReduceOp>(op)) return op.cast<ReduceOp>();
  if (py::isinstance<py::str>(op)) {
    const std::string name = op.cast<std::string>();
    if (auto parsed = parse_reduce_op(name)) return *parsed;
    invalid(call + ": op '" + name + "' is not one of sum, prod, min, max, avg");
  }
  invalid(call + ": op must be a str or a chorus.ReduceOp, not " + Py_TYPE(op.ptr())->tp_name);
}

// A positive number of seconds as whole milliseconds (rounded up, so that a
// short timeout never becomes 0, which would mean "the default").
milliseconds seconds_to_ms(double seconds, const std::string& what) {
  if (std::isnan(seconds) || seconds <= 0)
    invalid(what + " must be a positive number of seconds, got " + std::to_string(seconds));
  const double ms = std::ceil(seconds * 1000.0);
  if (ms >= static_cast<double>(milliseconds::max().count()) / 2) return milliseconds::max();
  return milliseconds(static_cast<milliseconds::rep>(ms));
}

CallOptions call_options(const std::optional<std::string>& algorithm,
                         const std::optional<double>& timeout, const std::string& call) {
  CallOptions o;
  if (algorithm) o.algorithm = *algorithm;
  if (timeout) o.timeout = seconds_to_ms(*timeout, call + ": timeout");
  return o;
}

// --- waiting -----------------------------------------------------------------

// A thread that blocks in Work::wait() (or in another blocking call: a
// window's creation) on behalf of the caller, so that the caller can wake up
// every kSignalSlice to look for signals. The communicator is used by one
// thread at a time still: the caller only waits meanwhile (or calls
// Communicator::abort, which any thread may).
class Waiter {
 public:
  Waiter() : thread_([this] { run(); }) {}
  ~Waiter() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  void start(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      job_ = std::move(job);
      finished_ = false;
      error_ = nullptr;
    }
    cv_.notify_all();
  }
  // True once the job has finished (within `slice`).
  bool wait_for(std::chrono::nanoseconds slice) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, slice, [&] { return finished_; });
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_; });
  }
  std::exception_ptr error() {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  void run() {
    // Signals go to the interpreter's thread, which handles them.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || job_ != nullptr; });
      if (job_ == nullptr) return;  // stopping
      std::function<void()> job = std::exchange(job_, nullptr);
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      finished_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool finished_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

bool on_main_thread() {
  static const unsigned long main_ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  return PyThread_get_thread_ident() == main_ident;
}

// What ended a wait other than the call itself.
enum class WaitEnd { completed, signal, timed_out };

// --- the communicator ----------------------------------------------------------

// An asynchronous call: its Work and the buffers it uses, held until it ends.
struct AsyncOp {
  Work work;
  std::vector<ViewPtr> views;
  py::object result;
  bool completed = false;
  std::exception_ptr error;
  std::string what;  // "allreduce", for messages
};

class PyCommunicator;

class PyWork {
 public:
  PyWork(py::object comm, std::shared_ptr<AsyncOp> op)
      : comm_(std::move(comm)), op_(std::move(op)) {}
  py::object wait(std::optional<double> timeout);
  bool done();

 private:
  py::object comm_;  // keeps the communicator alive while this handle is
  std::shared_ptr<AsyncOp> op_;
};

class PyCommunicator {
 public:
  explicit PyCommunicator(Communicator comm) : comm_(std::move(comm)) {}
  ~PyCommunicator() {
    // Garbage collected without close(): the communicator goes first, so that
    // nothing moves into the buffers that the pending calls release after it.
    if (comm_) {
      py::gil_scoped_release nogil;  // destruction says goodbye to the peers
      comm_.reset();
    }
    pending_.clear();
  }

  int rank() const { return live().rank(); }
  int size() const { return live().size(); }

  std::string repr() const {
    if (!comm_) return "<chorus.Communicator (closed)>";
    return "<chorus.Communicator rank " + std::to_string(comm_->rank()) + " of " +
           std::to_string(comm_->size()) + " over " +
           std::string(comm_->impl().transport().name()) + ">";
  }

  // One call, described in full: what to submit and what to return.
  struct Call {
    std::string what;
    CallDescriptor desc;
    CallOptions options;
    OpKind p2p = OpKind::copy;  // send or recv for point-to-point calls
    int peer = -1;
    std::vector<ViewPtr> views;
    py::object result = py::none();
  };

  // Submits the call; blocks until it ends unless `async_op`.
  py::object run(py::object self, Call call, bool async_op) {
    Busy busy(*this);
    collect_finished();
    call.desc.options = &call.options;
    Work work;
    if (call.p2p == OpKind::send || call.p2p == OpKind::recv) {
      work = Work(live().impl().submit_point_to_point(call.p2p, call.desc.send, call.desc.recv,
                                                      call.desc.count, call.desc.type, call.peer,
                                                      call.options));
    } else {
      work = Work(live().impl().submit(call.desc));
    }
    if (async_op) {
      auto op = std::make_shared<AsyncOp>();
      op->work = std::move(work);
      op->views = std::move(call.views);
      op->result = std::move(call.result);
      op->what = call.what;
      pending_.push_back(op);
      return py::cast(PyWork(std::move(self), std::move(op)));
    }
    wait_or_raise(work, std::nullopt, call.what);
    return call.result;
  }

  py::object wait_op(AsyncOp& op, std::optional<double> timeout) {
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

  bool done_op(AsyncOp& op) {
    if (op.completed) return true;
    Busy busy(*this);
    if (!op.work.done()) return false;
    finish(op);
    return true;
  }

  void abort(const std::string& reason) { live().abort(reason); }

  std::string flight_record() const { return live().flight_record(); }

  // A collective: a new window of `bytes` on every rank. It waits for the
  // peers as a blocking call does (Ctrl-C aborts it).
  Window window(py::ssize_t nbytes) {
    if (nbytes < 0) invalid("window: negative nbytes " + std::to_string(nbytes));
    const auto bytes = static_cast<size_t>(nbytes);
    Busy busy(*this);
    collect_finished();
    Communicator& c = live();
    Window w;
    block_or_raise([&] { w = c.window(bytes); }, {}, std::nullopt, "window");
    return w;
  }

  // Waits for the calls still pending (a call's buffers must outlive it),
  // then destroys the communicator. Idempotent.
  void close() {
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

  // `with` leaving through an exception: abort first, so that peers fail
  // now instead of waiting for this rank until their timeout.
  void exit(py::handle exc_type, py::handle exc_value) {
    if (comm_ && !exc_type.is_none()) {
      std::string reason = py::str(exc_type.attr("__name__")).cast<std::string>();
      const std::string text = py::str(exc_value).cast<std::string>();
      if (!text.empty()) reason += ": " + text;
      comm_->abort("the with-block of rank " + std::to_string(comm_->rank()) + " raised " + reason);
    }
    close();
  }

  Communicator& live() const {
    if (!comm_) invalid("the communicator is closed");
    return const_cast<Communicator&>(*comm_);
  }

 private:
  // A communicator is used by one thread at a time; a second Python thread
  // calling while the first waits with the GIL released is an error.
  class Busy {
   public:
    explicit Busy(PyCommunicator& c) : c_(c) {
      c_.live();
      if (c_.busy_)
        invalid(
            "this communicator is in use by another thread (a communicator is used by one "
            "thread at a time)");
      c_.busy_ = true;
    }
    ~Busy() { c_.busy_ = false; }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    PyCommunicator& c_;
  };

  void finish(AsyncOp& op) {
    if (op.completed) return;
    try {
      op.work.wait();  // ended already: returns or raises at once
    } catch (...) {
      op.error = std::current_exception();
    }
    op.completed = true;
    op.views.clear();
  }

  // Forgets the asynchronous calls that have ended and that no Work handle
  // refers to any more.
  void collect_finished() {
    std::vector<std::shared_ptr<AsyncOp>> keep;
    for (auto& op : pending_) {
      if (!op->completed && op.use_count() == 1 && op->work.done()) finish(*op);
      if (!op->completed || op.use_count() > 1) keep.push_back(op);
    }
    pending_.swap(keep);
  }

  // Waits for `work` with the GIL released. A signal whose handler raises
  // (Ctrl-C) aborts the communicator and re-raises; so does `timeout`
  // passing, as chorus.TimeoutError. Errors of the call propagate.
  void wait_or_raise(Work& work, std::optional<double> timeout, const std::string& what) {
    block_or_raise([&work] { work.wait(); }, [&work] { return work.done(); }, timeout, what);
  }

  // Runs `job`, a call that blocks in the communicator, with the GIL released
  // and as wait_or_raise waits: on the waiter thread while this one looks for
  // signals (and `timeout`). `done`, where given, is polled for kPollFirst
  // first; once it says the job would not block, the job runs here.
  void block_or_raise(const std::function<void()>& job, const std::function<bool()>& done,
                      std::optional<double> timeout, const std::string& what) {
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
      if (done) {
        const auto poll_until = Clock::now() + kPollFirst;
        bool finished = false;
        while (!finished && Clock::now() < poll_until) finished = done();
        if (finished) {
          job();  // raises the call's error, if any
          return;
        }
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

  std::optional<Communicator> comm_;
  std::unique_ptr<Waiter> waiter_;
  std::vector<std::shared_ptr<AsyncOp>> pending_;
  bool busy_ = false;
};

py::object PyWork::wait(std::optional<double> timeout) {
  return comm_.cast<PyCommunicator&>().wait_op(*op_, timeout);
}

bool PyWork::done() {
  return comm_.cast<PyCommunicator&>().done_op(*op_);
}

// --- the calls -------------------------------------------------------------------

using Comm = PyCommunicator;
using Access = BufferView::Access;

struct Keywords {
  std::optional<std::string> algorithm;
  std::optional<double> timeout;
  bool async_op = false;
};

Comm::Call new_call(const char* what, Collective c, const Keywords& kw) {
  Comm::Call call;
  call.what = what;
  call.desc.collective = c;
  call.options = call_options(kw.algorithm, kw.timeout, what);
  return call;
}

// Writes into `out` when given (returned as is), else into a new array of
// `shape`.
void set_output(Comm::Call& call, py::object out, DataType type, size_t count,
                const std::vector<py::ssize_t>& shape) {
  if (out.is_none()) out = new_array(type, shape);
  auto v = out_view(out, call.what, type, count);
  call.desc.recv = v->data();
  call.views.push_back(std::move(v));
  call.result = std::move(out);
}

BufferView& add_input(Comm::Call& call, py::handle x, Access access = Access::read) {
  call.views.push_back(std::make_unique<BufferView>(x, access, call.what, "x"));
  BufferView& v = *call.views.back();
  call.desc.send = v.data();
  call.desc.count = v.count();
  call.desc.type = v.type();
  return v;
}

// The first axis of x split into `parts` blocks (reduce_scatter, alltoall).
size_t first_axis_blocks(const BufferView& x, int parts, const std::string& call) {
  if (x.ndim() < 1) invalid(call + ": x must have at least one axis, it is a scalar");
  const auto first = static_cast<size_t>(x.shape()[0]);
  if (first % static_cast<size_t>(parts) != 0)
    invalid(call + ": x's first axis (" + std::to_string(first) +
            ") is not a multiple of the communicator size " + std::to_string(parts));
  return first / static_cast<size_t>(parts);
}

py::object allreduce(py::object self, py::handle x, py::handle op, py::object out, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("allreduce", Collective::allreduce, kw);
  const BufferView& in = add_input(call, x);
  call.desc.op = parse_op(op, call.what);
  set_output(call, std::move(out), in.type(), in.count(), in.shape());
  return c.run(std::move(self), std::move(call), kw.async_op);
}

py::object allgather(py::object self, py::handle x, py::object out, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("allgather", Collective::allgather, kw);
  const BufferView& in = add_input(call, x);
  std::vector<py::ssize_t> shape = in.shape();
  shape.insert(shape.begin(), c.size());
  set_output(call, std::move(out), in.type(), in.count() * static_cast<size_t>(c.size()), shape);
  return c.run(std::move(self), std::move(call), kw.async_op);
}

py::object reduce_scatter(py::object self, py::handle x, py::handle op, py::object out,
                          Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("reduce_scatter", Collective::reduce_scatter, kw);
  const BufferView& in = add_input(call, x);
  const size_t k = first_axis_blocks(in, c.size(), call.what);
  std::vector<py::ssize_t> shape = in.shape();
  shape[0] = static_cast<py::ssize_t>(k);
  call.desc.op = parse_op(op, call.what);
  call.desc.count = in.count() / static_cast<size_t>(c.size());
  set_output(call, std::move(out), in.type(), call.desc.count, shape);
  return c.run(std::move(self), std::move(call), kw.async_op);
}

py::object broadcast(py::object self, py::object x, int root, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("broadcast", Collective::broadcast, kw);
  // The root only reads x; the others write it.
  const BufferView& v = add_input(call, x, c.rank() == root ? Access::read : Access::write);
  call.desc.recv = v.data();
  call.desc.root = root;
  call.result = std::move(x);
  return c.run(std::move(self), std::move(call), kw.async_op);
}

py::object reduce(py::object self, py::handle x, int root, py::handle op, py::object out,
                  Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("reduce", Collective::reduce, kw);
  const BufferView& in = add_input(call, x);
  call.desc.op = parse_op(op, call.what);
  call.desc.root = root;
  if (c.rank() == root) set_output(call, std::move(out), in.type(), in.count(), in.shape());
  return c.run(std::move(self), std::move(call), kw.async_op);
}

py::object alltoall(py::object self, py::handle x, py::object out, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("alltoall", Collective::alltoall, kw);
  const BufferView& in = add_input(call, x);
  first_axis_blocks(in, c.size(), call.what);
  call.desc.count = in.count() / static_cast<size_t>(c.size());
  set_output(call, std::move(out), in.type(), in.count(), in.shape());
  return c.run(std::move(self), std::move(call), kw.async_op);
}

py::object barrier(py::object self, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("barrier", Collective::barrier, kw);
  call.desc.type = DataType::uint8;
  return c.run(std::move(self), std::move(call), kw.async_op);
}

py::object send(py::object self, py::handle x, int peer, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("send", Collective::allreduce, kw);
  add_input(call, x);
  call.p2p = OpKind::send;
  call.peer = peer;
  return c.run(std::move(self), std::move(call), kw.async_op);
}

py::object recv(py::object self, py::object x, int peer, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  auto call = new_call("recv", Collective::allreduce, kw);
  const BufferView& v = add_input(call, x, Access::write);
  call.desc.recv = v.data();
  call.desc.send = nullptr;
  call.p2p = OpKind::recv;
  call.peer = peer;
  call.result = std::move(x);
  return c.run(std::move(self), std::move(call), kw.async_op);
}

// --- windows ---------------------------------------------------------------------

// A numpy dtype of chorus's: a dtype, a scalar type (np.float32) or a name
// ("float32"), in native byte order.
py::dtype window_dtype(py::handle obj, const std::string& call) {
  py::dtype dt;
  try {
    dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(obj));
  } catch (py::error_already_set& e) {
    invalid(call + ": dtype " + py::repr(obj).cast<std::string>() + " is not a numpy dtype (" +
            e.what() + ")");
  }
  const char kind = dt.kind();
  const py::ssize_t w = dt.itemsize();
  const bool integer = (kind == 'i' || kind == 'u') && (w == 1 || w == 4 || w == 8);
  const bool floating = kind == 'f' && (w == 2 || w == 4 || w == 8);
  if ((integer || floating) && !dt.attr("isnative").cast<bool>())
    invalid(call + ": dtype " + py::str(py::handle(dt)).cast<std::string>() +
            " is not in native byte order");
  if (dt.has_fields() || !(integer || floating))
    invalid(call + ": dtype " + py::str(py::handle(dt)).cast<std::string>() +
            ", which chorus does not support; supported: int8, uint8, int32, uint32, int64, "
            "uint64, float16, float32, float64");
  return dt;
}

// An int or a sequence of ints, none negative.
std::vector<py::ssize_t> window_shape(py::handle shape, const std::string& call) {
  const std::string text = py::repr(shape).cast<std::string>();
  std::vector<py::ssize_t> dims;
  auto add = [&](py::handle d) {
    if (!PyIndex_Check(d.ptr()))
      invalid(call + ": shape " + text + " is not an int or a sequence of ints");
    const Py_ssize_t v = PyNumber_AsSsize_t(d.ptr(), nullptr);  // clamped on overflow
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (v < 0)
      invalid(call + ": shape " + text + " has the negative dimension " + std::to_string(v));
    dims.push_back(v);
  };
  if (PyIndex_Check(shape.ptr())) {
    add(shape);
  } else if (PySequence_Check(shape.ptr()) && !py::isinstance<py::str>(shape) &&
             !py::isinstance<py::bytes>(shape)) {
    for (py::handle d : py::reinterpret_borrow<py::sequence>(shape)) add(d);
  } else {
    invalid(call + ": shape " + text + " is not an int or a sequence of ints");
  }
  return dims;
}

py::array empty(py::object self, py::handle shape, py::handle dtype) {
  Comm& c = self.cast<Comm&>();
  const std::string call = "empty";
  const py::dtype dt = window_dtype(dtype, call);
  const std::vector<py::ssize_t> dims = window_shape(shape, call);
  size_t bytes = static_cast<size_t>(dt.itemsize());
  for (py::ssize_t d : dims)
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes) ||
        bytes > static_cast<size_t>(PY_SSIZE_T_MAX))
      invalid(call + ": shape " + py::repr(shape).cast<std::string>() + " of " +
              py::str(py::handle(dt)).cast<std::string>() + " is too large");
  // The array's base is the window: the memory lives while the array (or a
  // view of it) does.
  py::object window = py::cast(c.window(static_cast<py::ssize_t>(bytes)));
  const void* data = window.cast<const Window&>().data();
  return py::array(dt, dims, data, window);
}

// --- start-up ------------------------------------------------------------------

// init() runs on a thread of its own while the caller waits in slices: the
// store may keep it waiting for late ranks, and Ctrl-C must still work. On a
// signal the caller raises at once and the start-up thread, left on its own,
// drops the communicator it may still get (its peers see this rank leave).
struct StartUp {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::optional<Communicator> comm;
  std::exception_ptr error;
};

std::shared_ptr<PyCommunicator> init(std::optional<int> rank, std::optional<int> world_size,
                                     std::optional<std::string> store,
                                     std::optional<std::string> transport,
                                     std::optional<double> timeout) {
  const bool explicit_job = rank || world_size || store;
  if (explicit_job && !(rank && world_size && store))
    invalid(
        "init: give rank, world_size and store together, or none of them (then they come "
        "from the environment)");
  InitOptions options;
  if (explicit_job) {
    options.rank = *rank;
    options.world_size = *world_size;
    options.store = *store;
  } else {
    const BootstrapEnv env = read_bootstrap_env();
    options.rank = env.rank;
    options.world_size = env.world_size;
    options.store = env.store;
  }
  if (transport) options.transport = *transport;
  if (timeout) options.timeout = seconds_to_ms(*timeout, "init: timeout");

  auto job = std::make_shared<StartUp>();
  std::thread([job, options] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::optional<Communicator> comm;
    std::exception_ptr error;
    try {
      comm.emplace(chorus::init(options));
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(job->mu);
    job->comm = std::move(comm);
    job->error = error;
    job->finished = true;
    job->cv.notify_all();
  }).detach();

  const bool signals = on_main_thread();
  while (true) {
    {
      py::gil_scoped_release nogil;
      std::unique_lock lock(job->mu);
      if (job->cv.wait_for(lock, kSignalSlice, [&] { return job->finished; })) break;
    }
    if (signals && PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  std::lock_guard lock(job->mu);
  if (job->error) std::rethrow_exception(job->error);
  return std::make_shared<PyCommunicator>(std::move(*job->comm));
}

}  // namespace
}  // namespace chorus::python

PYBIND11_MODULE(_chorus, m) {
  using namespace chorus;
  using namespace chorus::python;
  m.doc() = "chorus: collective communication among N ranks (numpy binding)";
  m.attr("__version__") = CHORUS_VERSION;

  ErrorTypes& types = error_types();
  types.base =
      new_exception(m, "Error", "Base class of every error chorus raises.", {PyExc_RuntimeError});
  types.invalid_argument =
      new_exception(m, "InvalidArgument", "Bad call arguments, raised before any byte moves.",
                    {types.base, PyExc_ValueError});
  types.timeout = new_exception(m, "TimeoutError", "A call passed its deadline.", {types.base});
  types.peer_failure = new_exception(
      m, "PeerFailure", "A peer died, closed its connection or failed its own call.", {types.base});
  types.mismatch =
      new_exception(m, "MismatchError", "Ranks disagree (sizes, types, world size).", {types.base});
  types.aborted = new_exception(m, "AbortedError", "The communicator was aborted.", {types.base});
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_chorus_error(e);
    }
  });

  py::enum_<ReduceOp>(m, "ReduceOp", "Reduction operator; avg is sum divided by the world size.")
      .value("SUM", ReduceOp::sum)
      .value("PROD", ReduceOp::prod)
      .value("MIN", ReduceOp::min)
      .value("MAX", ReduceOp::max)
      .value("AVG", ReduceOp::avg);

  py::class_<PyWork>(m, "Work", "Handle on an asynchronous call (async_op=True).")
      .def("wait", &PyWork::wait, py::arg("timeout") = py::none(),
           "Blocks until the call has ended and returns its result (raises its error). With a "
           "timeout in seconds that passes first, aborts the communicator and raises "
           "chorus.TimeoutError.")
      .def("done", &PyWork::done, "Makes progress without blocking; True once the call has ended.");

  py::class_<Window>(m, "Window", py::buffer_protocol(),
                     "Memory that every rank of a one-host communicator can address "
                     "(Communicator.window): a buffer of bytes, e.g. np.frombuffer(w, "
                     "np.float32). It lives while any reference to it does.")
      .def_buffer([](const Window& w) {
        return py::buffer_info(w.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(w.size())}, {py::ssize_t{1}});
      })
      .def_property_readonly(
          "data_ptr", [](const Window& w) { return reinterpret_cast<uintptr_t>(w.data()); },
          "The address of this rank's memory of the window.")
      .def_property_readonly("nbytes", &Window::size, "The window's size in bytes.")
      .def("__len__", &Window::size)
      .def("__repr__", [](const Window& w) {
        return "<chorus.Window of " + std::to_string(w.size()) + " bytes>";
      });

  py::class_<PyCommunicator, std::shared_ptr<PyCommunicator>>(
      m, "Communicator", "One rank's handle on a group of ranks; a context manager.")
      .def_property_readonly("rank", &PyCommunicator::rank)
      .def_property_readonly("size", &PyCommunicator::size)
      .def("__repr__", &PyCommunicator::repr)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyCommunicator& c, py::handle type, py::handle value, py::handle) {
             c.exit(type, value);
             return false;
           })
      .def("close", &PyCommunicator::close,
           "Waits for the pending asynchronous calls, then frees the communicator.")
      .def("abort", &PyCommunicator::abort, py::arg("reason"),
           "Aborts the communicator: every pending and later call raises AbortedError here, and "
           "the peers raise AbortedError naming this rank and the reason.")
      .def("flight_record", &PyCommunicator::flight_record,
           "This rank's last 64 calls as JSON text.")
      .def("window", &PyCommunicator::window, py::arg("nbytes"),
           "A collective: a new chorus.Window of nbytes on every rank, memory that every rank "
           "can address (shm only; over tcp InvalidArgument). Every rank calls it with the "
           "same nbytes, in the same order as its other calls.")
      .def("empty", &empty, py::arg("shape"), py::arg("dtype") = "float64",
           "A new array of shape and dtype (as numpy.empty) in a new window of this "
           "communicator (a collective, as window()); its base is the Window. Calls whose x "
           "and out both lie in windows read the peers' data in place.")
      .def(
          "allreduce",
          [](py::object self, py::handle x, py::handle op, py::object out,
             std::optional<std::string> algorithm, std::optional<double> timeout, bool async_op) {
            return allreduce(std::move(self), x, op, std::move(out),
                             {algorithm, timeout, async_op});
          },
          py::arg("x"), py::arg("op") = "sum", py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false,
          "out = op over all ranks of x, on every rank (out=x: in place).")
      .def(
          "allgather",
          [](py::object self, py::handle x, py::object out, std::optional<std::string> algorithm,
             std::optional<double> timeout, bool async_op) {
            return allgather(std::move(self), x, std::move(out), {algorithm, timeout, async_op});
          },
          py::arg("x"), py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false, "Every rank's x, stacked: shape (size, *x.shape).")
      .def(
          "reduce_scatter",
          [](py::object self, py::handle x, py::handle op, py::object out,
             std::optional<std::string> algorithm, std::optional<double> timeout, bool async_op) {
            return reduce_scatter(std::move(self), x, op, std::move(out),
                                  {algorithm, timeout, async_op});
          },
          py::arg("x"), py::arg("op") = "sum", py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false,
          "x's first axis is size * k; rank r gets block r of the reduction, shape (k, "
          "*x.shape[1:]).")
      .def(
          "broadcast",
          [](py::object self, py::object x, int root, std::optional<std::string> algorithm,
             std::optional<double> timeout, bool async_op) {
            return broadcast(std::move(self), std::move(x), root, {algorithm, timeout, async_op});
          },
          py::arg("x"), py::arg("root") = 0, py::kw_only(), py::arg("algorithm") = py::none(),
          py::arg("timeout") = py::none(), py::arg("async_op") = false,
          "x = root's x on every rank, in place; returns x.")
      .def(
          "reduce",
          [](py::object self, py::handle x, int root, py::handle op, py::object out,
             std::optional<std::string> algorithm, std::optional<double> timeout, bool async_op) {
            return reduce(std::move(self), x, root, op, std::move(out),
                          {algorithm, timeout, async_op});
          },
          py::arg("x"), py::arg("root") = 0, py::arg("op") = "sum", py::kw_only(),
          py::arg("out") = py::none(), py::arg("algorithm") = py::none(),
          py::arg("timeout") = py::none(), py::arg("async_op") = false,
          "The reduction of x over all ranks on root (None on the others).")
      .def(
          "alltoall",
          [](py::object self, py::handle x, py::object out, std::optional<std::string> algorithm,
             std::optional<double> timeout, bool async_op) {
            return alltoall(std::move(self), x, std::move(out), {algorithm, timeout, async_op});
          },
          py::arg("x"), py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false,
          "x's first axis holds size blocks; block j goes to rank j, and block j of out comes "
          "from rank j.")
      .def(
          "barrier",
          [](py::object self, std::optional<std::string> algorithm, std::optional<double> timeout,
             bool async_op) {
            return barrier(std::move(self), {algorithm, timeout, async_op});
          },
          py::kw_only(), py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false, "Returns once every rank has entered the barrier.")
      .def(
          "send",
          [](py::object self, py::handle x, int peer, std::optional<double> timeout,
             bool async_op) {
            return send(std::move(self), x, peer, {{}, timeout, async_op});
          },
          py::arg("x"), py::arg("peer"), py::kw_only(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false,
          "Sends x to peer; the k-th send to a peer matches its k-th recv from this rank.")
      .def(
          "recv",
          [](py::object self, py::object x, int peer, std::optional<double> timeout,
             bool async_op) {
            return recv(std::move(self), std::move(x), peer, {{}, timeout, async_op});
          },
          py::arg("x"), py::arg("peer"), py::kw_only(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false, "Receives from peer into x; returns x.");

  m.def("init", &chorus::python::init, py::kw_only(), py::arg("rank") = py::none(),
        py::arg("world_size") = py::none(), py::arg("store") = py::none(),
        py::arg("transport") = py::none(), py::arg("timeout") = py::none(),
        "This process's Communicator. Without rank, world_size and store, they come from the "
        "environment (chorus-run, torchrun, mpirun, srun: as chorus::init_from_env). transport "
        "is 'shm' or 'tcp'; timeout (seconds) bounds the start-up.");
}
