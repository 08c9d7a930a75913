// What the numpy binding makes of a call's arguments: buffers through the
// buffer protocol (numpy arrays, memoryviews, bytearrays), their element
// type from the buffer's format, new result arrays, the reduce op, and
// timeouts in seconds. Every rejection is chorus.InvalidArgument naming the
// call and the argument ("allreduce: out ...").
#pragma once

#include <chorus/types.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::python {

// One Python object's memory, held through the buffer protocol while a call
// may touch it (an exported buffer cannot be resized or freed meanwhile):
// C-contiguous, of a type chorus knows. Only while holding the GIL:
// construction and destruction call into Python.
class BufferView {
 public:
  enum class Access { read, write };

  // `call` and `name` name the argument in errors ("allreduce: out ...").
  BufferView(pybind11::handle obj, Access access, const std::string& call, const char* name);
  ~BufferView() { release(); }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;

  void* data() const { return view_.buf; }
  size_t count() const { return count_; }
  size_t bytes() const { return static_cast<size_t>(view_.len); }
  DataType type() const { return type_; }
  std::vector<pybind11::ssize_t> shape() const {
    return std::vector<pybind11::ssize_t>(view_.shape, view_.shape + view_.ndim);
  }
  int ndim() const { return view_.ndim; }

 private:
  void release() {
    if (held_) PyBuffer_Release(&view_);
    held_ = false;
  }
  // "(2, 3)" of a shape or strides array.
  std::string tuple_text(const Py_ssize_t* v) const;
  // Struct-module format of one native-order element ("f", "<q", "=B") to a
  // DataType: the kind from the letter, the width from the item size.
  std::optional<DataType> parse_format() const;

  Py_buffer view_{};
  bool held_ = false;
  DataType type_ = DataType::uint8;
  size_t count_ = 0;
};

using ViewPtr = std::unique_ptr<BufferView>;

// A new numpy array of chorus's `type` and `shape`.
pybind11::array new_array(DataType type, const std::vector<pybind11::ssize_t>& shape);

// An `out` argument: writable, contiguous, of x's type and `count` elements.
ViewPtr out_view(pybind11::handle out, const std::string& call, DataType type, size_t count);

// A reduce op given as a str ("sum") or a chorus.ReduceOp.
ReduceOp parse_op(pybind11::handle op, const std::string& call);

// A positive number of seconds as whole milliseconds (rounded up, so that a
// short timeout never becomes 0, which would mean "the default"). `what`
// names it in errors ("allreduce: timeout").
std::chrono::milliseconds seconds_to_ms(double seconds, const std::string& what);

// A call's options from its keywords.
CallOptions call_options(const std::optional<std::string>& algorithm,
                         const std::optional<double>& timeout, const std::string& call);

}  // namespace chorus::python
