// Buffers and argument conversion of the numpy binding (buffers.h).
#include "numpy_binding/buffers.h"

#include "numpy_binding/errors.h"

#include <cmath>
#include <sstream>

namespace py = pybind11;

namespace chorus::python {

BufferView::BufferView(py::handle obj, Access access, const std::string& call, const char* name) {
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

std::string BufferView::tuple_text(const Py_ssize_t* v) const {
  std::string s = "(";
  for (int i = 0; i < view_.ndim; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(v ? v[i] : 0);
  }
  return s + (view_.ndim == 1 ? ",)" : ")");
}

std::optional<DataType> BufferView::parse_format() const {
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

py::array new_array(DataType type, const std::vector<py::ssize_t>& shape) {
  return py::array(py::dtype::from_args(py::str(std::string(to_string(type)))), shape);
}

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
    invalid(call + ": op '" + name + "' is not one of sum, prod, min, max, avg, band, bor, bxor");
  }
  invalid(call + ": op must be a str or a chorus.ReduceOp, not " + Py_TYPE(op.ptr())->tp_name);
}

std::chrono::milliseconds seconds_to_ms(double seconds, const std::string& what) {
  using std::chrono::milliseconds;
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

}  // namespace chorus::python
