#include "core/check.h"

#include <chorus/types.h>

#include <array>

namespace chorus {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<TypeInfo, kDataTypeCount> kTypes{{
    {DataType::int8, "int8", 1},
    {DataType::uint8, "uint8", 1},
    {DataType::int32, "int32", 4},
    {DataType::uint32, "uint32", 4},
    {DataType::int64, "int64", 8},
    {DataType::uint64, "uint64", 8},
    {DataType::float16, "float16", 2},
    {DataType::bfloat16, "bfloat16", 2},
    {DataType::float32, "float32", 4},
    {DataType::float64, "float64", 8},
}};
constexpr std::array<std::string_view, kReduceOpCount> kOps{"sum", "prod", "min", "max",
                                                            "avg", "band", "bor", "bxor"};

}  // namespace

bool is_valid(DataType type) {
  const int v = static_cast<int>(type);
  return v >= 0 && v < kDataTypeCount;
}
bool is_valid(ReduceOp op) {
  const int v = static_cast<int>(op);
  return v >= 0 && v < kReduceOpCount;
}

bool is_integer(DataType type) {
  switch (type) {
    case DataType::int8:
    case DataType::uint8:
    case DataType::int32:
    case DataType::uint32:
    case DataType::int64:
    case DataType::uint64:
      return true;
    case DataType::float16:
    case DataType::bfloat16:
    case DataType::float32:
    case DataType::float64:
      return false;
  }
  return false;
}

bool applies(ReduceOp op, DataType type) {
  const bool bitwise = op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
  return !bitwise || is_integer(type);
}

size_t dtype_size(DataType type) {
  if (!is_valid(type))
    fail(ErrorCode::invalid_argument, "invalid DataType value ", static_cast<int>(type));
  return kTypes[static_cast<size_t>(type)].size;
}

std::string_view to_string(DataType type) {
  return is_valid(type) ? kTypes[static_cast<size_t>(type)].name : "invalid";
}
std::string_view to_string(ReduceOp op) {
  return is_valid(op) ? kOps[static_cast<size_t>(op)] : "invalid";
}

std::optional<DataType> parse_data_type(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.name == name) return t.type;
  return std::nullopt;
}
std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (size_t i = 0; i < kOps.size(); ++i)
    if (kOps[i] == name) return static_cast<ReduceOp>(i);
  return std::nullopt;
}

}  // namespace chorus
