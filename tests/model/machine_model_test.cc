// The fitted machine model: rate curves interpolate as documented, and every
// fit recovers the parameters of synthetic measurements that the model itself
// generated.
#include "model/machine_model.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace chorus {
namespace {

TEST(RateCurve, InterpolatesInLogSizeAndHoldsBeyondItsEnds) {
  const RateCurve c{{{1024, 1e-10}, {4096, 3e-10}}};
  EXPECT_DOUBLE_EQ(c.at(8), 1e-10);
  EXPECT_DOUBLE_EQ(c.at(1024), 1e-10);
  EXPECT_DOUBLE_EQ(c.at(2048), 2e-10);  // halfway in log2
  EXPECT_DOUBLE_EQ(c.at(4096), 3e-10);
  EXPECT_DOUBLE_EQ(c.at(1e9), 3e-10);
  EXPECT_TRUE(std::isnan(RateCurve{}.at(100)));
  LinkParams plain("x", 1e-6, 2e9);
  EXPECT_DOUBLE_EQ(plain.per_byte(12345), 0.5e-9);
  LinkParams fitted = plain;
  fitted.curve = c;
  EXPECT_DOUBLE_EQ(fitted.beta_at(2048), 1 / 2e-10);
}

// The ping-pong a link of the model answers: alpha + b * per_byte(b).
std::vector<Sample> pingpong(const LinkParams& link, const std::vector<double>& sizes) {
  std::vector<Sample> s;
  for (double b : sizes) s.push_back({b, link.alpha + b * link.per_byte(b)});
  return s;
}

TEST(ModelFit, LinkRecoversAlphaAndTheCurveFromItsOwnPingPongs) {
  // Constant per-byte time up to 4 KiB (cache), faster at 256 KiB, slower
  // when streaming at 16 MiB.
  LinkParams truth("shm", 0.4e-6, 1);
  truth.curve = {{{4096, 1 / 20e9}, {262144, 1 / 30e9}, {16777216, 1 / 6e9}}};
  const std::vector<double> sizes = {8, 64, 512, 4096, 32768, 262144, 2097152, 16777216, 67108864};
  const LinkParams fit = fit_link_model("shm", pingpong(truth, sizes));
  EXPECT_EQ(fit.name, "shm");
  EXPECT_NEAR(fit.alpha, truth.alpha, 1e-9 * truth.alpha);
  for (double b : sizes)
    EXPECT_NEAR(fit.per_byte(b), truth.per_byte(b), 1e-9 * truth.per_byte(b)) << b;
  EXPECT_NEAR(fit.beta, 6e9, 6e9 * 1e-9);  // the streaming rate
  // Samples in any order give the same fit.
  std::vector<Sample> shuffled = pingpong(truth, sizes);
  std::swap(shuffled[0], shuffled[5]);
  EXPECT_EQ(fit_link_model("shm", shuffled).curve, fit.curve);
}

TEST(ModelFit, LinkNeedsTwoSmallSizesAndDistinctPositiveSamples) {
  EXPECT_THROW(fit_link_model("x", std::vector<Sample>{{8, 1e-6}, {1 << 20, 1e-4}}), Error);
  EXPECT_THROW(fit_link_model("x", std::vector<Sample>{{8, 1e-6}, {8, 2e-6}, {64, 1e-6}}), Error);
  EXPECT_THROW(fit_link_model("x", std::vector<Sample>{{0, 1e-6}, {8, 2e-6}, {64, 1e-6}}), Error);
  EXPECT_THROW(fit_link_model("x", std::vector<Sample>{{8, -1}, {16, 2e-6}, {64, 1e-6}}), Error);
}

TEST(ModelFit, NoisySmallSizesKeepAlphaAndRatesNonNegative) {
  // Times that shrink with size: the slope is clamped to zero, alpha stays
  // the weighted mean.
  const LinkParams fit = fit_link_model(
      "x", std::vector<Sample>{{8, 2e-6}, {64, 1.9e-6}, {512, 1.8e-6}, {1 << 20, 1e-6}});
  EXPECT_GT(fit.alpha, 1.7e-6);
  EXPECT_LT(fit.alpha, 2.1e-6);
  for (const RatePoint& p : fit.curve.points) EXPECT_GT(p.s_per_byte, 0) << p.bytes;
}

TEST(ModelFit, RateCurveIsSecondsPerByteAtEachSize) {
  const RateCurve c = fit_rate_curve(std::vector<Sample>{{1 << 20, 1e-4}, {4096, 1e-7}});
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0].bytes, 4096);
  EXPECT_DOUBLE_EQ(c.points[0].s_per_byte, 1e-7 / 4096);
  EXPECT_DOUBLE_EQ(c.points[1].s_per_byte, 1e-4 / (1 << 20));
}

TEST(ModelFit, MemoryBandwidthFromTheConcurrentCopyProbe) {
  // The model: K ranks each copy b bytes (2b of traffic) through a memory of
  // bandwidth W, each alone at time `alone`: together they take
  // max(ceil(K / cores) alone, 2 K b / W).
  const double b = 32 << 20, alone = 4e-3, w = 15e9;
  for (int k : {2, 3, 4}) {
    const double together = std::max(std::ceil(k / 2.0) * alone, 2 * k * b / w);
    EXPECT_NEAR(fit_memory(b, k, 2, alone, together), w, w * 1e-9) << k;
  }
  // Copies that together take no longer than the CPUs explain: not limited.
  EXPECT_EQ(fit_memory(b, 2, 2, alone, alone * 1.02), 0);
  EXPECT_EQ(fit_memory(b, 4, 2, alone, 2 * alone), 0);
  EXPECT_EQ(fit_memory(b, 1, 2, alone, 10 * alone), 0);  // one rank shares with no one
}

TEST(ModelFit, HalfDuplexWhenBothDirectionsTakeTurns) {
  EXPECT_TRUE(fit_half_duplex(1e-3, 2e-3));
  EXPECT_TRUE(fit_half_duplex(1e-3, 1.6e-3));
  EXPECT_FALSE(fit_half_duplex(1e-3, 1.05e-3));
  EXPECT_FALSE(fit_half_duplex(1e-3, 1.4e-3));
}

TEST(ModelFit, HalfDuplexFromTheSizeWhereExchangesStartTakingTurns) {
  // The model's exchange: alpha + b c(b) up to 64 KiB (both ways overlap),
  // alpha + 2 b c(b) from 256 KiB on.
  LinkParams link("shm", 0.2e-6, 1);
  link.curve = {{{4096, 1e-10}}};
  std::vector<Sample> ex;
  for (double b : {16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0})
    ex.push_back({b, link.alpha + (b >= 262144 ? 2 : 1) * b * link.per_byte(b)});
  fit_half_duplex(link, ex);
  EXPECT_TRUE(link.half_duplex);
  EXPECT_EQ(link.half_duplex_from, 262144);
  EXPECT_FALSE(link.takes_turns(65536));
  EXPECT_TRUE(link.takes_turns(262144));
  // Every size taking turns: from 0. None: not half duplex.
  for (Sample& s : ex) s.seconds = link.alpha + 2 * s.bytes * link.per_byte(s.bytes);
  fit_half_duplex(link, ex);
  EXPECT_TRUE(link.half_duplex);
  EXPECT_EQ(link.half_duplex_from, 0);
  for (Sample& s : ex) s.seconds = link.alpha + s.bytes * link.per_byte(s.bytes);
  fit_half_duplex(link, ex);
  EXPECT_FALSE(link.half_duplex);
}

TEST(ComputeModel, AKernelFallsBackToItsTypesSum) {
  ComputeModel m;
  m.kernels["float32.sum"] = {{{4096, 1e-10}}};
  m.kernels["float32.max"] = {{{4096, 2e-10}}};
  EXPECT_EQ(m.kernel(DataType::float32, ReduceOp::max)->points[0].s_per_byte, 2e-10);
  EXPECT_EQ(m.kernel(DataType::float32, ReduceOp::prod)->points[0].s_per_byte, 1e-10);
  EXPECT_EQ(m.kernel(DataType::int8, ReduceOp::sum), nullptr);
  EXPECT_EQ(kernel_key(DataType::bfloat16, ReduceOp::avg), "bfloat16.avg");
}

}  // namespace
}  // namespace chorus
