// Communicator.empty of the numpy binding: a numpy array of a shape and
// dtype in a new window of the communicator (Communicator.window), whose
// base is the chorus.Window, so that the memory lives while the array (or a
// view of it) does.
//   a = comm.empty((4, 1024), "float32")   # a collective, as window()
//   comm.allreduce(a, out=a)               # the peers' data read in place
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

namespace chorus::python {

// `self` is the chorus.Communicator; `shape` an int or a sequence of ints,
// none negative; `dtype` a numpy dtype of chorus's (a dtype, a scalar type or
// a name) in native byte order.
pybind11::array empty(pybind11::object self, pybind11::handle shape, pybind11::handle dtype);

}  // namespace chorus::python
