// The verifier's grid: every algorithm of the registry, proven symbolically for
// N = 1..64, 96, 127, 128, 255, 256 and 1000 ranks and counts {0, 1, N-1, N,
// N+1, 3N+2, 1000003}, in place and out of place (verify() checks both), and
// for rooted collectives with root 0 and root N-1. Algorithms are picked up
// from all_algorithms(), so a new one is proven as soon as it is registered.
// A case an algorithm declines is skipped, and must come with a reason.
#include "algorithms/algorithm.h"
#include "verify/verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace chorus {
namespace {

struct GridParam {
  const Algorithm* algo;
  int nranks;
  size_t count;
};

std::string param_name(const ::testing::TestParamInfo<GridParam>& info) {
  std::string algo(info.param.algo->name);
  if (!algo.empty()) algo[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(algo[0])));
  std::string name = std::string(to_string(info.param.algo->collective)) + "_" + algo + "_N" +
                     std::to_string(info.param.nranks) + "_Count" +
                     std::to_string(info.param.count);
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<int> grid_ranks() {
  std::vector<int> ns;
  for (int n = 1; n <= 64; ++n) ns.push_back(n);
  for (int n : {96, 127, 128, 255, 256, 1000}) ns.push_back(n);
  return ns;
}

std::vector<size_t> grid_counts(int nranks) {
  const auto n = static_cast<size_t>(nranks);
  std::vector<size_t> c{0, 1, n - 1, n, n + 1, 3 * n + 2, 1000003};
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

std::vector<GridParam> all_params() {
  std::vector<GridParam> out;
  for (const Algorithm& a : all_algorithms())
    for (int n : grid_ranks()) {
      if (a.collective == Collective::barrier) {
        out.push_back({&a, n, 0});  // the barrier has no count
        continue;
      }
      for (size_t c : grid_counts(n)) out.push_back({&a, n, c});
    }
  return out;
}

class VerifyGrid : public ::testing::TestWithParam<GridParam> {};

TEST_P(VerifyGrid, ProvesTheCollective) {
  const GridParam p = GetParam();
  std::vector<int> roots{0};
  if ((p.algo->collective == Collective::broadcast || p.algo->collective == Collective::reduce) &&
      p.nranks > 1)
    roots.push_back(p.nranks - 1);
  size_t declined = 0;
  for (int root : roots) {
    const CollectiveSpec spec{p.algo->collective, p.nranks, 0, p.count, 4, root};
    const VerifyResult r = verify(*p.algo, spec);
    if (!r.supported) {
      EXPECT_FALSE(r.reason.empty()) << "declined without a reason, root " << root;
      ++declined;
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.error->message;
    // Verification covers the in-place layout wherever the collective has one.
    const bool has_in_place = p.algo->collective != Collective::alltoall &&
                              p.algo->collective != Collective::barrier;
    EXPECT_EQ(r.in_place_checked, has_in_place);
    ASSERT_EQ(r.ranks.size(), static_cast<size_t>(p.nranks));
  }
  if (declined == roots.size()) GTEST_SKIP() << "declined by supports()";
}

INSTANTIATE_TEST_SUITE_P(Registry, VerifyGrid, ::testing::ValuesIn(all_params()), param_name);

}  // namespace
}  // namespace chorus
