// Cost model tests: unit parsing and printing, a link's one-sided alpha, the
// seed's lower bounds, and the closed forms' seed values at the points where
// they coincide.
#include "model/cost_model.h"
#include "algorithms/algorithm.h"
#include "model/units.h"

#include <chorus/error.h>

#include <gtest/gtest.h>

#include <cmath>

namespace chorus {
namespace {

TEST(Units, Times) {
  EXPECT_DOUBLE_EQ(parse_time("2us"), 2e-6);
  EXPECT_DOUBLE_EQ(parse_time("1.5ms"), 1.5e-3);
  EXPECT_DOUBLE_EQ(parse_time("300ns"), 300e-9);
  EXPECT_DOUBLE_EQ(parse_time("0.25s"), 0.25);
  EXPECT_DOUBLE_EQ(parse_time("3"), 3);
  EXPECT_DOUBLE_EQ(parse_time("0.1ns"), 0.1e-9);
  for (const char* bad : {"", "us", "2 us", "2sec", "-1us", "2uss", "nan", "inf"})
    EXPECT_THROW(parse_time(bad), Error) << bad;
  try {
    parse_time("5parsecs", "--alpha");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("--alpha"), std::string::npos);
  }
}

TEST(Units, Bandwidths) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("25GB/s"), 25e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100MB/s"), 100e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("12.5KB/s"), 12.5e3);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1e9B/s"), 1e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1e9"), 1e9);
  for (const char* bad : {"", "0GB/s", "-1GB/s", "25GiB/s", "25Gb/s", "GB/s", "25 GB/s"})
    EXPECT_THROW(parse_bandwidth(bad), Error) << bad;
}

TEST(Units, Sizes) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("4K"), 4096u);
  EXPECT_EQ(parse_size("64M"), 64u << 20);
  EXPECT_EQ(parse_size("1G"), 1u << 30);
  EXPECT_EQ(parse_size("4KB"), 4096u);
  EXPECT_EQ(parse_size("0"), 0u);
  for (const char* bad : {"", "K", "4X", "-4", "1.5K", "99999999999999999999", "20000000T"})
    EXPECT_THROW(parse_size(bad), Error) << bad;
}

TEST(Units, Printing) {
  EXPECT_EQ(format_size(4096), "4K");
  EXPECT_EQ(format_size(3000), "3000");
  EXPECT_EQ(format_size(64u << 20), "64M");
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_time(2e-6), "2us");
  EXPECT_EQ(format_time(1.5e-3), "1.5ms");
  EXPECT_EQ(format_time(3e-9), "3ns");
  EXPECT_EQ(format_time(2), "2s");
  EXPECT_EQ(format_bandwidth(25e9), "25GB/s");
}

TEST(LinkParams, FlagAlphaStandsForAlphaInOneSidedOpsOnlyWhenFitted) {
  LinkParams l("shm", 1e-6, 1e9);
  EXPECT_FALSE(l.flag_alpha_fitted());  // the seeds' model: none
  EXPECT_EQ(l.one_sided_alpha(), 1e-6);
  l.flag_alpha = 1e-7;
  EXPECT_TRUE(l.flag_alpha_fitted());
  EXPECT_EQ(l.one_sided_alpha(), 1e-7);
  l.flag_alpha = 0;  // a fitted zero is still fitted
  EXPECT_EQ(l.one_sided_alpha(), 0);
  for (double unfitted : {-1.0, std::nan("")}) {
    l.flag_alpha = unfitted;
    EXPECT_FALSE(l.flag_alpha_fitted()) << unfitted;
    EXPECT_EQ(l.one_sided_alpha(), 1e-6) << unfitted;
  }
  EXPECT_FALSE(LinkParams{}.flag_alpha_fitted());
}

TEST(LowerBound, SeedFormulas) {
  const CostParams p{2e-6, 25e9, 0, 1};
  const double m = 1 << 20;
  LowerBound ar = lower_bound(Collective::allreduce, 8, m, p);
  EXPECT_DOUBLE_EQ(ar.latency, 3 * 2e-6);
  EXPECT_DOUBLE_EQ(ar.bandwidth, 7 * m / (8 * 25e9));
  EXPECT_DOUBLE_EQ(ar.combined(), ar.bandwidth);
  // ceil(log2 N) for non-powers of two; small M: latency dominates.
  LowerBound small = lower_bound(Collective::allgather, 5, 8, p);
  EXPECT_DOUBLE_EQ(small.latency, 3 * 2e-6);
  EXPECT_DOUBLE_EQ(small.combined(), small.latency);
  EXPECT_DOUBLE_EQ(lower_bound(Collective::broadcast, 8, m, p).bandwidth, m / 25e9);
  EXPECT_DOUBLE_EQ(lower_bound(Collective::reduce, 8, m, p).bandwidth, m / 25e9);
  EXPECT_DOUBLE_EQ(lower_bound(Collective::reduce_scatter, 4, m, p).bandwidth, 3 * m / (4 * 25e9));
  // Two ports halve the bandwidth bound.
  const CostParams p2{2e-6, 25e9, 0, 2};
  EXPECT_DOUBLE_EQ(lower_bound(Collective::allreduce, 8, m, p2).bandwidth, 7 * m / (8 * 2 * 25e9));
  EXPECT_DOUBLE_EQ(lower_bound(Collective::barrier, 8, 0, p).combined(), 3 * 2e-6);
  EXPECT_DOUBLE_EQ(lower_bound(Collective::allreduce, 1, m, p).combined(), 0);
}

// Only the bandwidth bound holds for every closed form: the seed's latency
// bound counts one message per rank per alpha, while in the model alpha is
// latency that a rank's messages overlap (docs/ALGORITHMS.md), so a flat
// fan-out, e.g. binomial broadcast at N = 3, can beat ceil(log2 N) alpha.
TEST(LowerBound, EveryClosedFormIsAtLeastTheBandwidthBound) {
  const CostParams p{2e-6, 25e9, 1e-10, 1};
  for (const Algorithm& a : all_algorithms())
    for (const ClosedForm& f : a.costs)
      for (int n : {2, 3, 8, 13, 64})
        for (double m : {8.0 * n, 65536.0 * n, 64e6 * n}) {
          const CostParams pp = f.ports ? CostParams{p.alpha, p.beta, p.gamma, f.ports} : p;
          const Prediction t = f.at(n, m, pp);
          if (!t.ok) continue;
          EXPECT_GE(t.seconds * (1 + 1e-12), lower_bound(a.collective, n, m, pp).bandwidth)
              << to_string(a.collective) << "(" << a.name << ") N=" << n << " M=" << m;
        }
}

Prediction closed_form(Collective c, std::string_view name, int n, double m, const CostParams& p) {
  const Algorithm* a = find_algorithm(c, name);
  if (a == nullptr) ADD_FAILURE() << "no algorithm " << name;
  return a ? chorus::closed_form(*a, n, m, p) : Prediction::none("no such algorithm");
}

TEST(ClosedForm, SeedValues) {
  const CostParams p{2e-6, 25e9, 0, 1};
  const double m = 1 << 20;
  // Ring AllReduce: 2(N-1) alpha + 2(N-1)/N M/beta.
  EXPECT_DOUBLE_EQ(closed_form(Collective::allreduce, "ring", 8, m, p).seconds,
                   14 * 2e-6 + 2.0 * 7 / 8 * m / 25e9);
  // Binomial broadcast, N a power of two: log2 N (alpha + M/beta).
  EXPECT_DOUBLE_EQ(closed_form(Collective::broadcast, "binomial", 16, m, p).seconds,
                   4 * (2e-6 + m / 25e9));
  // N = 5: the first subtree is a single rank, so 2 alpha + 3 M/beta.
  EXPECT_DOUBLE_EQ(closed_form(Collective::broadcast, "binomial", 5, m, p).seconds,
                   2 * 2e-6 + 3 * m / 25e9);
  EXPECT_FALSE(closed_form(Collective::reduce, "binomial", 6, m, p).ok);
}

}  // namespace
}  // namespace chorus
