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
