// The calls of chorus.Communicator (calls.h).
#include "numpy_binding/calls.h"

#include "numpy_binding/buffers.h"
#include "numpy_binding/communicator.h"
#include "numpy_binding/errors.h"

namespace py = pybind11;

namespace chorus::python {
namespace {

using Comm = PyCommunicator;
using Request = PyCommunicator::Request;
using Access = BufferView::Access;

// A request named `what`, whose buffers the helpers below add before its
// Call is made.
Request new_request(const char* what) {
  Request r;
  r.what = what;
  return r;
}

CallOptions options_of(const Request& r, const Keywords& kw) {
  CallOptions o = call_options(kw.algorithm, kw.timeout, r.what);
  o.deterministic = kw.deterministic;
  return o;
}

// x, the call's input, held while the call runs.
const BufferView& add_input(Request& r, py::handle x, Access access = Access::read) {
  r.views.push_back(std::make_unique<BufferView>(x, access, r.what, "x"));
  return *r.views.back();
}

// The call writes into `out` when given (returned as is), else into a new
// array of `shape`; returns where.
void* add_output(Request& r, py::object out, DataType type, size_t count,
                 const std::vector<py::ssize_t>& shape) {
  if (out.is_none()) out = new_array(type, shape);
  auto v = out_view(out, r.what, type, count);
  void* data = v->data();
  r.views.push_back(std::move(v));
  r.result = std::move(out);
  return data;
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

}  // namespace

namespace {

Request allreduce_request(py::handle x, py::handle op, py::object out, const Keywords& kw) {
  Request r = new_request("allreduce");
  const CallOptions options = options_of(r, kw);
  const BufferView& in = add_input(r, x);
  const ReduceOp reduce_op = parse_op(op, r.what);
  void* dst = add_output(r, std::move(out), in.type(), in.count(), in.shape());
  r.call = Call::allreduce(in.data(), dst, in.count(), in.type(), reduce_op, options);
  return r;
}

}  // namespace

py::object allreduce(py::object self, py::handle x, py::handle op, py::object out, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = allreduce_request(x, op, std::move(out), kw);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object prepare_allreduce(py::object self, py::handle x, py::handle op, py::object out,
                             Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = allreduce_request(x, op, std::move(out), kw);
  return c.prepare(std::move(self), std::move(r));
}

py::object allgather(py::object self, py::handle x, py::object out, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("allgather");
  const CallOptions options = options_of(r, kw);
  const BufferView& in = add_input(r, x);
  std::vector<py::ssize_t> shape = in.shape();
  shape.insert(shape.begin(), c.size());
  void* dst =
      add_output(r, std::move(out), in.type(), in.count() * static_cast<size_t>(c.size()), shape);
  r.call = Call::allgather(in.data(), dst, in.count(), in.type(), options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object reduce_scatter(py::object self, py::handle x, py::handle op, py::object out,
                          Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("reduce_scatter");
  const CallOptions options = options_of(r, kw);
  const BufferView& in = add_input(r, x);
  const size_t k = first_axis_blocks(in, c.size(), r.what);
  std::vector<py::ssize_t> shape = in.shape();
  shape[0] = static_cast<py::ssize_t>(k);
  const ReduceOp reduce_op = parse_op(op, r.what);
  const size_t count = in.count() / static_cast<size_t>(c.size());
  void* dst = add_output(r, std::move(out), in.type(), count, shape);
  r.call = Call::reduce_scatter(in.data(), dst, count, in.type(), reduce_op, options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object broadcast(py::object self, py::object x, int root, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("broadcast");
  const CallOptions options = options_of(r, kw);
  // The root only reads x; the others write it.
  const BufferView& v = add_input(r, x, c.rank() == root ? Access::read : Access::write);
  r.result = std::move(x);
  r.call = Call::broadcast(v.data(), v.data(), v.count(), v.type(), root, options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object reduce(py::object self, py::handle x, int root, py::handle op, py::object out,
                  Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("reduce");
  const CallOptions options = options_of(r, kw);
  const BufferView& in = add_input(r, x);
  const ReduceOp reduce_op = parse_op(op, r.what);
  // Only the root has a result.
  void* dst =
      c.rank() == root ? add_output(r, std::move(out), in.type(), in.count(), in.shape()) : nullptr;
  r.call = Call::reduce(in.data(), dst, in.count(), in.type(), reduce_op, root, options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object alltoall(py::object self, py::handle x, py::object out, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("alltoall");
  const CallOptions options = options_of(r, kw);
  const BufferView& in = add_input(r, x);
  first_axis_blocks(in, c.size(), r.what);
  void* dst = add_output(r, std::move(out), in.type(), in.count(), in.shape());
  r.call = Call::alltoall(in.data(), dst, in.count() / static_cast<size_t>(c.size()), in.type(),
                          options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object gather(py::object self, py::handle x, int root, py::object out, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("gather");
  const CallOptions options = options_of(r, kw);
  const BufferView& in = add_input(r, x);
  // Only the root has a result: every rank's x, stacked.
  void* dst = nullptr;
  if (c.rank() == root) {
    std::vector<py::ssize_t> shape = in.shape();
    shape.insert(shape.begin(), c.size());
    dst =
        add_output(r, std::move(out), in.type(), in.count() * static_cast<size_t>(c.size()), shape);
  }
  r.call = Call::gather(in.data(), dst, in.count(), in.type(), root, options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object scatter(py::object self, py::object x, int root, py::object out, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("scatter");
  const CallOptions options = options_of(r, kw);
  if (c.rank() != root) {
    // The root's x is read on the root only; the others receive into out.
    if (out.is_none())
      invalid("scatter: rank " + std::to_string(c.rank()) + " is not the root (" +
              std::to_string(root) + "): out must be the array that receives its block");
    const BufferView& v = add_input(r, out, Access::write);
    r.result = std::move(out);
    r.call = Call::scatter(nullptr, v.data(), v.count(), v.type(), root, options);
    return c.run(std::move(self), std::move(r), kw.async_op);
  }
  const BufferView& in = add_input(r, x);
  const size_t k = first_axis_blocks(in, c.size(), r.what);
  std::vector<py::ssize_t> shape = in.shape();
  shape[0] = static_cast<py::ssize_t>(k);
  const size_t count = in.count() / static_cast<size_t>(c.size());
  void* dst = add_output(r, std::move(out), in.type(), count, shape);
  r.call = Call::scatter(in.data(), dst, count, in.type(), root, options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object barrier(py::object self, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("barrier");
  r.call = Call::barrier(options_of(r, kw));
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object send(py::object self, py::handle x, int peer, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("send");
  const CallOptions options = options_of(r, kw);
  const BufferView& in = add_input(r, x);
  r.call = Call::send_to(in.data(), in.count(), in.type(), peer, options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

py::object recv(py::object self, py::object x, int peer, Keywords kw) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("recv");
  const CallOptions options = options_of(r, kw);
  const BufferView& v = add_input(r, x, Access::write);
  r.result = std::move(x);
  r.call = Call::recv_from(v.data(), v.count(), v.type(), peer, options);
  return c.run(std::move(self), std::move(r), kw.async_op);
}

int recv_any(py::object self, py::object x, std::optional<double> timeout) {
  Comm& c = self.cast<Comm&>();
  Request r = new_request("recv_any");
  const CallOptions options = options_of(r, {{}, timeout, false});
  const BufferView& v = add_input(r, x, Access::write);
  return c.recv_any(v.data(), v.count(), v.type(), options);
}

}  // namespace chorus::python
