// chorus._chorus: the numpy binding behind `import chorus`. This file is its
// module definition; the parts it binds:
//   errors.h        chorus.Error and its subclasses
//   buffers.h       arrays in (the buffer protocol), arrays out, ops, timeouts
//   communicator.h  chorus.Communicator and chorus.Work: running and waiting
//   calls.h         allreduce, ..., send, recv: buffers to a chorus::Call
//   windows.h       Communicator.empty (Communicator.window is the C++ call)
//   start_up.h      chorus.init
//
//   with chorus.init() as comm:
//       g = comm.allreduce(np.ones(4, np.float32), op="sum")   # new array
//       comm.allreduce(g, out=g)                               # in place
//       w = comm.allgather(g, async_op=True); ...; rows = w.wait()
#include "numpy_binding/calls.h"
#include "numpy_binding/communicator.h"
#include "numpy_binding/errors.h"
#include "numpy_binding/start_up.h"
#include "numpy_binding/windows.h"

#include <chorus/chorus.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>

namespace py = pybind11;

PYBIND11_MODULE(_chorus, m) {
  using namespace chorus;
  using namespace chorus::python;
  m.doc() = "chorus: collective communication among N ranks (numpy binding)";
  m.attr("__version__") = CHORUS_VERSION;

  define_errors(m);

  py::enum_<ReduceOp>(m, "ReduceOp", "Reduction operator; avg is sum divided by the world size.")
      .value("SUM", ReduceOp::sum)
      .value("PROD", ReduceOp::prod)
      .value("MIN", ReduceOp::min)
      .value("MAX", ReduceOp::max)
      .value("AVG", ReduceOp::avg)
      .value("BAND", ReduceOp::band)
      .value("BOR", ReduceOp::bor)
      .value("BXOR", ReduceOp::bxor);

  py::class_<PyWork>(m, "Work", "Handle on an asynchronous call (async_op=True).")
      .def("wait", &PyWork::wait, py::arg("timeout") = py::none(),
           "Blocks until the call has ended and returns its result (raises its error). With a "
           "timeout in seconds that passes first, aborts the communicator and raises "
           "chorus.TimeoutError.")
      .def("done", &PyWork::done, "Never blocks; True once the call has ended.");

  py::class_<PyPlan>(m, "Plan",
                     "A call prepared once and started many times on the same arrays "
                     "(Communicator.prepare_allreduce).")
      .def("start", &PyPlan::start,
           "Runs the prepared call again, on the same arrays, and returns its chorus.Work; "
           "raises while the previous run is outstanding.")
      .def_property_readonly("algorithm", &PyPlan::algorithm,
                             "The algorithm every run uses (\"\" where each run chooses).");

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
      .def("revoke", &PyCommunicator::revoke,
           "Revokes the communicator: every pending and later call on every rank raises "
           "RevokedError. Any rank, any thread; never blocks. The survivors go on with shrink().")
      .def("shrink", &PyCommunicator::shrink, py::arg("timeout") = py::none(),
           "After a failure or a revoke, the live ranks call it: a new Communicator of the "
           "ranks that did not fail, ranked in the order of their ranks here. Every survivor "
           "gets the same membership, or every survivor raises. A rank that has not called "
           "shrink within timeout seconds (None: CHORUS_TIMEOUT) is counted failed. Needs no "
           "store.")
      .def("grow", &PyCommunicator::grow, py::arg("joining"), py::arg("timeout") = py::none(),
           "A collective with `joining` new processes that call chorus.join(): a new "
           "Communicator of the ranks here (ranked as here) and the joiners after them. Every "
           "member and joiner gets it, or every one raises.")
      .def_property_readonly(
          "transport", [](const PyCommunicator& c) { return c.live().transport(); },
          "The transport that connects the ranks: \"shm\", \"tcp\" or \"shm+tcp\".")
      .def_property_readonly(
          "progress", [](const PyCommunicator& c) { return c.live().progress(); },
          "Who advances asynchronous calls: \"thread\" (a progress thread) or \"caller\".")
      .def("split", &PyCommunicator::split, py::arg("color"), py::arg("key") = 0,
           "A collective: the ranks that pass the same color form a new Communicator, ranked by "
           "(key, rank here); a negative color takes part and gets None. The new communicator "
           "needs no store: it is set up through this one.")
      .def("split_by_host", &PyCommunicator::split_by_host,
           "A collective: a new Communicator of the ranks of this one that share this rank's "
           "host (memory), ranked as here.")
      .def("flight_record", &PyCommunicator::flight_record,
           "This rank's last 64 calls as JSON text.")
      .def("stragglers", &PyCommunicator::stragglers, py::arg("calls") = 0,
           "A collective: who held the others back over the last `calls` collectives (0: all "
           "that every rank still records, at most 64): a list with one dict per rank, keys "
           "rank, calls, last_count (calls it arrived last in, beyond the clock error), "
           "mean_late_s and p90_late_s (its arrival minus the first, on rank 0's clock), "
           "wait_share (its share of the group's waiting) and error_s (the clock error bar).")
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
             std::optional<std::string> algorithm, std::optional<double> timeout, bool async_op,
             bool deterministic) {
            return allreduce(std::move(self), x, op, std::move(out),
                             {algorithm, timeout, async_op, deterministic});
          },
          py::arg("x"), py::arg("op") = "sum", py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false, py::arg("deterministic") = false,
          "out = op over all ranks of x, on every rank (out=x: in place); deterministic=True: the "
          "same bits whatever the algorithm, transport, size and number of ranks (sum and avg on "
          "floats; docs/PYTHON.md).")
      .def(
          "prepare_allreduce",
          [](py::object self, py::handle x, py::handle op, py::object out,
             std::optional<std::string> algorithm, std::optional<double> timeout,
             bool deterministic) {
            return prepare_allreduce(std::move(self), x, op, std::move(out),
                                     {algorithm, timeout, false, deterministic});
          },
          py::arg("x"), py::arg("op") = "sum", py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("deterministic") = false,
          "allreduce(x, op, out=...) prepared once as a chorus.Plan: plan.start() runs it again "
          "on the same arrays with no new choice of algorithm and returns its chorus.Work "
          "(whose wait() returns out). Every rank prepares and starts its plans in the same "
          "order as its other calls.")
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
             std::optional<std::string> algorithm, std::optional<double> timeout, bool async_op,
             bool deterministic) {
            return reduce_scatter(std::move(self), x, op, std::move(out),
                                  {algorithm, timeout, async_op, deterministic});
          },
          py::arg("x"), py::arg("op") = "sum", py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false, py::arg("deterministic") = false,
          "x's first axis is size * k; rank r gets block r of the reduction, shape (k, "
          "*x.shape[1:]); deterministic=True: the same bits whatever the algorithm, transport, "
          "size and number of ranks (sum and avg on floats; docs/PYTHON.md).")
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
             std::optional<std::string> algorithm, std::optional<double> timeout, bool async_op,
             bool deterministic) {
            return reduce(std::move(self), x, root, op, std::move(out),
                          {algorithm, timeout, async_op, deterministic});
          },
          py::arg("x"), py::arg("root") = 0, py::arg("op") = "sum", py::kw_only(),
          py::arg("out") = py::none(), py::arg("algorithm") = py::none(),
          py::arg("timeout") = py::none(), py::arg("async_op") = false,
          py::arg("deterministic") = false,
          "The reduction of x over all ranks on root (None on the others); deterministic=True: the "
          "same bits whatever the algorithm, transport, size and number of ranks (sum and avg on "
          "floats; docs/PYTHON.md).")
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
          "gather",
          [](py::object self, py::handle x, int root, py::object out,
             std::optional<std::string> algorithm, std::optional<double> timeout, bool async_op) {
            return gather(std::move(self), x, root, std::move(out), {algorithm, timeout, async_op});
          },
          py::arg("x"), py::arg("root") = 0, py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false,
          "Every rank's x, stacked on root: shape (size, *x.shape); None on the others.")
      .def(
          "scatter",
          [](py::object self, py::object x, int root, py::object out,
             std::optional<std::string> algorithm, std::optional<double> timeout, bool async_op) {
            return scatter(std::move(self), std::move(x), root, std::move(out),
                           {algorithm, timeout, async_op});
          },
          py::arg("x"), py::arg("root") = 0, py::kw_only(), py::arg("out") = py::none(),
          py::arg("algorithm") = py::none(), py::arg("timeout") = py::none(),
          py::arg("async_op") = false,
          "On root, x's first axis holds size blocks; rank j gets block j, shape (k, "
          "*x.shape[1:]). x is read on the root only: the other ranks pass out, the array "
          "that receives their block (x may be None there).")
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
          py::arg("async_op") = false, "Receives from peer into x; returns x.")
      .def("recv_any", &recv_any, py::arg("x"), py::kw_only(), py::arg("timeout") = py::none(),
           "Receives into x the next message from whichever rank's arrives first (that rank's "
           "next message to this one); returns the sender's rank. Blocking; a timeout that "
           "passes first raises TimeoutError and leaves the communicator usable.");

  m.def("init", &chorus::python::init, py::kw_only(), py::arg("rank") = py::none(),
        py::arg("world_size") = py::none(), py::arg("store") = py::none(),
        py::arg("transport") = py::none(), py::arg("timeout") = py::none(),
        py::arg("progress") = py::none(), py::arg("progress_cpu") = py::none(),
        "This process's Communicator. Without rank, world_size and store, they come from the "
        "environment (chorus-run, torchrun, mpirun, srun: as chorus::init_from_env). transport "
        "is 'shm' or 'tcp'; timeout (seconds) bounds the start-up; progress is 'thread' (the "
        "default: a progress thread advances async calls while Python computes) or 'caller' "
        "(only calls advance them), and progress_cpu pins that thread (as CHORUS_PROGRESS and "
        "CHORUS_PROGRESS_CPU).");
  m.def("join", &chorus::python::join,
        "This process's Communicator as a joiner of a running job: its part of the members' "
        "comm.grow(n). The job's store and the generation come from CHORUS_STORE and "
        "CHORUS_JOIN_GENERATION (docs/LAUNCHING.md).");
}
