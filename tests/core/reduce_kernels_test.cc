#include "core/reduce_kernels.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace chorus {
namespace {

TEST(ReduceKernels, HalfRoundTripAndRounding) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f})
    EXPECT_EQ(half_to_float(float_to_half(f)), f);
  // 2049 lies halfway between 2048 and 2050 in float16: ties to even -> 2048.
  EXPECT_EQ(half_to_float(float_to_half(2049.0f)), 2048.0f);
  EXPECT_EQ(half_to_float(float_to_half(2051.0f)), 2052.0f);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
}

TEST(ReduceKernels, BfloatRounding) {
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f)), 1.0f);
  // 257 is halfway between 256 and 258 (8 significant bits): ties to even.
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(257.0f)), 256.0f);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(259.0f)), 260.0f);
  EXPECT_TRUE(
      std::isnan(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(ReduceKernels, HalfSumRoundsThroughFloat) {
  std::vector<uint16_t> a{float_to_half(2048.0f), float_to_half(1.5f)};
  std::vector<uint16_t> b{float_to_half(3.0f), float_to_half(2.25f)};
  std::vector<uint16_t> d(2);
  reduce_into(DataType::float16, ReduceOp::sum, d.data(), a.data(), b.data(), 2);
  EXPECT_EQ(half_to_float(d[0]), 2052.0f);  // 2051 -> ties to even 2052
  EXPECT_EQ(half_to_float(d[1]), 3.75f);
}

// Long enough for the vector path: every lane must round as the scalar path.
TEST(ReduceKernels, HalfVectorPathMatchesScalarRounding) {
  const size_t n = 1003;
  std::vector<uint16_t> a(n), b(n), d(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = float_to_half(static_cast<float>(i) * 1.37f + 2048.0f);
    b[i] = float_to_half(static_cast<float>(i % 17) * 0.51f);
  }
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
    reduce_into(DataType::float16, op, d.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float x = half_to_float(a[i]), y = half_to_float(b[i]);
      const float r = op == ReduceOp::sum    ? x + y
                      : op == ReduceOp::prod ? x * y
                      : op == ReduceOp::min  ? std::min(x, y)
                                             : std::max(x, y);
      ASSERT_EQ(d[i], float_to_half(r)) << "op " << static_cast<int>(op) << " i " << i;
    }
  }
}

TEST(ReduceKernels, IntegerSumAndProdWrap) {
  std::vector<int8_t> a{120, -128}, b{10, -1}, d(2);
  reduce_into(DataType::int8, ReduceOp::sum, d.data(), a.data(), b.data(), 2);
  EXPECT_EQ(d[0], static_cast<int8_t>(130 - 256));
  EXPECT_EQ(d[1], 127);
  std::vector<uint8_t> x{200}, y{2}, z(1);
  reduce_into(DataType::uint8, ReduceOp::prod, z.data(), x.data(), y.data(), 1);
  EXPECT_EQ(z[0], 144);  // 400 mod 256
  std::vector<int64_t> big{std::numeric_limits<int64_t>::max()}, one{1}, out(1);
  reduce_into(DataType::int64, ReduceOp::sum, out.data(), big.data(), one.data(), 1);
  EXPECT_EQ(out[0], std::numeric_limits<int64_t>::min());
}

TEST(ReduceKernels, MinMaxEveryTypeAndOddLengths) {
  // Lengths around vector widths catch remainder-loop bugs.
  for (size_t n : {1u, 7u, 31u, 33u, 1000u}) {
    std::vector<double> a(n), b(n), d(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = static_cast<double>(i % 5);
      b[i] = static_cast<double>((i * 3) % 7);
    }
    reduce_into(DataType::float64, ReduceOp::max, d.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], std::max(a[i], b[i]));
    reduce_into(DataType::float64, ReduceOp::min, d.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], std::min(a[i], b[i]));
    std::vector<uint32_t> u(n), v(n), w(n);
    for (size_t i = 0; i < n; ++i) {
      u[i] = static_cast<uint32_t>(i * 2654435761u);
      v[i] = static_cast<uint32_t>(i * 40503u);
    }
    reduce_into(DataType::uint32, ReduceOp::sum, w.data(), u.data(), v.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(w[i], static_cast<uint32_t>(u[i] + v[i]));
  }
}

TEST(ReduceKernels, InPlaceAccumulate) {
  std::vector<float> a{1, 2, 3}, b{4, 5, 6};
  reduce_into(DataType::float32, ReduceOp::prod, a.data(), a.data(), b.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{4, 10, 18}));
}

TEST(ReduceKernels, DivideByLargeRankCount) {
  std::vector<int8_t> v{100, -100};
  divide_by(DataType::int8, v.data(), 2, 200);  // 200 does not fit int8
  EXPECT_EQ(v, (std::vector<int8_t>{0, 0}));
  std::vector<uint16_t> h{float_to_half(3.0f)};
  divide_by(DataType::float16, h.data(), 1, 2);
  EXPECT_EQ(half_to_float(h[0]), 1.5f);
  EXPECT_THROW(divide_by(static_cast<DataType>(99), v.data(), 1, 2), Error);
}

}  // namespace
}  // namespace chorus

namespace chorus {
namespace {

// min and max of floats are IEEE 754-2019's minimum and maximum: commutative
// and associative also with NaNs and zeros of both signs, so any order of the
// ranks gives the same bits. Every pair and triple of a set of special and
// ordinary values, in every float type, through the vector paths (17
// elements) and the scalar tails.
TEST(ReduceKernels, FloatMinMaxAreOrderIndependentWithNanAndSignedZeros) {
  const float values[] = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          2.5f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  const size_t k = std::size(values);
  for (DataType t : {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64})
    for (ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
      const size_t es = dtype_size(t);
      auto encode = [&](float v, std::byte* out) {
        if (t == DataType::float16) {
          const uint16_t h = float_to_half(v);
          std::memcpy(out, &h, 2);
        } else if (t == DataType::bfloat16) {
          const uint16_t b = float_to_bfloat16(v);
          std::memcpy(out, &b, 2);
        } else if (t == DataType::float32) {
          std::memcpy(out, &v, 4);
        } else {
          const double d = v;
          std::memcpy(out, &d, 8);
        }
      };
      // Columns: every (a, b) pair, 17 copies each so that vectors run.
      constexpr size_t kCopies = 17;
      const size_t n = k * k * kCopies;
      std::vector<std::byte> a(n * es), b(n * es), ab(n * es), ba(n * es);
      for (size_t i = 0; i < k; ++i)
        for (size_t j = 0; j < k; ++j)
          for (size_t c = 0; c < kCopies; ++c) {
            const size_t at = ((i * k + j) * kCopies + c) * es;
            encode(values[i], a.data() + at);
            encode(values[j], b.data() + at);
          }
      reduce_into(t, op, ab.data(), a.data(), b.data(), n);
      reduce_into(t, op, ba.data(), b.data(), a.data(), n);
      ASSERT_EQ(ab, ba) << to_string(t) << " " << to_string(op) << " is not commutative";
      // (a op b) op c == a op (b op c), reusing the pair results.
      std::vector<std::byte> c_col(n * es), left(n * es), bc(n * es), right(n * es);
      for (size_t x = 0; x < n; ++x) encode(values[(x / kCopies) % 3 + 5], c_col.data() + x * es);
      reduce_into(t, op, left.data(), ab.data(), c_col.data(), n);
      reduce_into(t, op, bc.data(), b.data(), c_col.data(), n);
      reduce_into(t, op, right.data(), a.data(), bc.data(), n);
      ASSERT_EQ(left, right) << to_string(t) << " " << to_string(op) << " is not associative";
      // The signed zeros: min(+0, -0) = -0, max(-0, +0) = +0; a NaN wins.
      std::byte z[2][8] = {}, r[8] = {};
      encode(0.0f, z[0]);
      encode(-0.0f, z[1]);
      reduce_into(t, op, r, z[0], z[1], 1);
      EXPECT_EQ(std::memcmp(r, z[op == ReduceOp::min ? 1 : 0], es), 0) << to_string(t);
    }
}

}  // namespace
}  // namespace chorus
