// Communicator.empty of the numpy binding (windows.h).
#include "numpy_binding/windows.h"

#include "numpy_binding/communicator.h"
#include "numpy_binding/errors.h"

#include <string>
#include <vector>

namespace py = pybind11;

namespace chorus::python {
namespace {

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

}  // namespace

py::array empty(py::object self, py::handle shape, py::handle dtype) {
  PyCommunicator& c = self.cast<PyCommunicator&>();
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

}  // namespace chorus::python
