// The calls of chorus.Communicator (allreduce, ..., send, recv): each checks
// its buffers, builds the chorus::Call and its result (a new array, or `out`)
// and runs it through PyCommunicator::run, blocking or (async_op) not.
//   comm.allreduce(x, "sum", out=None, algorithm=None, timeout=None, async_op=False,
//                  deterministic=False)
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

namespace chorus::python {

// The keywords every call takes.
struct Keywords {
  std::optional<std::string> algorithm;
  std::optional<double> timeout;
  bool async_op = false;
  // allreduce, reduce_scatter, reduce: CallOptions::deterministic.
  bool deterministic = false;
};

// `self` is the chorus.Communicator; x, out and the results as module.cc
// documents them.
pybind11::object allreduce(pybind11::object self, pybind11::handle x, pybind11::handle op,
                           pybind11::object out, Keywords kw);
// Communicator.prepare_allreduce: the same call as a chorus.Plan.
pybind11::object prepare_allreduce(pybind11::object self, pybind11::handle x, pybind11::handle op,
                                   pybind11::object out, Keywords kw);
pybind11::object allgather(pybind11::object self, pybind11::handle x, pybind11::object out,
                           Keywords kw);
pybind11::object reduce_scatter(pybind11::object self, pybind11::handle x, pybind11::handle op,
                                pybind11::object out, Keywords kw);
pybind11::object broadcast(pybind11::object self, pybind11::object x, int root, Keywords kw);
pybind11::object reduce(pybind11::object self, pybind11::handle x, int root, pybind11::handle op,
                        pybind11::object out, Keywords kw);
pybind11::object alltoall(pybind11::object self, pybind11::handle x, pybind11::object out,
                          Keywords kw);
// gather: the root's result is every rank's x, stacked; None elsewhere.
pybind11::object gather(pybind11::object self, pybind11::handle x, int root, pybind11::object out,
                        Keywords kw);
// scatter: the root's x holds size blocks along its first axis; every rank
// gets its block (the others into `out`, which they must give).
pybind11::object scatter(pybind11::object self, pybind11::object x, int root, pybind11::object out,
                         Keywords kw);
pybind11::object barrier(pybind11::object self, Keywords kw);
pybind11::object send(pybind11::object self, pybind11::handle x, int peer, Keywords kw);
pybind11::object recv(pybind11::object self, pybind11::object x, int peer, Keywords kw);
// Blocking only: returns the sender's rank.
int recv_any(pybind11::object self, pybind11::object x, std::optional<double> timeout);

}  // namespace chorus::python
