// The arithmetic of deterministic reductions (core/exact_sum.h), against
// references that do not share its code: double arithmetic where a double
// holds the exact sum, and a search over every value of the 16-bit formats.
#include "core/exact_sum.h"

#include "core/reduce_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace chorus::exact {
namespace {

// Every finite non-negative value of a 16-bit format, ascending, with bits.
struct Table16 {
  std::vector<double> value;
  std::vector<uint16_t> bits;
};
Table16 table16(bool bfloat) {
  Table16 t;
  for (uint32_t b = 0; b < 0x8000; ++b) {
    const float f = bfloat ? bfloat16_to_float(static_cast<uint16_t>(b))
                           : half_to_float(static_cast<uint16_t>(b));
    if (!std::isfinite(f)) break;
    t.value.push_back(f);
    t.bits.push_back(static_cast<uint16_t>(b));
  }
  return t;
}

// The 16-bit value nearest to d (exact), ties to even, infinity past the
// largest finite value's half-way point.
uint16_t nearest16(const Table16& t, double d, bool bfloat) {
  const uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  const double a = std::abs(d);
  const size_t top = t.value.size() - 1;
  const double ulp = t.value[top] - t.value[top - 1];
  if (a >= t.value[top] + ulp / 2) return sign | (bfloat ? 0x7f80 : 0x7c00);
  size_t hi =
      static_cast<size_t>(std::lower_bound(t.value.begin(), t.value.end(), a) - t.value.begin());
  if (hi > top) return sign | t.bits[top];
  if (t.value[hi] == a || hi == 0) return sign | t.bits[hi];
  const double below = a - t.value[hi - 1];
  const double above = t.value[hi] - a;
  size_t pick = below < above ? hi - 1 : hi;
  if (below == above) pick = (t.bits[hi] & 1) == 0 ? hi : hi - 1;
  return static_cast<uint16_t>(sign | t.bits[pick]);
}

TEST(RoundToFormat, MatchesOneHardwareRoundingWhereADoubleHoldsTheValue) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() >> (11 + rng() % 50)) * (rng() & 1 ? -1 : 1);
    const int e = static_cast<int>(rng() % 330) - 200;
    const double d = std::ldexp(static_cast<double>(v), e);  // exact: |v| < 2^53, in range
    const float f = static_cast<float>(d);                   // one rounding
    ASSERT_EQ(round_to_format(v, e, 1, 23, 8),
              std::bit_cast<uint32_t>(f) == 0x80000000u && v == 0 ? 0u : std::bit_cast<uint32_t>(f))
        << v << " * 2^" << e;
    const int e64 = static_cast<int>(rng() % 2200) - 1160;
    const double d64 = std::ldexp(static_cast<double>(v), e64);
    // ldexp is exact unless the result is subnormal or overflows: compare there only.
    if (std::isnormal(d64) || v == 0) {
      ASSERT_EQ(round_to_format(v, e64, 1, 52, 11), std::bit_cast<uint64_t>(d64))
          << v << " * 2^" << e64;
    }
  }
}

TEST(RoundToFormat, SixteenBitFormatsAgainstEveryValue) {
  for (bool bfloat : {false, true}) {
    const Table16 t = table16(bfloat);
    std::mt19937_64 rng(bfloat ? 3 : 4);
    for (int i = 0; i < 100000; ++i) {
      const int64_t v = static_cast<int64_t>(rng() >> (11 + rng() % 50)) * (rng() & 1 ? -1 : 1);
      const int e =
          bfloat ? static_cast<int>(rng() % 330) - 200 : static_cast<int>(rng() % 70) - 60;
      const double d = std::ldexp(static_cast<double>(v), e);
      const uint16_t want = v == 0 ? 0 : nearest16(t, d, bfloat);
      ASSERT_EQ(round_to_format(v, e, 1, bfloat ? 7 : 10, bfloat ? 8 : 5), want)
          << (bfloat ? "bfloat16 " : "float16 ") << v << " * 2^" << e;
    }
  }
}

TEST(RoundToFormat, DividedOnceNotTwice) {
  // v / d rounded once: compare with the nearest float by exact integer
  // cross-multiplication of the two candidates' distances.
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() >> (12 + rng() % 30));
    const uint32_t d = 2 + static_cast<uint32_t>(rng() % 70000);
    if (v == 0) continue;
    const uint32_t bits = static_cast<uint32_t>(round_to_format(v, 0, d, 23, 8));
    const float r = std::bit_cast<float>(bits);
    // |r - v/d| <= |r' - v/d| for both neighbours r' of r, in exact terms:
    // |r*d - v| <= |r'*d - v| (all products exact in long double? no: in
    // 128-bit integers after scaling by 2^k).
    auto distance = [&](float x) {
      int exp = 0;
      const double m = std::frexp(static_cast<double>(x), &exp);  // x = m * 2^exp
      const auto mant = static_cast<Int128>(std::ldexp(m, 53));   // x = mant * 2^(exp-53)
      // |x*d - v| * 2^(53-exp+64) as an integer: both sides scaled by 2^64.
      const int shift = exp - 53 + 64;
      const Int128 xd = shift >= 0 ? (mant * d) << shift : (mant * d) >> -shift;
      const Int128 vv = static_cast<Int128>(v) << 64;
      return xd > vv ? xd - vv : vv - xd;
    };
    const float lo = std::nextafter(r, 0.0f);
    const float hi = std::nextafter(r, std::numeric_limits<float>::infinity());
    ASSERT_LE(distance(r), distance(lo)) << v << " / " << d;
    ASSERT_LE(distance(r), distance(hi)) << v << " / " << d;
  }
}

// Exact sums of k contributions that a double holds exactly: those within a
// few binades of each other.
template <typename T>
std::vector<T> narrow(std::mt19937_64& rng, size_t n, int center) {
  std::vector<T> v(n);
  for (auto& x : v) {
    const int e = center - static_cast<int>(rng() % 8);
    const double m = static_cast<double>(rng() >> 40) / static_cast<double>(1ull << 24);
    x = static_cast<T>(std::ldexp(rng() & 1 ? -m : m, e));
  }
  return v;
}

TEST(SumGathered, Float32IsTheExactSumRoundedOnce) {
  std::mt19937_64 rng(11);
  for (int k : {1, 2, 3, 7, 16}) {
    for (int center : {-140, -120, -20, 0, 60, 127}) {
      const size_t n = 1000;
      std::vector<float> all;
      for (int j = 0; j < k; ++j) {
        auto v = narrow<float>(rng, n, center);
        all.insert(all.end(), v.begin(), v.end());
      }
      std::vector<float> out(n);
      sum_gathered(DataType::float32, all.data(), n, k, 1, out.data());
      for (size_t i = 0; i < n; ++i) {
        double exact = 0;  // < 2^53 apart: exact
        for (int j = 0; j < k; ++j) exact += all[static_cast<size_t>(j) * n + i];
        const float want = exact == 0 ? 0.0f : static_cast<float>(exact);
        ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want))
            << "k=" << k << " center=" << center << " i=" << i;
      }
    }
  }
}

TEST(SumGathered, SixteenBitTypesAreTheExactSumRoundedOnce) {
  for (bool bfloat : {false, true}) {
    const Table16 t = table16(bfloat);
    const DataType type = bfloat ? DataType::bfloat16 : DataType::float16;
    std::mt19937_64 rng(bfloat ? 12 : 13);
    for (int k : {1, 2, 5, 16}) {
      const size_t n = 3000;
      std::vector<uint16_t> all;
      for (int j = 0; j < k; ++j)
        for (size_t i = 0; i < n; ++i) {
          // float16: any finite value (all of its range is exact); bfloat16:
          // within 30 binades of each other.
          uint16_t b = static_cast<uint16_t>(rng());
          if (bfloat)
            b = static_cast<uint16_t>((b & 0x807f) | ((100 + rng() % 30) << 7));
          else if ((b & 0x7c00) == 0x7c00)
            b &= 0xbfff;
          all.push_back(b);
        }
      std::vector<uint16_t> out(n);
      sum_gathered(type, all.data(), n, k, 1, out.data());
      for (size_t i = 0; i < n; ++i) {
        double exact = 0;
        for (int j = 0; j < k; ++j) {
          const uint16_t b = all[static_cast<size_t>(j) * n + i];
          exact += bfloat ? bfloat16_to_float(b) : half_to_float(b);
        }
        const uint16_t want = exact == 0 ? 0 : nearest16(t, exact, bfloat);
        ASSERT_EQ(out[i], want) << (bfloat ? "bfloat16" : "float16") << " k=" << k << " i=" << i;
      }
    }
  }
}

TEST(SumGathered, Float64WithinItsExactRangeIsTheExactSum) {
  // Values within 30 binades whose low bits are zero: their sum has fewer
  // than 53 significant bits, so doubles add them exactly.
  std::mt19937_64 rng(14);
  for (int center : {-1000, -1060, 0, 1000}) {
    const int k = 9;
    const size_t n = 500;
    std::vector<double> all;
    for (int j = 0; j < k; ++j)
      for (size_t i = 0; i < n; ++i) {
        const double m = static_cast<double>(rng() >> 44);  // 20 bits
        all.push_back(std::ldexp(rng() & 1 ? -m : m, center - static_cast<int>(rng() % 25)));
      }
    std::vector<double> out(n);
    sum_gathered(DataType::float64, all.data(), n, k, 1, out.data());
    for (size_t i = 0; i < n; ++i) {
      double exact = 0;
      for (int j = 0; j < k; ++j) exact += all[static_cast<size_t>(j) * n + i];
      if (exact == 0) exact = 0;  // +0
      ASSERT_EQ(std::bit_cast<uint64_t>(out[i]), std::bit_cast<uint64_t>(exact)) << i;
    }
  }
}

// Random bits over a type's whole finite range.
std::vector<uint64_t> random_bits(std::mt19937_64& rng, size_t n, int mant, int exp) {
  std::vector<uint64_t> v(n);
  const uint64_t max_field = (uint64_t{1} << exp) - 2;
  for (auto& b : v) {
    const uint64_t r = rng();
    b = (r & 1) << (mant + exp) | ((r >> 1) % (max_field + 1)) << mant |
        ((r >> 16) & ((uint64_t{1} << mant) - 1));
  }
  return v;
}

void store(DataType t, std::vector<std::byte>& out, const std::vector<uint64_t>& bits) {
  const size_t es = dtype_size(t);
  out.resize(bits.size() * es);
  for (size_t i = 0; i < bits.size(); ++i) std::memcpy(out.data() + i * es, &bits[i], es);
}

TEST(SumGathered, ContributionOrderAndZeroContributionsChangeNoBit) {
  const struct {
    DataType t;
    int mant, exp;
  } types[] = {{DataType::float16, 10, 5},
               {DataType::bfloat16, 7, 8},
               {DataType::float32, 23, 8},
               {DataType::float64, 52, 11}};
  std::mt19937_64 rng(15);
  for (const auto& ty : types) {
    const size_t es = dtype_size(ty.t);
    const size_t n = 777;
    const int k = 5;
    std::vector<std::vector<uint64_t>> parts;
    for (int j = 0; j < k; ++j) parts.push_back(random_bits(rng, n, ty.mant, ty.exp));
    auto run = [&](const std::vector<int>& order, int zeros) {
      std::vector<uint64_t> flat;
      for (int j : order)
        flat.insert(flat.end(), parts[static_cast<size_t>(j)].begin(),
                    parts[static_cast<size_t>(j)].end());
      flat.resize(flat.size() + static_cast<size_t>(zeros) * n, 0);
      std::vector<std::byte> all;
      store(ty.t, all, flat);
      std::vector<std::byte> out(n * es);
      sum_gathered(ty.t, all.data(), n, static_cast<int>(order.size()) + zeros, 1, out.data());
      return out;
    };
    const auto first = run({0, 1, 2, 3, 4}, 0);
    EXPECT_EQ(first, run({4, 2, 0, 3, 1}, 0)) << to_string(ty.t);
    EXPECT_EQ(first, run({3, 1, 4, 0, 2}, 11)) << to_string(ty.t);
  }
}

// The gather road (sum_gathered, which sums in doubles where it can) and the
// integer road (scales, to_fixed, an integer sum, from_fixed) are one
// function: bitwise equal over the whole range, for 1 to 70 contributions.
TEST(SumGathered, EqualsTheIntegerRoadBitForBit) {
  std::mt19937_64 rng(21);
  for (DataType t : {DataType::bfloat16, DataType::float32, DataType::float16, DataType::float64}) {
    const int mant = t == DataType::float16    ? 10
                     : t == DataType::bfloat16 ? 7
                     : t == DataType::float32  ? 23
                                               : 52;
    const int exp = t == DataType::float16 ? 5 : t == DataType::float64 ? 11 : 8;
    const size_t es = dtype_size(t);
    // band 0: the whole range (the first 128 elements in one binade); 1: every value
    // within 12 binades, 2: within 20 (the fast roads of two contributions).
    for (int band : {0, 1, 2})
      for (int n : {1, 2, 3, 17, 64, 65, 70}) {
        const size_t count = 64 * 9 + 13;
        std::vector<uint64_t> bits;
        const uint64_t field_mask = ((uint64_t{1} << exp) - 1) << mant;
        const uint64_t mid = (uint64_t{1} << (exp - 1)) - 1;
        for (int r = 0; r < n; ++r) {
          auto v = random_bits(rng, count, mant, exp);
          for (size_t i = 0; i < count; ++i) {
            if (band == 0 && i < 128)  // one binade, where every sum is exact
              v[i] = (v[i] & ~field_mask) | (mid + 2) << mant;
            if (band > 0) {
              const uint64_t span = band == 1 ? 12 : 20;
              const uint64_t lo = mid > span ? mid - span : 1;
              v[i] = (v[i] & ~field_mask) | (lo + rng() % (mid - lo + 1)) << mant;
            }
          }
          bits.insert(bits.end(), v.begin(), v.end());
        }
        std::vector<std::byte> all;
        store(t, all, bits);
        std::vector<std::byte> gathered(count * es);
        sum_gathered(t, all.data(), count, n, 1, gathered.data());
        std::vector<uint8_t> scales(count, 0);
        bool special = false;
        for (int r = 0; r < n; ++r)
          max_scales(t, all.data() + static_cast<size_t>(r) * count * es, count, scales.data(),
                     &special);
        std::vector<int64_t> sums(count * lanes(t), 0);
        for (int r = 0; r < n; ++r)
          to_fixed(t, all.data() + static_cast<size_t>(r) * count * es, count, scales.data(),
                   sums.data(), r > 0, special);
        std::vector<std::byte> road(count * es);
        from_fixed(t, sums.data(), count, scales.data(), 1, nullptr, road.data());
        ASSERT_EQ(gathered, road) << to_string(t) << " n=" << n << " band=" << band;
      }
  }
}

TEST(SumGathered, SpecialValuesAsIeeeSummation) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = FLT_MAX;
  // Per element, three contributions, and the sum IEEE addition gives.
  const struct {
    float a, b, c;
  } cases[] = {{inf, 1, 2},      {-inf, 1, -2},    {inf, -inf, 0},       {nan, 1, 2},
               {inf, nan, 0},    {big, big, 0},    {-big, -big, 0},      {big, -big, 0x1p100f},
               {big, big, -big}, {0.0f, -0.0f, 0}, {-0.0f, -0.0f, -0.0f}};
  const size_t n = std::size(cases);
  std::vector<float> all(3 * n);
  for (size_t i = 0; i < n; ++i) {
    all[i] = cases[i].a;
    all[n + i] = cases[i].b;
    all[2 * n + i] = cases[i].c;
  }
  std::vector<float> out(n);
  sum_gathered(DataType::float32, all.data(), n, 3, 1, out.data());
  EXPECT_EQ(out[0], inf);
  EXPECT_EQ(out[1], -inf);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_EQ(out[5], inf);  // the exact sum 2 * FLT_MAX rounds to infinity
  EXPECT_EQ(out[6], -inf);
  // Exact: 2^100 lies on the grid of the element's scale (27 binades below
  // FLT_MAX's, within 22 + its trailing zeros). IEEE gives 2^100 too.
  EXPECT_EQ(out[7], 0x1p100f);
  EXPECT_EQ(out[8], big);  // exact: FLT_MAX (IEEE left to right: inf)
  EXPECT_EQ(std::bit_cast<uint32_t>(out[9]), 0u);
  // An exact zero is +0, also of -0s (so that ranks adding +0 change nothing).
  EXPECT_EQ(std::bit_cast<uint32_t>(out[10]), 0u);
}

TEST(FromFixed, FastRoadAgreesWithTheIntegerRounding) {
  // Sums at and beyond 2^51 (the double road's limit) and every scale.
  std::mt19937_64 rng(16);
  for (DataType t : {DataType::float32, DataType::bfloat16}) {
    const size_t n = 64 * 300;
    std::vector<int64_t> sums(n);
    std::vector<uint8_t> scales(n);
    for (size_t i = 0; i < n; ++i) scales[i] = static_cast<uint8_t>(i / 64 % 256);
    for (size_t i = 0; i < n; ++i) {
      const int bits = 1 + static_cast<int>(rng() % 62);
      sums[i] = static_cast<int64_t>(rng() >> (64 - bits)) * (rng() & 1 ? -1 : 1);
    }
    std::vector<std::byte> out(n * dtype_size(t));
    from_fixed(t, sums.data(), n, scales.data(), 1, nullptr, out.data());
    for (size_t i = 0; i < n; ++i) {
      const int e = std::max<int>(scales[i], 1) - 172;
      const uint64_t want = t == DataType::float32 ? round_to_format(sums[i], e, 1, 23, 8)
                                                   : round_to_format(sums[i], e, 1, 7, 8);
      uint64_t got = 0;
      std::memcpy(&got, out.data() + i * dtype_size(t), dtype_size(t));
      ASSERT_EQ(got, want) << to_string(t) << " sum " << sums[i] << " scale " << int{scales[i]};
    }
  }
}

TEST(ToFixed, OneContributionComesBackExactlyWithinTheExactRange) {
  std::mt19937_64 rng(17);
  for (DataType t : {DataType::bfloat16, DataType::float32, DataType::float64, DataType::float16}) {
    const size_t es = dtype_size(t);
    const size_t n = 64 * 50;
    std::vector<std::byte> x(n * es);
    const int span = t == DataType::float16 ? 29 : exact_binades(t);
    const int mant = t == DataType::float16    ? 10
                     : t == DataType::bfloat16 ? 7
                     : t == DataType::float32  ? 23
                                               : 52;
    const uint64_t top = t == DataType::float16 ? 30 : t == DataType::float64 ? 2000 : 200;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t field = top - rng() % static_cast<uint64_t>(span + 1);
      const uint64_t bits =
          (rng() & 1) << (es * 8 - 1) | field << mant | (rng() & ((uint64_t{1} << mant) - 1));
      std::memcpy(x.data() + i * es, &bits, es);
    }
    std::vector<std::byte> out(n * es);
    sum_gathered(t, x.data(), n, 1, 1, out.data());
    EXPECT_EQ(out, x) << to_string(t);
  }
}

// Contributions for the prefix and exactness tests: per element, one of
// exponents spread over +-120 binades around the middle of the range, a few
// binades around one exponent, subnormals, +-0, pairs that cancel, and the
// largest finite values; a neighbour of an element is often of a very
// different size, which is what used to change its bits.
std::vector<uint64_t> spread_bits(std::mt19937_64& rng, size_t count, int n, int mant, int exp) {
  const uint64_t bias = (uint64_t{1} << (exp - 1)) - 1;
  const uint64_t max_field = (uint64_t{1} << exp) - 2;
  const uint64_t mant_mask = (uint64_t{1} << mant) - 1;
  const uint64_t sign = uint64_t{1} << (mant + exp);
  const uint64_t spread = std::min<uint64_t>(120, bias - 1);
  std::vector<uint64_t> v(count * static_cast<size_t>(n));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t kind = rng() % 10;
    const uint64_t center = bias - spread + rng() % (2 * spread + 1);
    for (int r = 0; r < n; ++r) {
      const uint64_t x = rng();
      uint64_t field = 0;
      switch (kind) {
        case 0:
          field = 0;  // subnormal (or zero)
          break;
        case 1:
          field = max_field;  // the largest binade
          break;
        case 2:
        case 3:
          field = center - std::min<uint64_t>(center - 1, x % 6);  // a few binades
          break;
        default:
          field = bias - spread + (x >> 8) % (2 * spread + 1);
      }
      uint64_t bits = (x & 1 ? sign : 0) | field << mant | ((x >> 20) & mant_mask);
      if (kind == 4 && r % 3 == 2) bits = x & 1 ? sign : 0;  // +-0
      if (kind == 5 && r % 2 == 1) bits = v[static_cast<size_t>(r - 1) * count + i] ^ sign;
      v[static_cast<size_t>(r) * count + i] = bits;
    }
  }
  return v;
}

struct TypeBits {
  DataType t;
  int mant, exp;
};
constexpr TypeBits kFloatTypes[] = {{DataType::float16, 10, 5},
                                    {DataType::bfloat16, 7, 8},
                                    {DataType::float32, 23, 8},
                                    {DataType::float64, 52, 11}};

// The integer road on the first `count` elements of n contributions of
// `stride` elements each: scales, fixed forms, their sum, back.
std::vector<std::byte> integer_road(DataType t, const std::vector<std::byte>& all, size_t stride,
                                    size_t count, int n, uint32_t divisor) {
  const size_t es = dtype_size(t);
  std::vector<uint8_t> scales(count, 0);
  bool special = false;
  for (int r = 0; r < n; ++r)
    max_scales(t, all.data() + static_cast<size_t>(r) * stride * es, count, scales.data(),
               &special);
  std::vector<int64_t> sums(count * lanes(t), 0);
  for (int r = 0; r < n; ++r)
    to_fixed(t, all.data() + static_cast<size_t>(r) * stride * es, count, scales.data(),
             sums.data(), r > 0, special);
  std::vector<int64_t> counts(count, 0);
  for (int r = 0; r < n; ++r)
    special_counts(t, all.data() + static_cast<size_t>(r) * stride * es, count, counts.data(),
                   r > 0);
  std::vector<std::byte> out(count * es);
  from_fixed(t, sums.data(), count, scales.data(), divisor, special ? counts.data() : nullptr,
             out.data());
  return out;
}

// The prefix property: element i of a sum of length L is element i of the
// sum of length L' for every L, L' > i, on the gather road's sums and on the
// integer road, for sum and avg, whatever the other elements hold.
TEST(PrefixProperty, AnElementsBitsDependOnItsOwnContributionsOnly) {
  std::mt19937_64 rng(31);
  const size_t longest = 5000;
  for (const TypeBits& ty : kFloatTypes)
    for (int n : {1, 2, 3, 9, 70}) {
      const size_t es = dtype_size(ty.t);
      std::vector<std::byte> all;
      store(ty.t, all, spread_bits(rng, longest, n, ty.mant, ty.exp));
      for (uint32_t divisor : {1u, static_cast<uint32_t>(n)}) {
        std::vector<std::byte> whole(longest * es);
        sum_gathered(ty.t, all.data(), longest, n, divisor, whole.data());
        ASSERT_EQ(integer_road(ty.t, all, longest, longest, n, divisor), whole)
            << to_string(ty.t) << " n=" << n;
        for (size_t length :
             {size_t{1}, size_t{7}, size_t{63}, size_t{64}, size_t{65}, size_t{2049}}) {
          // The first `length` elements of each contribution, side by side.
          std::vector<std::byte> prefix(length * es * static_cast<size_t>(n));
          for (int r = 0; r < n; ++r)
            std::memcpy(prefix.data() + static_cast<size_t>(r) * length * es,
                        all.data() + static_cast<size_t>(r) * longest * es, length * es);
          std::vector<std::byte> part(length * es);
          sum_gathered(ty.t, prefix.data(), length, n, divisor, part.data());
          ASSERT_EQ(0, std::memcmp(part.data(), whole.data(), length * es))
              << to_string(ty.t) << " n=" << n << " length=" << length << " divisor=" << divisor;
          ASSERT_EQ(integer_road(ty.t, all, longest, length, n, divisor), part)
              << to_string(ty.t) << " n=" << n << " length=" << length;
        }
      }
    }
}

// An exact reference for float32 and bfloat16 that shares nothing with the
// code under test: a signed integer in units of 2^-173 (the grid of the
// smallest scale, 2^-171, and a quarter of it), in 32-bit limbs.
struct ExactSum {
  static constexpr int kUnit = -173;
  static constexpr int kLimbs = 12;  // 384 bits: past 2^128 / 2^-173
  int64_t limb[kLimbs] = {};
  // Adds (or subtracts) sig * 2^(e) (e >= kUnit).
  void add(uint64_t sig, int e, bool negative) {
    const int pos = e - kUnit;
    const int k = pos / 32;
    const UInt128 shifted = static_cast<UInt128>(sig) << (pos % 32);
    for (int j = 0; j < 3 && k + j < kLimbs; ++j) {
      const auto part = static_cast<int64_t>((shifted >> (32 * j)) & 0xffffffffu);
      limb[k + j] += negative ? -part : part;
    }
  }
  void add_float(float f, bool negate = false) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const int field = static_cast<int>((u >> 23) & 0xff);
    const uint64_t sig = (u & 0x7fffff) | (field != 0 ? 0x800000u : 0u);
    add(sig, std::max(field, 1) - 150, ((u >> 31) != 0) != negate);
  }
  // Normalized: every limb but the last in [0, 2^32).
  void normalize() {
    for (int j = 0; j + 1 < kLimbs; ++j) {
      const int64_t carry = limb[j] >> 32;  // floor division
      limb[j] -= carry * (int64_t{1} << 32);
      limb[j + 1] += carry;
    }
  }
  bool negative() {
    normalize();
    return limb[kLimbs - 1] < 0;
  }
  void negate() {
    for (int64_t& l : limb) l = -l;
  }
};

// Exactness: an element whose contributions all lie within exact_binades
// (22 for float32) of its largest is the exact sum rounded once; every other
// element is within the documented bound,
//   |result - S| <= ulp(result) / 2 + K g / 2,  g = 2^(E - 172),
// E the exponent field of the element's largest contribution (at least 1),
// K its contributions that are not whole multiples of g.
TEST(Exactness, WithinTheBinadesExactElseWithinTheBound) {
  std::mt19937_64 rng(32);
  int exact_checked = 0;
  int bound_checked = 0;
  for (int n : {2, 3, 8, 33}) {
    const size_t count = 4000;
    const std::vector<uint64_t> bits = spread_bits(rng, count, n, 23, 8);
    std::vector<float> all(bits.size());
    for (size_t i = 0; i < bits.size(); ++i)
      all[i] = std::bit_cast<float>(static_cast<uint32_t>(bits[i]));
    std::vector<float> out(count);
    sum_gathered(DataType::float32, all.data(), count, n, 1, out.data());
    for (size_t i = 0; i < count; ++i) {
      int top = 1;
      int low = 255;
      bool finite = true;
      for (int r = 0; r < n; ++r) {
        const float x = all[static_cast<size_t>(r) * count + i];
        const uint32_t u = std::bit_cast<uint32_t>(x);
        const int field = static_cast<int>((u >> 23) & 0xff);
        finite = finite && field != 255;
        if ((u & 0x7fffffffu) == 0) continue;
        top = std::max(top, std::max(field, 1));
        low = std::min(low, std::max(field, 1));
      }
      ASSERT_TRUE(finite);
      ExactSum s;
      for (int r = 0; r < n; ++r) s.add_float(all[static_cast<size_t>(r) * count + i]);
      if (low == 255 || top - low <= exact_binades(DataType::float32)) {
        // The exact sum has at most 24 + 22 + 6 bits: a double holds it, and
        // the float conversion rounds it once.
        double d = 0;
        for (int r = 0; r < n; ++r) d += all[static_cast<size_t>(r) * count + i];
        const float want = d == 0 ? 0.0f : static_cast<float>(d);
        ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want))
            << "n=" << n << " i=" << i;
        ++exact_checked;
        continue;
      }
      // result - S, against ulp(result) / 2 + K g / 2.
      if (!std::isfinite(out[i])) continue;  // overflow: past the largest finite value
      s.negate();
      s.add_float(out[i]);
      if (s.negative()) s.negate();
      int k = 0;
      const int g = top - 172;  // log2 of the grid
      for (int r = 0; r < n; ++r) {
        const uint32_t u = std::bit_cast<uint32_t>(all[static_cast<size_t>(r) * count + i]);
        const int field = static_cast<int>((u >> 23) & 0xff);
        const uint32_t sig = (u & 0x7fffff) | (field != 0 ? 0x800000u : 0u);
        const int lsb = std::max(field, 1) - 150 + (sig == 0 ? 0 : std::countr_zero(sig));
        if (sig != 0 && lsb < g) ++k;
      }
      // bound - |result - S| >= 0, the bound in the same exact units.
      const int rfield =
          std::max(static_cast<int>((std::bit_cast<uint32_t>(out[i]) >> 23) & 0xff), 1);
      s.negate();
      s.add(1, rfield - 151, false);  // ulp(result) / 2
      for (int j = 0; j < k; ++j) s.add(1, g - 1, false);
      ASSERT_FALSE(s.negative()) << "n=" << n << " i=" << i << " K=" << k;
      ++bound_checked;
    }
  }
  EXPECT_GT(exact_checked, 1000);
  EXPECT_GT(bound_checked, 1000);
}

}  // namespace
}  // namespace chorus::exact
