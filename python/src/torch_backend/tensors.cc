// Tensor checks and conversions of the torch backend (tensors.h).
#include "torch_backend/tensors.h"

#include "core/check.h"

#include <chorus/error.h>

namespace chorus::torch_backend {

void unsupported(const std::string& call, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, "chorus backend: " + call + ": " + what);
}

std::optional<DataType> chorus_type(at::ScalarType t) {
  switch (t) {
    case at::kChar:
      return DataType::int8;
    case at::kByte:
      return DataType::uint8;
    case at::kInt:
      return DataType::int32;
    case at::kLong:
      return DataType::int64;
    case at::kHalf:
      return DataType::float16;
    case at::kBFloat16:
      return DataType::bfloat16;
    case at::kFloat:
      return DataType::float32;
    case at::kDouble:
      return DataType::float64;
    default:
      return std::nullopt;
  }
}

void check_tensor(const at::Tensor& t, const std::string& call) {
  if (!t.defined()) unsupported(call, "an undefined tensor");
  if (t.device().type() != at::kCPU)
    unsupported(call, "the tensor is on " + t.device().str() +
                          "; the chorus backend moves CPU tensors only");
  if (t.layout() != at::kStrided)
    unsupported(call, str_cat("a ", t.layout(),
                              " tensor; the chorus backend moves dense (strided) tensors only"));
}

Elements elements(const at::Tensor& t, const std::string& call, bool reduces) {
  if (auto type = chorus_type(t.scalar_type())) return {*type, static_cast<size_t>(t.numel())};
  if (reduces)
    unsupported(call, std::string("dtype ") + c10::toString(t.scalar_type()) +
                          " cannot be reduced; chorus reduces int8, uint8, int32, int64, "
                          "float16, bfloat16, float32 and float64");
  return {DataType::uint8, static_cast<size_t>(t.nbytes())};
}

ReduceOp chorus_op(const c10d::ReduceOp& op, const std::string& call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::prod;
    case c10d::ReduceOp::MIN:
      return ReduceOp::min;
    case c10d::ReduceOp::MAX:
      return ReduceOp::max;
    case c10d::ReduceOp::AVG:
      return ReduceOp::avg;
    case c10d::ReduceOp::BAND:
      return ReduceOp::band;
    case c10d::ReduceOp::BOR:
      return ReduceOp::bor;
    case c10d::ReduceOp::BXOR:
      return ReduceOp::bxor;
    case c10d::ReduceOp::PREMUL_SUM:
      unsupported(call,
                  "ReduceOp.PREMUL_SUM is not supported; chorus reduces with SUM, PRODUCT, MIN, "
                  "MAX, AVG, BAND, BOR and BXOR");
    case c10d::ReduceOp::UNUSED:
      break;
  }
  unsupported(call,
              "ReduceOp value " + std::to_string(static_cast<int>(op.op_)) + " is not supported");
}

CallOptions call_options(std::chrono::milliseconds timeout) {
  CallOptions o;
  // c10d's kUnsetTimeout (negative): the communicator's deadline. A zero
  // timeout is a deadline that passes at once, as in gloo; chorus's own
  // zero means "the default", so it becomes the shortest chorus deadline.
  if (timeout.count() > 0) o.timeout = timeout;
  if (timeout.count() == 0) o.timeout = std::chrono::milliseconds(1);
  return o;
}

Staged stage(const at::Tensor& t, Use use) {
  if (t.is_contiguous()) return {t, t};
  if (use == Use::write) return {t, at::empty(t.sizes(), t.options())};
  return {t, t.contiguous()};
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& call) {
  if (tensors.size() != 1)
    unsupported(call,
                "takes exactly one tensor per process, got " + std::to_string(tensors.size()));
  check_tensor(tensors[0], call);
  return tensors[0];
}

void check_like(const at::Tensor& t, const at::Tensor& ref, const std::string& call,
                const std::string& what, int64_t numel) {
  check_tensor(t, call);
  if (t.scalar_type() != ref.scalar_type())
    unsupported(call, what + " has dtype " + c10::toString(t.scalar_type()) + ", the input " +
                          c10::toString(ref.scalar_type()));
  if (t.numel() != numel)
    unsupported(call, what + " has " + std::to_string(t.numel()) + " elements, expected " +
                          std::to_string(numel));
}

at::Tensor as_one_buffer(const std::vector<at::Tensor>& list) {
  if (list.empty()) return {};
  const auto* base = static_cast<const std::byte*>(list[0].data_ptr());
  const size_t bytes = list[0].nbytes();
  for (size_t j = 0; j < list.size(); ++j)
    if (!list[j].is_contiguous() || list[j].data_ptr() != base + j * bytes) return {};
  return at::from_blob(list[0].data_ptr(), {static_cast<int64_t>(list.size() * list[0].numel())},
                       list[0].options());
}

}  // namespace chorus::torch_backend
