// Fixed forms and the one rounding back (core/exact_sum.h).
//
// float32 and bfloat16 take the fast road through doubles: a float32 times a
// power of two is exact in a double, and adding 1.5 * 2^52 rounds it to an
// integer (ties to even) in the low bits, which is the fixed form. Back, an
// integer sum below 2^51 is exact in a double, a power of two scales it
// exactly, and the one conversion to float32 rounds it once. Sums of 2^51 and
// more (dozens of ranks near an element's largest contribution), avg and the other
// types go through round_to_format, which works on the integers alone. The
// loops are built twice, for the baseline ISA and for AVX2, as the reduction
// kernels are.
#include "core/exact_sum.h"

#include "core/check.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace chorus::exact {
namespace {

using u128 = UInt128;

// float32 and bfloat16: q = x * 2^(kShift32 - E) for the element's biased
// exponent E, so that the element's largest contribution, below 2^(E - 126), gives
// |q| < 2^46 (kFraction32).
constexpr int kFraction32 = 46;
constexpr int kShift32 = 126 + kFraction32;  // 172
// float64: q = x * 2^(kShift64 - E) < 2^92, E = 8 * code + 7 (exponent64), in
// lanes of kLane64 bits.
constexpr int kFraction64 = 92;
constexpr int kShift64 = 1022 + kFraction64;  // 1114
constexpr int kLane64 = 46;
// float16: q = x * 2^24, exact for every finite float16 (below 2^16).
constexpr int kShift16 = 24;

// Adding it to a double below 2^51 in magnitude leaves round(x) in the low
// bits of the sum's representation.
constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
const uint64_t kMagicBits = std::bit_cast<uint64_t>(kMagic);

// Special counts: one field of 21 bits each, so that kMaxRanks fit.
constexpr int kCountBits = 21;
constexpr int64_t kPosInf = 1;
constexpr int64_t kNegInf = int64_t{1} << kCountBits;
constexpr int64_t kNaN = int64_t{1} << (2 * kCountBits);
constexpr int64_t kCountMask = (int64_t{1} << kCountBits) - 1;

int bit_length(u128 v) {
  const uint64_t hi = static_cast<uint64_t>(v >> 64);
  if (hi != 0) return 128 - std::countl_zero(hi);
  const uint64_t lo = static_cast<uint64_t>(v);
  return lo == 0 ? 0 : 64 - std::countl_zero(lo);
}

struct Format {
  int mantissa;
  int exponent;
};
constexpr Format kHalfFormat{10, 5};
constexpr Format kBfloatFormat{7, 8};
constexpr Format kSingleFormat{23, 8};
constexpr Format kDoubleFormat{52, 11};

uint64_t quiet_nan(Format f) {
  return ((uint64_t{1} << f.exponent) - 1) << f.mantissa | uint64_t{1} << (f.mantissa - 1);
}
uint64_t infinity(Format f, bool negative) {
  const uint64_t sign = negative ? uint64_t{1} << (f.mantissa + f.exponent) : 0;
  return sign | ((uint64_t{1} << f.exponent) - 1) << f.mantissa;
}

// The result that summed special counts force, if any.
bool special_result(int64_t counts, Format f, uint64_t* bits) {
  if (counts == 0) return false;
  const bool pos = (counts & kCountMask) != 0;
  const bool neg = ((counts >> kCountBits) & kCountMask) != 0;
  const bool nan = (counts >> (2 * kCountBits)) != 0;
  if (nan || (pos && neg))
    *bits = quiet_nan(f);
  else
    *bits = infinity(f, neg);
  return true;
}

// ---- float32 / bfloat16, the fast road ----------------------------------

// The bits of element j as a float32's (bfloat16: its top half).
template <bool kBfloat>
[[gnu::always_inline]] inline uint32_t bits32(const void* x, size_t j) {
  if constexpr (kBfloat)
    return static_cast<uint32_t>(static_cast<const uint16_t*>(x)[j]) << 16;
  else
    return static_cast<const uint32_t*>(x)[j];
}

// 2^e for e within the normal doubles, from its bits, so that the loops
// around it vectorize.
[[gnu::always_inline]] inline double pow2_bits(int e) {
  return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52);
}

// The exponent an element's scale code stands for: 1 for zeros and
// subnormals (code 0), as a subnormal's grid is the smallest normal one.
[[gnu::always_inline]] inline int exponent32(uint8_t code) {
  return code > 1 ? code : 1;
}

// Scale codes: the exponent field, 0 for an infinity or a NaN (which sets
// *special instead).
template <bool kBfloat>
[[gnu::always_inline]] inline void scales32(const void* x, size_t count, uint8_t* scales,
                                            bool* special) {
  uint32_t any_special = 0;
  for (size_t j = 0; j < count; ++j) {
    const uint32_t field = (bits32<kBfloat>(x, j) >> 23) & 0xffu;
    const uint32_t flagged = field == 0xffu ? 1u : 0u;
    any_special |= flagged;
    const uint32_t code = flagged != 0 ? 0u : field;
    const uint32_t had = scales[j];
    scales[j] = static_cast<uint8_t>(had > code ? had : code);
  }
  if (any_special != 0) *special = true;
}

// q = round(v * mult) for |v * mult| < 2^51; with kSpecials, 0 for an
// infinity or a NaN (without, the caller knows there are none).
template <bool kSpecials>
[[gnu::always_inline]] inline uint64_t fixed_of(uint32_t u, double mult) {
  const double t = static_cast<double>(std::bit_cast<float>(u)) * mult;
  const uint64_t q = std::bit_cast<uint64_t>(t + kMagic) - kMagicBits;
  if constexpr (!kSpecials) return q;
  const uint64_t keep = (u & 0x7f800000u) != 0x7f800000u ? ~uint64_t{0} : 0;
  return q & keep;
}

template <bool kBfloat, bool kSpecials, bool kAccumulate>
[[gnu::always_inline]] inline void fixed32_loop(const void* x, size_t count, const uint8_t* scales,
                                                int64_t* out) {
  for (size_t j = 0; j < count; ++j) {
    const double mult = pow2_bits(kShift32 - exponent32(scales[j]));
    const uint64_t q = fixed_of<kSpecials>(bits32<kBfloat>(x, j), mult);
    out[j] = static_cast<int64_t>(kAccumulate ? static_cast<uint64_t>(out[j]) + q : q);
  }
}

template <bool kBfloat>
[[gnu::always_inline]] inline void fixed32(const void* x, size_t count, const uint8_t* scales,
                                           int64_t* out, bool accumulate, bool specials) {
  if (specials) {
    if (accumulate) return fixed32_loop<kBfloat, true, true>(x, count, scales, out);
    return fixed32_loop<kBfloat, true, false>(x, count, scales, out);
  }
  if (accumulate) return fixed32_loop<kBfloat, false, true>(x, count, scales, out);
  fixed32_loop<kBfloat, false, false>(x, count, scales, out);
}

// Nonzero unless s lies in (-2^51, 2^51), where a double holds it.
[[gnu::always_inline]] inline uint64_t beyond_doubles(int64_t s) {
  return (static_cast<uint64_t>(s) + (uint64_t{1} << 51)) >> 52;
}

[[gnu::always_inline]] inline double exact_double(int64_t s) {
  return std::bit_cast<double>(static_cast<uint64_t>(s) + kMagicBits) - kMagic;
}

// The float32 nearest to d that keeps d's inexactness in its last bit
// (rounding to odd), so that rounding it again to bfloat16 rounds d once.
[[gnu::always_inline]] inline uint32_t float_round_to_odd(double d) {
  const float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  const auto inexact = static_cast<uint32_t>(back != d);
  const auto beyond = static_cast<uint32_t>(std::abs(back) > std::abs(d));
  return (std::bit_cast<uint32_t>(f) - (beyond & inexact)) | inexact;
}

// float32 bits to bfloat16, to nearest, ties to even: reduce_kernels'
// float_to_bfloat16 without its NaN case (no NaN reaches it here), inline so
// that the loops around it vectorize.
[[gnu::always_inline]] inline uint16_t bf16_nearest(uint32_t u) {
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// An exact value in a double, rounded once to the element type.
template <bool kBfloat>
[[gnu::always_inline]] inline void store_rounded(void* out, size_t j, double v) {
  if constexpr (kBfloat)
    static_cast<uint16_t*>(out)[j] = bf16_nearest(float_round_to_odd(v));
  else
    static_cast<float*>(out)[j] = static_cast<float>(v);
}

// from_fixed for float32 and bfloat16, divisor 1, no specials: sums that a
// double holds take the fast road, the others (rare: dozens of ranks near
// the largest values) round_to_format, chunk by chunk.
template <bool kBfloat>
[[gnu::always_inline]] inline void back32(const int64_t* sums, size_t count, const uint8_t* scales,
                                          void* out) {
  const Format f = kBfloat ? kBfloatFormat : kSingleFormat;
  constexpr size_t kChunk = 256;
  for (size_t i = 0; i < count; i += kChunk) {
    const size_t end = std::min(count, i + kChunk);
    uint64_t beyond = 0;
    for (size_t j = i; j < end; ++j) {
      beyond |= beyond_doubles(sums[j]);
      store_rounded<kBfloat>(out, j,
                             exact_double(sums[j]) * pow2_bits(exponent32(scales[j]) - kShift32));
    }
    if (beyond == 0) continue;
    for (size_t j = i; j < end; ++j) {
      if (beyond_doubles(sums[j]) == 0) continue;
      const uint64_t bits =
          round_to_format(sums[j], exponent32(scales[j]) - kShift32, 1, f.mantissa, f.exponent);
      if constexpr (kBfloat)
        static_cast<uint16_t*>(out)[j] = static_cast<uint16_t>(bits);
      else
        static_cast<uint32_t*>(out)[j] = static_cast<uint32_t>(bits);
    }
  }
}

// The gather road's local sums for float32 and bfloat16, elements [t0, t0 +
// m) of `count` (m at most kTile) of n contributions side by side in `all`,
// for a sum (divisor 1) of at most kFusedRanks contributions; false where a
// contribution is an infinity or a NaN. All in doubles, and bitwise the
// integer road (max_scales, to_fixed, the integer sum, back32): each
// element's scale is the largest exponent among its own contributions, which
// this pass finds as it reads them (no scale pass); t + 1.5 * 2^52 - 1.5 *
// 2^52 is round(t), ties to even, which is the fixed form q as an
// integer-valued double, and up to 64 of them (each below 2^46) sum exactly
// below 2^52.
constexpr int kFusedRanks = 64;
constexpr size_t kTile = 2048;

// An element's exponent (at least 1) and the binades between its largest
// and its smallest non-zero contribution, from their magnitudes as bits
// (the smallest minus 1, so that zero wraps to the largest).
[[gnu::always_inline]] inline uint32_t exponent_of(uint32_t top) {
  const uint32_t field = top >> 23;
  return field > 1u ? field : 1u;
}
[[gnu::always_inline]] inline uint32_t span_of(uint32_t e, uint32_t low_minus_1) {
  const uint32_t low_field = (low_minus_1 + 1u) >> 23;
  const uint32_t lowest = low_minus_1 == 0xffffffffu ? e : low_field > 1u ? low_field : 1u;
  return e - lowest;
}

template <bool kBfloat>
[[gnu::always_inline]] inline bool gathered32(const void* all, size_t count, size_t t0, size_t m,
                                              int n, void* out) {
  // Each element's exponent (in top), the widest span between an element's
  // largest and smallest contributions, and the sum as if every
  // contribution lay on its element's grid; a tile where one does not (more
  // than 22 binades below its element's largest; rare) is summed again,
  // rounded to the grids.
  uint32_t top[kTile];
  if (n == 2) {
    // Whether some element is off its grid or special first (reductions
    // only, so that the loop vectorizes), then the sums.
    const size_t y0 = count + t0;
    uint32_t specials = 0;
    uint32_t off_grid = 0;
    for (size_t j = 0; j < m; ++j) {
      const uint32_t a = bits32<kBfloat>(all, t0 + j) & 0x7fffffffu;
      const uint32_t b = bits32<kBfloat>(all, y0 + j) & 0x7fffffffu;
      const uint32_t big = a > b ? a : b;
      const uint32_t small = a - 1u < b - 1u ? a - 1u : b - 1u;
      specials |= big >= 0x7f800000u ? 1u : 0u;
      off_grid |= span_of(exponent_of(big), small) > 22 ? 1u : 0u;
    }
    if (specials != 0) return false;
    if (off_grid == 0) {
      // Two contributions on the grid: their sum is exact in a double; for
      // float32 the float sum is it rounded once. Adding +0 turns the -0 of
      // two -0s into the +0 that every exact zero is.
      if constexpr (kBfloat) {
        const uint16_t* x = static_cast<const uint16_t*>(all) + t0;
        const uint16_t* y = x + count;
        for (size_t j = 0; j < m; ++j) {
          const double sum = static_cast<double>(std::bit_cast<float>(uint32_t{x[j]} << 16)) +
                             static_cast<double>(std::bit_cast<float>(uint32_t{y[j]} << 16)) + 0.0;
          store_rounded<kBfloat>(out, t0 + j, sum);
        }
      } else {
        const float* x = static_cast<const float*>(all) + t0;
        const float* y = x + count;
        float* o = static_cast<float*>(out) + t0;
        for (size_t j = 0; j < m; ++j) o[j] = x[j] + y[j] + 0.0f;
      }
      return true;
    }
    for (size_t j = 0; j < m; ++j) {
      const uint32_t a = bits32<kBfloat>(all, t0 + j) & 0x7fffffffu;
      const uint32_t b = bits32<kBfloat>(all, y0 + j) & 0x7fffffffu;
      top[j] = exponent_of(a > b ? a : b);
    }
  } else {
    // One pass over the contributions: per element the largest and smallest
    // magnitudes and the sum as if every contribution lay on its grid.
    uint32_t low[kTile];
    double acc[kTile];
    for (size_t j = 0; j < m; ++j) {
      top[j] = 0;
      low[j] = 0xffffffffu;
      acc[j] = 0;
    }
    for (int r = 0; r < n; ++r) {
      const size_t from = static_cast<size_t>(r) * count + t0;
      for (size_t j = 0; j < m; ++j) {
        const uint32_t u = bits32<kBfloat>(all, from + j);
        const uint32_t a = u & 0x7fffffffu;
        top[j] = top[j] > a ? top[j] : a;
        low[j] = low[j] < a - 1u ? low[j] : a - 1u;
        acc[j] += static_cast<double>(std::bit_cast<float>(u));
      }
    }
    uint32_t specials = 0;
    uint32_t off_grid = 0;
    for (size_t j = 0; j < m; ++j) {
      specials |= top[j] >= 0x7f800000u ? 1u : 0u;
      off_grid |= span_of(exponent_of(top[j]), low[j]) > 22 ? 1u : 0u;
    }
    if (specials != 0) return false;
    if (off_grid == 0) {
      // Every contribution on its element's grid: the double sums are exact
      // (at most 24 + 22 + 6 bits).
      for (size_t j = 0; j < m; ++j) store_rounded<kBfloat>(out, t0 + j, acc[j]);
      return true;
    }
    for (size_t j = 0; j < m; ++j) top[j] = exponent_of(top[j]);
  }
  // Some contribution lies below its element's grid: every contribution is
  // rounded to its element's grid as its fixed form is.
  double mult[kTile];
  double acc[kTile];
  for (size_t j = 0; j < m; ++j) {
    mult[j] = pow2_bits(kShift32 - static_cast<int>(top[j]));
    acc[j] = 0;
  }
  for (int r = 0; r < n; ++r) {
    const size_t from = static_cast<size_t>(r) * count + t0;
    for (size_t j = 0; j < m; ++j) {
      const double t =
          static_cast<double>(std::bit_cast<float>(bits32<kBfloat>(all, from + j))) * mult[j];
      acc[j] += (t + kMagic) - kMagic;
    }
  }
  for (size_t j = 0; j < m; ++j)
    store_rounded<kBfloat>(out, t0 + j, acc[j] * pow2_bits(static_cast<int>(top[j]) - kShift32));
  return true;
}

struct Kernels {
  void (*scales_f32)(const void*, size_t, uint8_t*, bool*);
  void (*scales_bf16)(const void*, size_t, uint8_t*, bool*);
  void (*fixed_f32)(const void*, size_t, const uint8_t*, int64_t*, bool, bool);
  void (*fixed_bf16)(const void*, size_t, const uint8_t*, int64_t*, bool, bool);
  void (*back_f32)(const int64_t*, size_t, const uint8_t*, void*);
  void (*back_bf16)(const int64_t*, size_t, const uint8_t*, void*);
  bool (*gather_f32)(const void*, size_t, size_t, size_t, int, void*);
  bool (*gather_bf16)(const void*, size_t, size_t, size_t, int, void*);
};

#define CHORUS_EXACT_KERNELS(attr, name)                                                       \
  attr void name##_scales_f32(const void* x, size_t n, uint8_t* s, bool* sp) {                 \
    scales32<false>(x, n, s, sp);                                                              \
  }                                                                                            \
  attr void name##_scales_bf16(const void* x, size_t n, uint8_t* s, bool* sp) {                \
    scales32<true>(x, n, s, sp);                                                               \
  }                                                                                            \
  attr void name##_fixed_f32(const void* x, size_t n, const uint8_t* s, int64_t* o, bool acc,  \
                             bool sp) {                                                        \
    fixed32<false>(x, n, s, o, acc, sp);                                                       \
  }                                                                                            \
  attr void name##_fixed_bf16(const void* x, size_t n, const uint8_t* s, int64_t* o, bool acc, \
                              bool sp) {                                                       \
    fixed32<true>(x, n, s, o, acc, sp);                                                        \
  }                                                                                            \
  attr void name##_back_f32(const int64_t* q, size_t n, const uint8_t* s, void* o) {           \
    back32<false>(q, n, s, o);                                                                 \
  }                                                                                            \
  attr void name##_back_bf16(const int64_t* q, size_t n, const uint8_t* s, void* o) {          \
    back32<true>(q, n, s, o);                                                                  \
  }                                                                                            \
  attr bool name##_gather_f32(const void* a, size_t c, size_t t, size_t m, int n, void* o) {   \
    return gathered32<false>(a, c, t, m, n, o);                                                \
  }                                                                                            \
  attr bool name##_gather_bf16(const void* a, size_t c, size_t t, size_t m, int n, void* o) {  \
    return gathered32<true>(a, c, t, m, n, o);                                                 \
  }

CHORUS_EXACT_KERNELS(, baseline)
#if defined(__x86_64__)
CHORUS_EXACT_KERNELS([[gnu::target("avx2")]], avx2)
CHORUS_EXACT_KERNELS([[gnu::target("avx512f,avx512dq,avx512vl,avx512bw")]], avx512)
#endif
#undef CHORUS_EXACT_KERNELS

Kernels pick_kernels() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
    return {avx512_scales_f32, avx512_scales_bf16, avx512_fixed_f32,  avx512_fixed_bf16,
            avx512_back_f32,   avx512_back_bf16,   avx512_gather_f32, avx512_gather_bf16};
  if (__builtin_cpu_supports("avx2"))
    return {avx2_scales_f32, avx2_scales_bf16, avx2_fixed_f32,  avx2_fixed_bf16,
            avx2_back_f32,   avx2_back_bf16,   avx2_gather_f32, avx2_gather_bf16};
#endif
  return {baseline_scales_f32, baseline_scales_bf16, baseline_fixed_f32,  baseline_fixed_bf16,
          baseline_back_f32,   baseline_back_bf16,   baseline_gather_f32, baseline_gather_bf16};
}

const Kernels& kernels() {
  static const Kernels k = pick_kernels();
  return k;
}

// ---- float64 and float16, on integers -----------------------------------

// |x| = sig * 2^(e - bias - mantissa), e the biased exponent (1 for
// subnormals), sig with its implicit bit.
struct Parts {
  bool negative;
  uint64_t sig;
  int e;
};
Parts parts(uint64_t bits, Format f) {
  const uint64_t field = (bits >> f.mantissa) & ((uint64_t{1} << f.exponent) - 1);
  const uint64_t m = bits & ((uint64_t{1} << f.mantissa) - 1);
  const bool negative = (bits >> (f.mantissa + f.exponent)) != 0;
  if (field == 0) return {negative, m, 1};
  return {negative, m | uint64_t{1} << f.mantissa, static_cast<int>(field)};
}

// sig * 2^shift rounded to an integer, ties to even.
Int128 shift_round(uint64_t sig, int shift) {
  if (shift >= 0) return static_cast<Int128>(sig) << shift;
  if (shift < -64) return 0;
  const int s = -shift;
  const uint64_t whole = s == 64 ? 0 : sig >> s;
  const uint64_t half = uint64_t{1} << (s - 1);
  const uint64_t rest = s == 64 ? sig : sig & ((uint64_t{1} << s) - 1);
  const bool up = rest > half || (rest == half && (whole & 1) != 0);
  return static_cast<Int128>(whole + (up ? 1 : 0));
}

uint64_t load_bits(DataType type, const void* x, size_t i) {
  if (type == DataType::float64) return static_cast<const uint64_t*>(x)[i];
  return static_cast<const uint16_t*>(x)[i];
}

bool is_special(uint64_t bits, Format f) {
  const uint64_t ones = (uint64_t{1} << f.exponent) - 1;
  return ((bits >> f.mantissa) & ones) == ones;
}

Format format_of(DataType type) {
  switch (type) {
    case DataType::float16:
      return kHalfFormat;
    case DataType::bfloat16:
      return kBfloatFormat;
    case DataType::float32:
      return kSingleFormat;
    case DataType::float64:
      return kDoubleFormat;
    default:
      CHORUS_CHECK(false);
  }
  return kSingleFormat;
}

void store_bits(DataType type, void* out, size_t i, uint64_t bits) {
  switch (dtype_size(type)) {
    case 2:
      static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(bits);
      break;
    case 4:
      static_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(bits);
      break;
    default:
      static_cast<uint64_t*>(out)[i] = bits;
  }
}

uint64_t element_bits(DataType type, const void* x, size_t i) {
  switch (dtype_size(type)) {
    case 2:
      return static_cast<const uint16_t*>(x)[i];
    case 4:
      return static_cast<const uint32_t*>(x)[i];
    default:
      return static_cast<const uint64_t*>(x)[i];
  }
}

// The exact sum of element i as an integer, and the power of two it counts.
Int128 sum_of(DataType type, const int64_t* sums, size_t i) {
  if (type != DataType::float64) return sums[i];
  return static_cast<Int128>(sums[2 * i + 1]) * (int64_t{1} << kLane64) + sums[2 * i];
}
// The exponent a float64 element's scale code stands for: the top of the
// eight binades the code spans (every contribution's field is at most this).
int exponent64(uint8_t code) {
  return 8 * static_cast<int>(code) + 7;
}
int unit_exponent(DataType type, const uint8_t* scales, size_t element) {
  switch (type) {
    case DataType::float16:
      return -kShift16;
    case DataType::float64:
      return exponent64(scales[element]) - kShift64;
    default:
      return exponent32(scales[element]) - kShift32;
  }
}

}  // namespace

bool applies(DataType type, ReduceOp op) {
  const bool floating = type == DataType::float16 || type == DataType::bfloat16 ||
                        type == DataType::float32 || type == DataType::float64;
  return floating && (op == ReduceOp::sum || op == ReduceOp::avg);
}

bool order_independent(DataType type, ReduceOp op) {
  const bool floating = type == DataType::float16 || type == DataType::bfloat16 ||
                        type == DataType::float32 || type == DataType::float64;
  return !(floating && op == ReduceOp::prod);
}

size_t lanes(DataType type) {
  return type == DataType::float64 ? 2 : 1;
}

bool has_scales(DataType type) {
  return type != DataType::float16;
}

int exact_binades(DataType type) {
  switch (type) {
    case DataType::float16:
      return 40;
    case DataType::bfloat16:
      return kFraction32 - 8;
    case DataType::float64:
      return kFraction64 - 53 - 7;  // the code's 8 binades cost 7
    default:
      return kFraction32 - 24;
  }
}

void max_scales(DataType type, const void* x, size_t count, uint8_t* scales, bool* special) {
  switch (type) {
    case DataType::float32:
      return kernels().scales_f32(x, count, scales, special);
    case DataType::bfloat16:
      return kernels().scales_bf16(x, count, scales, special);
    case DataType::float16:
    case DataType::float64: {
      const Format f = format_of(type);
      const uint64_t magnitude = (uint64_t{1} << (f.mantissa + f.exponent)) - 1;
      for (size_t i = 0; i < count; ++i) {
        const uint64_t bits = load_bits(type, x, i);
        if (is_special(bits, f)) {
          *special = true;
          continue;
        }
        if (type == DataType::float16 || (bits & magnitude) == 0) continue;
        // float64: the top 8 bits of the exponent field.
        const auto code = static_cast<uint8_t>((bits >> f.mantissa & 0x7ffu) >> 3);
        scales[i] = std::max(scales[i], code);
      }
      return;
    }
    default:
      CHORUS_CHECK(false);
  }
}

void to_fixed(DataType type, const void* x, size_t count, const uint8_t* scales, int64_t* out,
              bool accumulate, bool specials) {
  switch (type) {
    case DataType::float32:
      return kernels().fixed_f32(x, count, scales, out, accumulate, specials);
    case DataType::bfloat16:
      return kernels().fixed_bf16(x, count, scales, out, accumulate, specials);
    case DataType::float16:
    case DataType::float64: {
      const Format f = format_of(type);
      const bool wide = type == DataType::float64;
      for (size_t i = 0; i < count; ++i) {
        const uint64_t bits = load_bits(type, x, i);
        Int128 q = 0;
        if (!is_special(bits, f)) {
          const Parts p = parts(bits, f);
          // float16: q = x * 2^24 = sig * 2^(e - 1). float64: q = sig *
          // 2^(e - E + 39), E the exponent of the element's scale code.
          const int shift = wide ? p.e - exponent64(scales[i]) + (kFraction64 - 53) : p.e - 1;
          q = shift_round(p.sig, shift);
          if (p.negative) q = -q;
        }
        if (!wide) {
          const auto v = static_cast<int64_t>(q);
          out[i] = accumulate ? out[i] + v : v;
          continue;
        }
        // Two lanes: the low kLane64 bits (0 <= lo < 2^46) and the rest.
        const auto lo = static_cast<int64_t>(q & ((Int128{1} << kLane64) - 1));
        const auto hi = static_cast<int64_t>((q - lo) / (Int128{1} << kLane64));
        out[2 * i] = accumulate ? out[2 * i] + lo : lo;
        out[2 * i + 1] = accumulate ? out[2 * i + 1] + hi : hi;
      }
      return;
    }
    default:
      CHORUS_CHECK(false);
  }
}

void special_counts(DataType type, const void* x, size_t count, int64_t* out, bool accumulate) {
  const Format f = format_of(type);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = element_bits(type, x, i);
    int64_t c = 0;
    if (is_special(bits, f)) {
      const bool nan = (bits & ((uint64_t{1} << f.mantissa) - 1)) != 0;
      const bool negative = (bits >> (f.mantissa + f.exponent)) != 0;
      c = nan ? kNaN : negative ? kNegInf : kPosInf;
    }
    out[i] = accumulate ? out[i] + c : c;
  }
}

void from_fixed(DataType type, const int64_t* sums, size_t count, const uint8_t* scales,
                uint32_t divisor, const int64_t* specials, void* out) {
  CHORUS_CHECK(divisor >= 1);
  if (divisor == 1 && type == DataType::float32) {
    kernels().back_f32(sums, count, scales, out);
  } else if (divisor == 1 && type == DataType::bfloat16) {
    kernels().back_bf16(sums, count, scales, out);
  } else {
    const Format f = format_of(type);
    for (size_t i = 0; i < count; ++i)
      store_bits(type, out, i,
                 round_to_format(sum_of(type, sums, i), unit_exponent(type, scales, i), divisor,
                                 f.mantissa, f.exponent));
  }
  if (specials == nullptr) return;
  const Format f = format_of(type);
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = 0;
    if (special_result(specials[i], f, &bits)) store_bits(type, out, i, bits);
  }
}

void sum_gathered(DataType type, const void* all, size_t count, int n, uint32_t divisor,
                  void* out) {
  CHORUS_CHECK(n >= 1);
  // Tiles of kTile elements, small enough that a tile's fixed forms stay in
  // the first-level caches while every contribution adds into them.
  const size_t es = dtype_size(type);
  uint8_t scales[kTile];
  int64_t acc[kTile * 2];
  int64_t counts[kTile];
  const auto* base = static_cast<const std::byte*>(all);
  auto* dst = static_cast<std::byte*>(out);
  for (size_t t0 = 0; t0 < count; t0 += kTile) {
    const size_t m = std::min(kTile, count - t0);
    const bool wide = type == DataType::float32 || type == DataType::bfloat16;
    if (wide && divisor == 1 && n <= kFusedRanks) {
      // The same bits in doubles (gathered32), unless there are specials.
      const auto fused = type == DataType::float32 ? kernels().gather_f32 : kernels().gather_bf16;
      if (fused(all, count, t0, m, n, out)) continue;
    }
    std::fill(std::begin(scales), std::end(scales), 0);
    bool special = false;
    for (int r = 0; r < n; ++r)
      max_scales(type, base + (static_cast<size_t>(r) * count + t0) * es, m, scales, &special);
    for (int r = 0; r < n; ++r)
      to_fixed(type, base + (static_cast<size_t>(r) * count + t0) * es, m, scales, acc, r > 0,
               special);
    if (special)
      for (int r = 0; r < n; ++r)
        special_counts(type, base + (static_cast<size_t>(r) * count + t0) * es, m, counts, r > 0);
    from_fixed(type, acc, m, scales, divisor, special ? counts : nullptr, dst + t0 * es);
  }
}

uint64_t round_to_format(Int128 value, int exponent, uint32_t divisor, int mantissa_bits,
                         int exponent_bits) {
  CHORUS_CHECK(divisor >= 1);
  if (value == 0) return 0;
  const bool negative = value < 0;
  u128 m = negative ? -static_cast<u128>(value) : static_cast<u128>(value);
  bool sticky = false;
  if (divisor > 1) {
    // Widen to 126 bits first, so that the quotient keeps far more bits than
    // any format and the remainder only decides ties.
    const int len = bit_length(m);
    if (len < 126) {
      m <<= 126 - len;
      exponent -= 126 - len;
    }
    sticky = m % divisor != 0;
    m /= divisor;
  }
  const int p = mantissa_bits + 1;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int emin = 1 - bias;
  const int top = bit_length(m) - 1 + exponent;  // the exponent of the leading bit
  int lsb = std::max(top - (p - 1), emin - (p - 1));
  const int shift = lsb - exponent;  // bits of m below the result's last place
  u128 sig = 0;
  if (shift <= 0) {
    sig = m << -shift;
  } else {
    bool half = false;
    bool rest = sticky;
    if (shift <= 128) {
      half = ((m >> (shift - 1)) & 1) != 0;
      const u128 below = shift == 1 ? 0 : m & ((u128{1} << (shift - 1)) - 1);
      rest = rest || below != 0;
      sig = shift == 128 ? 0 : m >> shift;
    } else {
      rest = true;
    }
    if (half && (rest || (sig & 1) != 0)) ++sig;
    if ((sig >> p) != 0) {
      sig >>= 1;
      ++lsb;
    }
  }
  const uint64_t sign = negative ? uint64_t{1} << (mantissa_bits + exponent_bits) : 0;
  if (sig == 0) return sign;
  const uint64_t ones = (uint64_t{1} << exponent_bits) - 1;
  const uint64_t field =
      (sig >> (p - 1)) == 0 ? 0 : static_cast<uint64_t>(lsb + (p - 1) + bias);  // 0: subnormal
  if (field >= ones) return sign | ones << mantissa_bits;
  return sign | field << mantissa_bits |
         (static_cast<uint64_t>(sig) & ((uint64_t{1} << mantissa_bits) - 1));
}

}  // namespace chorus::exact
