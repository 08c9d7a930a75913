// Basic vocabulary of the chorus API: the collectives, element types, reduction
// operators and the per-call options every call accepts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace chorus {

// The collectives. A call's `count` means, per collective:
//   allreduce, broadcast, reduce: elements per rank
//   allgather:                    elements each rank contributes (send count)
//   reduce_scatter:               elements each rank receives (recv count)
//   alltoall:                     elements per (sender, receiver) block
//   barrier:                      ignored
//   gather:                       elements each rank sends (the root
//                                 receives N blocks of count)
//   scatter:                      elements each rank receives (the root
//                                 sends N blocks of count)
enum class Collective : int {
  allreduce,
  allgather,
  reduce_scatter,
  broadcast,
  reduce,
  alltoall,
  barrier,
  gather,
  scatter,
};
inline constexpr int kCollectiveCount = 9;

// Element type of a buffer. float16 is IEEE 754 binary16, bfloat16 is the top 16
// bits of a binary32; both reduce through float32 with round-to-nearest-even.
enum class DataType : int {
  int8,
  uint8,
  int32,
  uint32,
  int64,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
};
inline constexpr int kDataTypeCount = 10;

// Reduction operator. avg is sum followed by division by the number of ranks
// (integer types truncate toward zero). min and max of floating types are
// IEEE 754-2019's minimum and maximum: a NaN operand gives NaN, and -0 is
// less than +0, so that they do not depend on the order of the ranks.
// band, bor and bxor are the bitwise and, or and exclusive or, on the
// integer types only (applies()).
enum class ReduceOp : int { sum, prod, min, max, avg, band, bor, bxor };
inline constexpr int kReduceOpCount = 8;

// Size in bytes of one element; throws Error(invalid_argument) for a value
// outside the enum.
size_t dtype_size(DataType type);
bool is_valid(Collective c);
bool is_valid(DataType type);
bool is_valid(ReduceOp op);
// An integer type: int8 to uint64.
bool is_integer(DataType type);
// Whether `op` is defined on `type`: band, bor and bxor on the integer types
// only, every other operator on every type. A reducing call with an operator
// that does not apply to its type is an Error(invalid_argument).
bool applies(ReduceOp op, DataType type);

// Names as the CLI and the environment spell them ("allreduce", "float32", "sum").
std::string_view to_string(Collective c);
std::string_view to_string(DataType type);
std::string_view to_string(ReduceOp op);
std::optional<Collective> parse_collective(std::string_view name);
std::optional<DataType> parse_data_type(std::string_view name);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

// Options of one collective call.
struct CallOptions {
  // Algorithm name as the registry spells it ("ring", "halving_doubling", ...);
  // empty lets chorus choose. An unknown name is an invalid_argument error.
  std::string algorithm;
  // Deadline for the whole call; 0 means the communicator's default
  // (CHORUS_TIMEOUT, 300 s unless set).
  std::chrono::milliseconds timeout{0};
  // Point-to-point only: a send and the receive it meets must carry the same
  // tag (>= 0), or both raise ErrorCode::mismatch. Tags check, they do not
  // reorder: the k-th send from a to b still meets the k-th receive at b.
  int tag = 0;
  // AllReduce, ReduceScatter and Reduce with sum or avg on float16, bfloat16,
  // float32 and float64: results bitwise identical whatever the algorithm,
  // transport, buffer kind, message size and chunking, number of ranks (ranks
  // that add zeros) and rank order. Each element is summed exactly as an
  // integer on a fixed point of its block of 64 elements and rounded once
  // (docs/ALGORITHMS.md, "Deterministic reductions", has the method and the
  // error bound). Costs an exchange of block exponents and wider elements;
  // CHORUS_DETERMINISTIC=1 sets it for every call. Every rank of a call must
  // agree, or the call raises ErrorCode::mismatch. Integer types and min and
  // max are order independent already and keep their path; prod on a
  // floating type raises invalid_argument. An asynchronous deterministic call
  // runs to completion before it returns its Work.
  bool deterministic = false;
};

}  // namespace chorus
