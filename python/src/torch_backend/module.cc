// chorus.torch._backend: the Python module of the torch backend; it defines
// ProcessGroupChorus (process_group.h) for chorus/torch/__init__.py, which
// registers it with torch.distributed as "chorus".
#include "torch_backend/process_group.h"

#include <chorus/error.h>

#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <cmath>
#include <cstdint>

namespace py = pybind11;

namespace {

// A group's timeout: positive seconds, as milliseconds rounded up.
std::chrono::milliseconds timeout_of(double seconds) {
  if (!(seconds > 0))
    throw chorus::Error(chorus::ErrorCode::invalid_argument,
                        "chorus backend: the timeout must be positive seconds");
  const double ms = std::ceil(seconds * 1000.0);
  return ms >= 1e15 ? std::chrono::milliseconds::max()
                    : std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

}  // namespace

PYBIND11_MODULE(_backend, m) {
  using chorus::torch_backend::ProcessGroupChorus;
  m.doc() = "chorus as a torch.distributed backend (import chorus.torch registers it)";
  py::module_::import("torch.distributed");  // c10d's classes, the base of ours
  py::class_<ProcessGroupChorus, c10::intrusive_ptr<ProcessGroupChorus>, c10d::ProcessGroup>(
      m, "ProcessGroupChorus", "A torch.distributed process group over one chorus communicator.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       double timeout_seconds) {
             return c10::make_intrusive<ProcessGroupChorus>(store, rank, size,
                                                            timeout_of(timeout_seconds));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>(),
           "Meets the other ranks through `store` (a c10d Store); timeout in seconds.")
      .def(
          "new_group",
          [](ProcessGroupChorus& pg, const std::vector<int>& ranks, double timeout_seconds) {
            return pg.new_group(ranks, timeout_of(timeout_seconds));
          },
          py::arg("ranks"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
          "The group of `ranks` (ranks of this group; this rank among them), derived from this "
          "group's communicator without a store; timeout in seconds. A collective over `ranks` "
          "only.")
      .def("revoke", &ProcessGroupChorus::revoke, py::call_guard<py::gil_scoped_release>(),
           "Revokes the communicator: pending and later calls on every rank raise "
           "chorus.RevokedError. Any thread; never blocks.")
      .def(
          "shrink",
          [](ProcessGroupChorus& pg, double timeout_seconds) {
            return pg.shrink(timeout_seconds == 0 ? std::chrono::milliseconds(0)
                                                  : timeout_of(timeout_seconds));
          },
          py::arg("timeout") = 0.0, py::call_guard<py::gil_scoped_release>(),
          "After a failure or a revoke, on the live ranks: a new ProcessGroupChorus of the ranks "
          "that did not fail, ranked in the order of their ranks here (Communicator::shrink); "
          "timeout in seconds, 0: CHORUS_TIMEOUT. chorus.torch.shrink_default_group makes it "
          "torch's default group.")
      .def("abort", &ProcessGroupChorus::abort, py::arg("reason"),
           py::call_guard<py::gil_scoped_release>(),
           "Aborts the communicator: pending and later calls fail here, and the peers raise "
           "chorus.AbortedError naming this rank and the reason.")
      .def_property_readonly("transport", &ProcessGroupChorus::transport_name,
                             "The name of the chorus transport under this group (shm, tcp, ...).")
      .def("flight_record", &ProcessGroupChorus::flight_record,
           "This rank's last 64 chorus calls as JSON text.")
      .def(
          "empty",
          [](ProcessGroupChorus& pg, const std::vector<int64_t>& size, py::handle dtype) {
            if (!THPDtype_Check(dtype.ptr()))
              throw chorus::Error(chorus::ErrorCode::invalid_argument,
                                  std::string("chorus backend: empty: dtype must be a "
                                              "torch.dtype, not ") +
                                      Py_TYPE(dtype.ptr())->tp_name);
            const at::ScalarType type = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
            at::Tensor t;
            {
              py::gil_scoped_release nogil;
              t = pg.empty(size, type);
            }
            return t;
          },
          py::arg("size"), py::arg("dtype"),
          "A collective: a CPU tensor of size and dtype in a new shared window of this group's "
          "communicator (shm only). Calls on tensors in windows read the peers' data in "
          "place. chorus.torch.empty is the front end.");
}
