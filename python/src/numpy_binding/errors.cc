// The numpy binding's exception classes (errors.h).
#include "numpy_binding/errors.h"

#include <chorus/error.h>

#include <initializer_list>

namespace py = pybind11;

namespace chorus::python {
namespace {

struct ErrorTypes {
  py::handle base, invalid_argument, timeout, peer_failure, mismatch, aborted, revoked;

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
      case ErrorCode::revoked:
        return revoked;
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

}  // namespace

void invalid(const std::string& message) {
  throw Error(ErrorCode::invalid_argument, message);
}

void define_errors(py::module_& m) {
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
  types.revoked = new_exception(
      m, "RevokedError", "The communicator was revoked, by this rank or another.", {types.base});
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_chorus_error(e);
    }
  });
}

}  // namespace chorus::python
