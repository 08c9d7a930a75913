// What the torch backend's calls make of their tensors and options: checks
// (CPU, dense, one dtype, the expected sizes), chorus's element type and
// count, the reduce op, and contiguous memory for chorus to read and write.
// Every rejection is chorus::Error(invalid_argument), "chorus backend: CALL: ...",
// raised in the calling thread before anything is queued.
#pragma once

#include <chorus/types.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace chorus::torch_backend {

// Raises Error(invalid_argument) "chorus backend: <call>: <what>".
[[noreturn]] void unsupported(const std::string& call, const std::string& what);

// chorus's type of a torch dtype, where chorus reduces it.
std::optional<DataType> chorus_type(at::ScalarType t);

// A defined CPU tensor with a strided layout, or unsupported().
void check_tensor(const at::Tensor& t, const std::string& call);

// What chorus sees of a tensor's elements: its type and count. Types chorus
// does not reduce (bool, int16, complex, ...) travel as bytes where nothing
// is reduced; a reduction of them is an error naming the type.
struct Elements {
  DataType type = DataType::uint8;
  size_t count = 0;
};
Elements elements(const at::Tensor& t, const std::string& call, bool reduces);

// chorus's ReduceOp of a c10d one (PREMUL_SUM: unsupported()).
ReduceOp chorus_op(const c10d::ReduceOp& op, const std::string& call);

// A call's options: its timeout (unset, negative: the group's; 0: one that
// passes at once).
CallOptions call_options(std::chrono::milliseconds timeout);

// A tensor's memory as chorus sees it: the tensor itself when contiguous,
// else a contiguous copy, written back after the call when the call writes
// it.
struct Staged {
  at::Tensor user;
  at::Tensor buffer;

  std::byte* data() const { return static_cast<std::byte*>(buffer.data_ptr()); }
  void write_back() const {
    if (!buffer.is_same(user)) user.copy_(buffer);
  }
};

// How a call uses a tensor: what a copy of a non-contiguous one must hold.
enum class Use { read, write, read_write };

Staged stage(const at::Tensor& t, Use use);

// The one tensor of a call that takes one tensor per process.
at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& call);

// `t` (named `what` in errors) has ref's dtype and `numel` elements.
void check_like(const at::Tensor& t, const at::Tensor& ref, const std::string& call,
                const std::string& what, int64_t numel);

// The tensors of a list as one contiguous buffer when they already are one
// (adjacent, in order, each contiguous), else an empty tensor.
at::Tensor as_one_buffer(const std::vector<at::Tensor>& list);

}  // namespace chorus::torch_backend
