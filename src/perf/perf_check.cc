#include "perf/perf_check.h"

#include "core/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace chorus::perf {
namespace {

// The largest integer every partial sum of a float type must stay below to be
// exact (float16 and bfloat16 hold integers exactly up to 2^11 and 2^8).
// Integer types wrap, and a wrapped sum is exact in any order.
double exact_limit(DataType t) {
  switch (t) {
    case DataType::float16:
      return 2048;
    case DataType::bfloat16:
      return 256;
    default:
      return 1e6;
  }
}

// Sum inputs are (i + r) mod m with m prime where it can be (rows of ranks do
// not repeat in step) and, for the float types, N (m-1) <= limit: any partial
// sum of any subset of ranks is then an exact integer in the type.
size_t sum_modulus(DataType t, int nranks) {
  constexpr size_t kMaxModulus = 61;
  if (is_integer(t)) return kMaxModulus;
  const auto limit = static_cast<size_t>(exact_limit(t));
  return std::clamp<size_t>(limit / static_cast<size_t>(nranks) + 1, 1, kMaxModulus);
}

// Sum over r = 0..n-1 of (i + r) mod m, in O(1): q full cycles of 0..m-1, then
// `rem` consecutive residues starting at s = (i + q m) mod m = i mod m.
double residue_sum(size_t i, size_t n, size_t m) {
  const size_t q = n / m;
  const size_t rem = n % m;
  const size_t s = i % m;
  auto run = [](size_t from, size_t len) {  // from + (from+1) + ... (len terms)
    return static_cast<double>(len * from + len * (len - 1) / 2);
  };
  double total = static_cast<double>(q) * static_cast<double>(m * (m - 1) / 2);
  if (s + rem <= m) {
    total += run(s, rem);
  } else {
    total += run(s, m - s) + run(0, rem - (m - s));
  }
  return total;
}

// prod inputs are 2 where (i + r) % P == 0, else 1: the product is 2^k with k
// the number of such ranks, at most ceil(N / P). P = 4 up to N = 60, and
// wider beyond so that k <= 15: 2^k is exact in every float type (float16
// included); integers wrap consistently in any order.
size_t prod_period(int nranks) {
  constexpr size_t kMinPeriod = 4;
  constexpr size_t kMaxExponent = 15;
  const auto n = static_cast<size_t>(nranks);
  return std::max(kMinPeriod, (n + kMaxExponent - 1) / kMaxExponent);
}

}  // namespace

double input_value(const CheckCase& c, int rank, size_t i) {
  const auto r = static_cast<size_t>(rank);
  if (reduces(c.collective)) {
    switch (c.op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        return static_cast<double>((i + r) % sum_modulus(c.type, c.nranks));
      case ReduceOp::prod:
        return (i + r) % prod_period(c.nranks) == 0 ? 2 : 1;
      case ReduceOp::min:
      case ReduceOp::max:
      case ReduceOp::band:
      case ReduceOp::bor:
      case ReduceOp::bxor:
        break;
    }
  }
  // Distinct per (rank, element) and exact in every type (< 101).
  return static_cast<double>((r * 37 + i * 11 + 5) % 101);
}

namespace {

// The exact reduction over all ranks of element i (for sum and avg the sum).
double reduced_value(const CheckCase& c, size_t i) {
  const auto n = static_cast<size_t>(c.nranks);
  switch (c.op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return residue_sum(i, n, sum_modulus(c.type, c.nranks));
    case ReduceOp::prod: {
      // Ranks r < n with (i + r) % P == 0: r = (P - i % P) % P + P j.
      const size_t period = prod_period(c.nranks);
      const size_t first = (period - i % period) % period;
      const size_t k = first < n ? (n - 1 - first) / period + 1 : 0;
      return std::ldexp(1.0, static_cast<int>(k));
    }
    case ReduceOp::min:
    case ReduceOp::max: {
      double best = input_value(c, 0, i);
      for (int r = 1; r < c.nranks; ++r) {
        const double v = input_value(c, r, i);
        best = c.op == ReduceOp::min ? std::min(best, v) : std::max(best, v);
      }
      return best;
    }
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor: {
      // The inputs are integers below 101: their bits combine in 7 bits.
      auto bits = static_cast<unsigned>(input_value(c, 0, i));
      for (int r = 1; r < c.nranks; ++r) {
        const auto v = static_cast<unsigned>(input_value(c, r, i));
        bits = c.op == ReduceOp::band ? bits & v : c.op == ReduceOp::bor ? bits | v : bits ^ v;
      }
      return bits;
    }
  }
  return 0;
}

// Element type behind a DataType, with exact conversion from the small
// integers above (float16/bfloat16 stored as their 16-bit patterns).
template <DataType T>
auto elem_tag() {
  if constexpr (T == DataType::int8)
    return int8_t{};
  else if constexpr (T == DataType::uint8)
    return uint8_t{};
  else if constexpr (T == DataType::int32)
    return int32_t{};
  else if constexpr (T == DataType::uint32)
    return uint32_t{};
  else if constexpr (T == DataType::int64)
    return int64_t{};
  else if constexpr (T == DataType::uint64)
    return uint64_t{};
  else if constexpr (T == DataType::float16 || T == DataType::bfloat16)
    return uint16_t{};
  else if constexpr (T == DataType::float32)
    return float{};
  else
    return double{};
}
template <DataType T>
struct Elem {
  using type = decltype(elem_tag<T>());
};

template <DataType T>
typename Elem<T>::type encode(double v) {
  using E = typename Elem<T>::type;
  if constexpr (T == DataType::float16)
    return float_to_half(static_cast<float>(v));
  else if constexpr (T == DataType::bfloat16)
    return float_to_bfloat16(static_cast<float>(v));
  else if constexpr (std::is_floating_point_v<E>)
    return static_cast<E>(v);
  else
    return static_cast<E>(static_cast<int64_t>(v));  // modular, as chorus wraps
}

// avg of the exact sum as chorus computes it: integers sum in the type (so
// the sum wraps first), then truncate; float16 and bfloat16 divide in float32,
// then round; float32 / float64 divide natively.
template <DataType T>
typename Elem<T>::type encode_avg(double sum, int n) {
  using E = typename Elem<T>::type;
  if constexpr (T == DataType::float16 || T == DataType::bfloat16 || T == DataType::float32) {
    return encode<T>(static_cast<double>(static_cast<float>(sum) / static_cast<float>(n)));
  } else if constexpr (T == DataType::float64) {
    return sum / n;
  } else {
    const E wrapped = encode<T>(sum);
    if constexpr (std::is_signed_v<E>)
      return static_cast<E>(static_cast<int64_t>(wrapped) / n);
    else
      return static_cast<E>(static_cast<uint64_t>(wrapped) / static_cast<uint64_t>(n));
  }
}

template <DataType T>
void fill_typed(const CheckCase& c, void* input) {
  using E = typename Elem<T>::type;
  CollectiveSpec spec{c.collective, c.nranks, c.rank, c.count, sizeof(E), c.root};
  const size_t n = buffer_counts(spec).input;
  auto* p = static_cast<E*>(input);
  for (size_t i = 0; i < n; ++i) p[i] = encode<T>(input_value(c, c.rank, i));
}

// Calls emit(at, want) for every element of this rank's output: `want` is
// the exact value element `at` must hold, in the type's representation.
template <DataType T, typename Emit>
void for_each_expected(const CheckCase& c, Emit&& emit) {
  const auto n = static_cast<size_t>(c.nranks);
  auto reduced = [&](size_t at, size_t index) {
    const double v = reduced_value(c, index);
    emit(at, c.op == ReduceOp::avg ? encode_avg<T>(v, c.nranks) : encode<T>(v));
  };
  switch (c.collective) {
    case Collective::allreduce:
      for (size_t i = 0; i < c.count; ++i) reduced(i, i);
      break;
    case Collective::reduce:
      if (c.rank == c.root)
        for (size_t i = 0; i < c.count; ++i) reduced(i, i);
      break;
    case Collective::reduce_scatter: {
      const size_t base = static_cast<size_t>(c.rank) * c.count;
      for (size_t i = 0; i < c.count; ++i) reduced(i, base + i);
      break;
    }
    case Collective::allgather:
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < c.count; ++i)
          emit(j * c.count + i, encode<T>(input_value(c, static_cast<int>(j), i)));
      break;
    case Collective::broadcast:
      for (size_t i = 0; i < c.count; ++i) emit(i, encode<T>(input_value(c, c.root, i)));
      break;
    case Collective::alltoall: {
      // Block j of the output is block `rank` of rank j's input.
      const size_t base = static_cast<size_t>(c.rank) * c.count;
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < c.count; ++i)
          emit(j * c.count + i, encode<T>(input_value(c, static_cast<int>(j), base + i)));
      break;
    }
    case Collective::gather:
      if (c.rank == c.root)
        for (size_t j = 0; j < n; ++j)
          for (size_t i = 0; i < c.count; ++i)
            emit(j * c.count + i, encode<T>(input_value(c, static_cast<int>(j), i)));
      break;
    case Collective::scatter: {
      // Block `rank` of the root's input.
      const size_t base = static_cast<size_t>(c.rank) * c.count;
      for (size_t i = 0; i < c.count; ++i) emit(i, encode<T>(input_value(c, c.root, base + i)));
      break;
    }
    case Collective::barrier:
      break;
  }
}

template <DataType T>
size_t wrong_typed(const CheckCase& c, const void* output) {
  using E = typename Elem<T>::type;
  const auto* p = static_cast<const E*>(output);
  size_t wrong = 0;
  // Compared bit for bit: a NaN poison never equals an expected value.
  for_each_expected<T>(
      c, [&](size_t at, E want) { wrong += std::memcmp(&p[at], &want, sizeof(E)) != 0; });
  return wrong;
}

template <DataType T>
std::vector<std::byte> expected_typed(const CheckCase& c) {
  using E = typename Elem<T>::type;
  std::vector<std::byte> out;
  if (!uses_output(c.collective, c.rank, c.root)) return out;
  CollectiveSpec spec{c.collective, c.nranks, c.rank, c.count, sizeof(E), c.root};
  out.resize(buffer_counts(spec).output * sizeof(E));
  for_each_expected<T>(
      c, [&](size_t at, E want) { std::memcpy(out.data() + at * sizeof(E), &want, sizeof(E)); });
  return out;
}

template <template <DataType> class F, typename... Args>
auto dispatch(DataType t, Args&&... args) {
  switch (t) {
    case DataType::int8:
      return F<DataType::int8>{}(args...);
    case DataType::uint8:
      return F<DataType::uint8>{}(args...);
    case DataType::int32:
      return F<DataType::int32>{}(args...);
    case DataType::uint32:
      return F<DataType::uint32>{}(args...);
    case DataType::int64:
      return F<DataType::int64>{}(args...);
    case DataType::uint64:
      return F<DataType::uint64>{}(args...);
    case DataType::float16:
      return F<DataType::float16>{}(args...);
    case DataType::bfloat16:
      return F<DataType::bfloat16>{}(args...);
    case DataType::float32:
      return F<DataType::float32>{}(args...);
    case DataType::float64:
      return F<DataType::float64>{}(args...);
  }
  return F<DataType::uint8>{}(args...);
}

template <DataType T>
struct Fill {
  void operator()(const CheckCase& c, void* input) const { fill_typed<T>(c, input); }
};
template <DataType T>
struct Expected {
  std::vector<std::byte> operator()(const CheckCase& c) const { return expected_typed<T>(c); }
};
template <DataType T>
struct Wrong {
  size_t operator()(const CheckCase& c, const void* output) const {
    return wrong_typed<T>(c, output);
  }
};

}  // namespace

void fill_input(const CheckCase& c, void* input) {
  dispatch<Fill>(c.type, c, input);
}

size_t count_wrong(const CheckCase& c, const void* output) {
  return dispatch<Wrong>(c.type, c, output);
}

std::vector<std::byte> expected_output(const CheckCase& c) {
  return dispatch<Expected>(c.type, c);
}

void poison(DataType type, void* data, size_t count) {
  if (count == 0) return;  // data may be null then (memset must not see it)
  switch (type) {
    case DataType::float32: {
      auto* p = static_cast<float*>(data);
      std::fill(p, p + count, std::numeric_limits<float>::quiet_NaN());
      return;
    }
    case DataType::float64: {
      auto* p = static_cast<double*>(data);
      std::fill(p, p + count, std::numeric_limits<double>::quiet_NaN());
      return;
    }
    case DataType::float16:
    case DataType::bfloat16: {
      auto* p = static_cast<uint16_t*>(data);
      std::fill(p, p + count, uint16_t{0x7FFF});  // a NaN in both formats
      return;
    }
    default:
      std::memset(data, 0xA5, count * dtype_size(type));
  }
}

}  // namespace chorus::perf
