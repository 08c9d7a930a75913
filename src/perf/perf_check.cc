#include "perf/perf_check.h"

#include "core/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace chorus::perf {
namespace {

bool reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

// The largest integer every partial sum must stay below to be exact in the
// type (float16 and bfloat16 hold integers exactly up to 2^11 and 2^8), and,
// for the integer types, below the wrap so that avg truncates a true sum.
double exact_limit(DataType t) {
  switch (t) {
    case DataType::int8:
      return 127;
    case DataType::uint8:
      return 255;
    case DataType::float16:
      return 2048;
    case DataType::bfloat16:
      return 256;
    default:
      return 1e6;
  }
}

// Sum inputs are (i + r) mod m with m chosen so that N (m-1) <= limit: any
// partial sum of any subset of ranks is then an exact integer in the type.
size_t sum_modulus(DataType t, int nranks) {
  constexpr size_t kMaxModulus = 61;  // prime: rows of ranks do not repeat in step
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

// prod inputs are 2 where (i + r) % 8 == 0, else 1: the product is 2^k with
// k = number of such ranks, at most ceil(N / 8), so exact up to N = 120 even
// in float16 (2^15); integers wrap consistently in any order.
constexpr size_t kProdPeriod = 8;

double input_value(const CheckCase& c, int rank, size_t i) {
  const auto r = static_cast<size_t>(rank);
  if (reduces(c.collective)) {
    switch (c.op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        return static_cast<double>((i + r) % sum_modulus(c.type, c.nranks));
      case ReduceOp::prod:
        return (i + r) % kProdPeriod == 0 ? 2 : 1;
      case ReduceOp::min:
      case ReduceOp::max:
        break;
    }
  }
  // Distinct per (rank, element) and exact in every type (< 101).
  return static_cast<double>((r * 37 + i * 11 + 5) % 101);
}

double reduced_value(const CheckCase& c, size_t i) {
  const auto n = static_cast<size_t>(c.nranks);
  switch (c.op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return residue_sum(i, n, sum_modulus(c.type, c.nranks));
    case ReduceOp::prod: {
      // Ranks r < n with (i + r) % 8 == 0: r = (8 - i % 8) % 8 + 8j.
      const size_t first = (kProdPeriod - i % kProdPeriod) % kProdPeriod;
      const size_t k = first < n ? (n - 1 - first) / kProdPeriod + 1 : 0;
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
  }
  return 0;
}

// Element type behind a DataType, with exact conversion from the small
// integers above (float16/bfloat16 stored as their 16-bit patterns).
template <DataType T>
struct Elem;
template <>
struct Elem<DataType::int8> {
  using type = int8_t;
};
template <>
struct Elem<DataType::uint8> {
  using type = uint8_t;
};
template <>
struct Elem<DataType::int32> {
  using type = int32_t;
};
template <>
struct Elem<DataType::uint32> {
  using type = uint32_t;
};
template <>
struct Elem<DataType::int64> {
  using type = int64_t;
};
template <>
struct Elem<DataType::uint64> {
  using type = uint64_t;
};
template <>
struct Elem<DataType::float16> {
  using type = uint16_t;
};
template <>
struct Elem<DataType::bfloat16> {
  using type = uint16_t;
};
template <>
struct Elem<DataType::float32> {
  using type = float;
};
template <>
struct Elem<DataType::float64> {
  using type = double;
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

// avg of the exact sum as chorus computes it: integers truncate; float16 and
// bfloat16 divide in float32, then round; float32 / float64 divide natively.
template <DataType T>
typename Elem<T>::type encode_avg(double sum, int n) {
  using E = typename Elem<T>::type;
  if constexpr (T == DataType::float16 || T == DataType::bfloat16 || T == DataType::float32)
    return encode<T>(static_cast<double>(static_cast<float>(sum) / static_cast<float>(n)));
  else if constexpr (T == DataType::float64)
    return sum / n;
  else
    return static_cast<E>(static_cast<int64_t>(sum) / n);
}

template <DataType T>
void fill_typed(const CheckCase& c, void* input) {
  using E = typename Elem<T>::type;
  CollectiveSpec spec{c.collective, c.nranks, c.rank, c.count, sizeof(E), c.root};
  const size_t n = buffer_counts(spec).input;
  auto* p = static_cast<E*>(input);
  for (size_t i = 0; i < n; ++i) p[i] = encode<T>(input_value(c, c.rank, i));
}

template <DataType T>
size_t wrong_typed(const CheckCase& c, const void* output) {
  using E = typename Elem<T>::type;
  const auto* p = static_cast<const E*>(output);
  const auto n = static_cast<size_t>(c.nranks);
  size_t wrong = 0;
  // Compared bit for bit: a NaN poison never equals an expected value.
  auto check = [&](size_t at, E want) { wrong += std::memcmp(&p[at], &want, sizeof(E)) != 0; };
  auto reduced = [&](size_t at, size_t index) {
    const double v = reduced_value(c, index);
    check(at, c.op == ReduceOp::avg ? encode_avg<T>(v, c.nranks) : encode<T>(v));
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
          check(j * c.count + i, encode<T>(input_value(c, static_cast<int>(j), i)));
      break;
    case Collective::broadcast:
      for (size_t i = 0; i < c.count; ++i) check(i, encode<T>(input_value(c, c.root, i)));
      break;
    case Collective::alltoall: {
      // Block j of the output is block `rank` of rank j's input.
      const size_t base = static_cast<size_t>(c.rank) * c.count;
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < c.count; ++i)
          check(j * c.count + i, encode<T>(input_value(c, static_cast<int>(j), base + i)));
      break;
    }
    case Collective::barrier:
      break;
  }
  return wrong;
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

void poison(DataType type, void* data, size_t count) {
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
