// The numpy binding's exception classes: chorus::Error becomes a
// chorus.Error subclass chosen by its ErrorCode (InvalidArgument is also a
// ValueError, chorus.Error a RuntimeError), with the code as its `code`.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace chorus::python {

// Raises Error(invalid_argument) with `message`: chorus.InvalidArgument.
[[noreturn]] void invalid(const std::string& message);

// Defines chorus.Error and its subclasses in `m` and translates every
// chorus::Error that leaves a binding into one of them.
void define_errors(pybind11::module_& m);

}  // namespace chorus::python
