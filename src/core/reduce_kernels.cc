// Reduction kernels. Each (type, op) pair is one plain loop that the compiler
// vectorizes; the loops are instantiated twice, for the baseline ISA and for
// AVX2+F16C, and the wider one is picked at run time when the CPU has it (F16C
// turns float16 conversion into one instruction per 8 elements).
#include "core/reduce_kernels.h"

#include "core/check.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace chorus {
namespace {

// Wrapping arithmetic for integers (signed overflow would be undefined).
template <typename T>
using Wide = std::conditional_t<std::is_signed_v<T>, std::make_unsigned_t<T>, T>;

struct Sum {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(
          static_cast<Wide<T>>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b)));
    else
      return a + b;
  }
};
struct Prod {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // Multiply in at least unsigned int width so that uint8 * uint8 does not
      // promote to signed int and overflow.
      using U = std::common_type_t<Wide<T>, unsigned>;
      return static_cast<T>(static_cast<Wide<T>>(static_cast<U>(static_cast<Wide<T>>(a)) *
                                                 static_cast<U>(static_cast<Wide<T>>(b))));
    } else {
      return a * b;
    }
  }
};
// min and max of floats as IEEE 754-2019's minimum and maximum: a NaN in
// either operand gives the quiet NaN, and -0 is less than +0. Both are then
// commutative and associative, so a reduction gives the same bits in any
// order of the ranks (what deterministic calls rely on for min and max).
template <typename T>
[[gnu::always_inline]] inline T ordered(T pick, T a, T b, bool minimum) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U ua = std::bit_cast<U>(a);
  const U ub = std::bit_cast<U>(b);
  // Equal values differ only in the sign of a zero: min takes -0, max +0.
  T r = a == b ? std::bit_cast<T>(minimum ? (ua | ub) : (ua & ub)) : pick;
  return (a != a || b != b) ? std::numeric_limits<T>::quiet_NaN() : r;
}
struct Min {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      return ordered(b < a ? b : a, a, b, true);
    else
      return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      return ordered(a < b ? b : a, a, b, false);
    else
      return a < b ? b : a;
  }
};

// float16 <-> float32 through the compiler's _Float16 type: with F16C these are
// vcvtph2ps / vcvtps2ph; otherwise the runtime's correctly rounded routines.
inline float h2f(uint16_t h) {
  return static_cast<float>(std::bit_cast<_Float16>(h));
}
inline uint16_t f2h(float f) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(f));
}

inline float b2f(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}
inline uint16_t f2b(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                    // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

template <typename T, typename Op>
[[gnu::always_inline]] inline void loop(void* dst, const void* a, const void* b, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = Op::template apply<T>(x[i], y[i]);
}

template <bool kBfloat, typename Op>
[[gnu::always_inline]] inline void loop16(void* dst, const void* a, const void* b, size_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (kBfloat)
      d[i] = f2b(Op::template apply<float>(b2f(x[i]), b2f(y[i])));
    else
      d[i] = f2h(Op::template apply<float>(h2f(x[i]), h2f(y[i])));
  }
}

using Kernel = void (*)(void*, const void*, const void*, size_t);

template <typename Op>
[[gnu::always_inline]] inline void dispatch(DataType t, void* d, const void* a, const void* b,
                                            size_t n) {
  switch (t) {
    case DataType::int8:
      return loop<int8_t, Op>(d, a, b, n);
    case DataType::uint8:
      return loop<uint8_t, Op>(d, a, b, n);
    case DataType::int32:
      return loop<int32_t, Op>(d, a, b, n);
    case DataType::uint32:
      return loop<uint32_t, Op>(d, a, b, n);
    case DataType::int64:
      return loop<int64_t, Op>(d, a, b, n);
    case DataType::uint64:
      return loop<uint64_t, Op>(d, a, b, n);
    case DataType::float16:
      return loop16<false, Op>(d, a, b, n);
    case DataType::bfloat16:
      return loop16<true, Op>(d, a, b, n);
    case DataType::float32:
      return loop<float, Op>(d, a, b, n);
    case DataType::float64:
      return loop<double, Op>(d, a, b, n);
  }
}

// band, bor and bxor act on each bit alone, so the element width does not
// matter: the bytes of the integer buffer are combined as they lie.
template <typename F>
[[gnu::always_inline]] inline void bitwise(DataType t, void* dst, const void* a, const void* b,
                                           size_t n, F f) {
  const size_t bytes = n * dtype_size(t);
  auto* d = static_cast<uint8_t*>(dst);
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < bytes; ++i) d[i] = f(x[i], y[i]);
}

[[gnu::always_inline]] inline void reduce_any(DataType t, ReduceOp op, void* d, const void* a,
                                              const void* b, size_t n) {
  switch (op) {
    case ReduceOp::band:
      return bitwise(t, d, a, b, n, [](uint8_t x, uint8_t y) -> uint8_t { return x & y; });
    case ReduceOp::bor:
      return bitwise(t, d, a, b, n, [](uint8_t x, uint8_t y) -> uint8_t { return x | y; });
    case ReduceOp::bxor:
      return bitwise(t, d, a, b, n, [](uint8_t x, uint8_t y) -> uint8_t { return x ^ y; });
    case ReduceOp::sum:
    case ReduceOp::avg:
      return dispatch<Sum>(t, d, a, b, n);
    case ReduceOp::prod:
      return dispatch<Prod>(t, d, a, b, n);
    case ReduceOp::min:
      return dispatch<Min>(t, d, a, b, n);
    case ReduceOp::max:
      return dispatch<Max>(t, d, a, b, n);
  }
}

void reduce_baseline(DataType t, ReduceOp op, void* d, const void* a, const void* b, size_t n) {
  reduce_any(t, op, d, a, b, n);
}

#if defined(__x86_64__)
// float16 with F16C: 8 lanes converted per instruction, combined in float32,
// rounded back to nearest even (imm 0 = round to nearest); the scalar tail
// goes through the same conversion as the baseline.
template <typename Op>
[[gnu::target("avx2,f16c,fma")]] void half_f16c(void* dst, const void* a, const void* b, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 fx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 fy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    __m256 r;
    if constexpr (std::is_same_v<Op, Sum>)
      r = _mm256_add_ps(fx, fy);
    else if constexpr (std::is_same_v<Op, Prod>)
      r = _mm256_mul_ps(fx, fy);
    // As the scalar Min/Max: a NaN gives the quiet NaN, -0 < +0.
    else {
      const bool minimum = std::is_same_v<Op, Min>;
      r = minimum ? _mm256_min_ps(fy, fx) : _mm256_max_ps(fy, fx);
      const __m256 equal = _mm256_cmp_ps(fx, fy, _CMP_EQ_OQ);
      const __m256 zeros = minimum ? _mm256_or_ps(fx, fy) : _mm256_and_ps(fx, fy);
      r = _mm256_blendv_ps(r, zeros, equal);
      const __m256 nan = _mm256_cmp_ps(fx, fy, _CMP_UNORD_Q);
      r = _mm256_blendv_ps(r, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()), nan);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(r, 0));
  }
  for (; i < n; ++i) d[i] = f2h(Op::template apply<float>(h2f(x[i]), h2f(y[i])));
}

[[gnu::target("avx2,f16c,fma")]] void reduce_avx2(DataType t, ReduceOp op, void* d, const void* a,
                                                  const void* b, size_t n) {
  if (t == DataType::float16) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        return half_f16c<Sum>(d, a, b, n);
      case ReduceOp::prod:
        return half_f16c<Prod>(d, a, b, n);
      case ReduceOp::min:
        return half_f16c<Min>(d, a, b, n);
      case ReduceOp::max:
        return half_f16c<Max>(d, a, b, n);
      case ReduceOp::band:
      case ReduceOp::bor:
      case ReduceOp::bxor:
        break;  // integer types only (applies())
    }
  }
  reduce_any(t, op, d, a, b, n);
}
#endif

using ReduceFn = void (*)(DataType, ReduceOp, void*, const void*, const void*, size_t);

ReduceFn pick_reduce() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return reduce_avx2;
#endif
  return reduce_baseline;
}

template <typename T>
void divide_loop(void* dst, size_t n, size_t by) {
  T* d = static_cast<T*>(dst);
  // Integers divide in 64 bits so that a rank count beyond the type's range
  // (int8 with 200 ranks) still divides correctly.
  using W = std::conditional_t<std::is_floating_point_v<T>, T,
                               std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  const W div = static_cast<W>(by);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<W>(d[i]) / div);
}

}  // namespace

void reduce_into(DataType type, ReduceOp op, void* dst, const void* a, const void* b,
                 size_t count) {
  // Chosen once; a function pointer to immutable code, not mutable state.
  static const ReduceFn fn = pick_reduce();
  fn(type, op, dst, a, b, count);
}

void reduce_into(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count,
                 WriteMode store) {
  const size_t elem = dtype_size(type);
  // Pieces small enough to stay in L1 between the reduction and the stream.
  constexpr size_t kPiece = 4096;
  if (store == WriteMode::cached || count * elem < 2 * kPiece) {
    reduce_into(type, op, dst, a, b, count);
    return;
  }
  alignas(64) std::byte piece[kPiece];
  const size_t per = kPiece / elem;
  auto* d = static_cast<std::byte*>(dst);
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  for (size_t i = 0; i < count; i += per) {
    const size_t n = std::min(per, count - i);
    const size_t off = i * elem;
    reduce_into(type, op, piece, x + off, y + off, n);
    detail::stream_bytes(d + off, piece, n * elem);
  }
  detail::store_fence();
}

void divide_by(DataType type, void* dst, size_t count, size_t n) {
  switch (type) {
    case DataType::int8:
      return divide_loop<int8_t>(dst, count, n);
    case DataType::uint8:
      return divide_loop<uint8_t>(dst, count, n);
    case DataType::int32:
      return divide_loop<int32_t>(dst, count, n);
    case DataType::uint32:
      return divide_loop<uint32_t>(dst, count, n);
    case DataType::int64:
      return divide_loop<int64_t>(dst, count, n);
    case DataType::uint64:
      return divide_loop<uint64_t>(dst, count, n);
    case DataType::float32:
      return divide_loop<float>(dst, count, n);
    case DataType::float64:
      return divide_loop<double>(dst, count, n);
    case DataType::float16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f2h(h2f(d[i]) / static_cast<float>(n));
      return;
    }
    case DataType::bfloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f2b(b2f(d[i]) / static_cast<float>(n));
      return;
    }
  }
  fail(ErrorCode::invalid_argument, "invalid DataType value ", static_cast<int>(type));
}

float half_to_float(uint16_t h) {
  return h2f(h);
}
uint16_t float_to_half(float f) {
  return f2h(f);
}
float bfloat16_to_float(uint16_t b) {
  return b2f(b);
}
uint16_t float_to_bfloat16(float f) {
  return f2b(f);
}

}  // namespace chorus
