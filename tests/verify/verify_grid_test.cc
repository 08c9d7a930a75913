// The verifier's grid: every algorithm of the registry, proven symbolically for
// N = 1..64, 96, 127, 128, 255, 256 and 1000 ranks and counts {0, 1, N-1, N,
// N+1, 3N+2, 1000003}, in place and out of place (verify() checks both), and
// for rooted collectives with root 0 and root N-1. Algorithms are picked up
// from all_algorithms(), so a new one is proven as soon as it is registered.
// A rank count that an algorithm declines as a whole (recursive_doubling
// AllGather off powers of two) is not gridded; declining a single case must
// come with a reason (checked here and in collectives_test's
// Support.DeclinedCasesNameAReason). The one-sided algorithms, which decline
// every N >= 2 here (no shared windows in these specs), are gridded with
// windows in verify_one_sided_test.cc.
//
// Each parametrized test is one process under ctest, and a process costs tens
// of milliseconds to start with thousands of tests registered; so the small
// rank counts run all their counts in one test (allreduce_Ring_N7_AllCounts),
// and only the large ones, which take seconds each, get one test per count
// (allreduce_Ring_N1000_Count1000003) so that ctest -j spreads them.
#include "algorithms/algorithm.h"
#include "analysis/verify_algorithm.h"
#include "schedule/rank_math.h"
#include "verify/verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace chorus {
namespace {

constexpr size_t kAllCounts = static_cast<size_t>(-1);
// Rank counts from which every count is a test of its own.
constexpr int kSplitFrom = 255;

struct GridParam {
  const Algorithm* algo;
  int nranks;
  size_t count;  // kAllCounts: every count of the grid
};

// How gtest (and so ctest's test list) shows a parameter.
void PrintTo(const GridParam& p, std::ostream* os) {
  *os << to_string(p.algo->collective) << "/" << p.algo->name << " N=" << p.nranks << " count=";
  if (p.count == kAllCounts)
    *os << "all";
  else
    *os << p.count;
}

std::string param_name(const ::testing::TestParamInfo<GridParam>& info) {
  std::string algo(info.param.algo->name);
  if (!algo.empty()) algo[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(algo[0])));
  std::string name = std::string(to_string(info.param.algo->collective)) + "_" + algo + "_N" +
                     std::to_string(info.param.nranks) +
                     (info.param.count == kAllCounts ? std::string("_AllCounts")
                                                     : "_Count" + std::to_string(info.param.count));
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<int> grid_ranks() {
  std::vector<int> ns;
#ifdef CHORUS_REDUCED_GRIDS
  // Sanitizer builds: the same algorithms and counts at fewer rank counts.
  for (int n = 1; n <= 17; ++n) ns.push_back(n);
  for (int n : {31, 32, 33, 64}) ns.push_back(n);
#else
  for (int n = 1; n <= 64; ++n) ns.push_back(n);
  for (int n : {96, 127, 128, 255, 256, 1000}) ns.push_back(n);
#endif
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
      if (!supports(a, {a.collective, n, 0, 1, 4, 0})) continue;
      if (a.collective == Collective::barrier) {
        out.push_back({&a, n, 0});  // the barrier has no count
      } else if (n < kSplitFrom) {
        out.push_back({&a, n, kAllCounts});
      } else {
        for (size_t c : grid_counts(n)) out.push_back({&a, n, c});
      }
    }
  return out;
}

class VerifyGrid : public ::testing::TestWithParam<GridParam> {};

// Verifies one count at every root; returns how many roots declined it.
size_t prove(const Algorithm& algo, int nranks, size_t count) {
  std::vector<int> roots{0};
  if (rooted(algo.collective) && nranks > 1) roots.push_back(nranks - 1);
  size_t declined = 0;
  for (int root : roots) {
    const CollectiveSpec spec{algo.collective, nranks, 0, count, 4, root};
    const VerifyResult r = verify(algo, spec);
    if (!r.supported) {
      EXPECT_FALSE(r.reason.empty())
          << "declined without a reason: count " << count << " root " << root;
      ++declined;
      continue;
    }
    EXPECT_TRUE(r.ok()) << r.error->message;
    if (!r.ok()) continue;
    // Verification covers the in-place layout wherever the collective has one.
    const bool has_in_place =
        algo.collective != Collective::alltoall && algo.collective != Collective::barrier;
    EXPECT_EQ(r.in_place_checked, has_in_place);
    EXPECT_EQ(r.ranks.size(), static_cast<size_t>(nranks));
  }
  return declined == roots.size() ? 1 : 0;
}

TEST_P(VerifyGrid, ProvesTheCollective) {
  const GridParam p = GetParam();
  const std::vector<size_t> counts =
      p.count == kAllCounts ? grid_counts(p.nranks) : std::vector<size_t>{p.count};
  size_t declined = 0;
  for (size_t c : counts) declined += prove(*p.algo, p.nranks, c);
  // The rank count is supported (all_params), so some count must be proven.
  EXPECT_LT(declined, counts.size()) << "every count was declined";
}

INSTANTIATE_TEST_SUITE_P(Registry, VerifyGrid, ::testing::ValuesIn(all_params()), param_name);

// The algorithms that need several hosts (hier_*), which decline every spec
// above (no hosts), proven on host layouts: at each N, hosts of K
// consecutive ranks for K in {2, 3, 4, 8} below N, and uneven or
// interleaved layouts, every count, both roots.
struct HostsParam {
  const Algorithm* algo;
  int nranks;
  std::vector<std::vector<int>> layouts;  // each rank's host, per layout
};

void PrintTo(const HostsParam& p, std::ostream* os) {
  *os << to_string(p.algo->collective) << "/" << p.algo->name << " N=" << p.nranks << " ("
      << p.layouts.size() << " layouts)";
}

bool needs_hosts(const Algorithm& a) {
  CollectiveSpec spec{a.collective, 4, 0, 1, 4, 0};
  if (supports(a, spec)) return false;
  spec.host_of = std::make_shared<const std::vector<int>>(consecutive_hosts(4, 2));
  return static_cast<bool>(supports(a, spec));
}

std::vector<HostsParam> hosts_params() {
  std::vector<HostsParam> out;
  const std::vector<std::vector<int>> uneven = {
      {0, 0, 0, 1},          {0, 1, 1, 1},          {0, 0, 1, 2, 2, 2}, {0, 1, 0, 1},
      {0, 1, 2, 0, 1, 2, 0}, {0, 0, 0, 0, 0, 1, 2}, {3, 3, 1, 1, 1}};
  for (const Algorithm& a : all_algorithms()) {
    if (!needs_hosts(a)) continue;
#ifdef CHORUS_REDUCED_GRIDS
    const std::vector<int> ns = {3, 4, 5, 8, 13, 16};
#else
    const std::vector<int> ns = {3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 31, 32, 33, 64, 96};
#endif
    for (int n : ns) {
      HostsParam p{&a, n, {}};
      for (int k : {2, 3, 4, 8})
        if (k < n) p.layouts.push_back(consecutive_hosts(n, k));
      for (const std::vector<int>& l : uneven)
        if (static_cast<int>(l.size()) == n) p.layouts.push_back(l);
      out.push_back(std::move(p));
    }
  }
  return out;
}

class HostsGrid : public ::testing::TestWithParam<HostsParam> {};

TEST_P(HostsGrid, ProvesTheCollectiveOnEveryLayout) {
  const HostsParam& p = GetParam();
  for (const std::vector<int>& layout : p.layouts)
    for (size_t count : grid_counts(p.nranks)) {
      std::vector<int> roots{0, p.nranks - 1};
      if (!rooted(p.algo->collective)) roots = {0};
      for (int root : roots) {
        CollectiveSpec spec{p.algo->collective, p.nranks, 0, count, 4, root};
        spec.host_of = std::make_shared<const std::vector<int>>(layout);
        std::ostringstream where;
        where << "hosts";
        for (int h : layout) where << ' ' << h;
        where << ", count " << count << ", root " << root;
        const VerifyResult r = verify(*p.algo, spec);
        ASSERT_TRUE(r.supported) << where.str() << ": " << r.reason;
        EXPECT_TRUE(r.ok()) << where.str() << ": " << (r.ok() ? "" : r.error->message);
        EXPECT_TRUE(r.in_place_checked) << where.str();
      }
    }
}

std::string hosts_param_name(const ::testing::TestParamInfo<HostsParam>& param_info) {
  std::string name = std::string(to_string(param_info.param.algo->collective)) + "_" +
                     std::string(param_info.param.algo->name) + "_N" +
                     std::to_string(param_info.param.nranks);
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Registry, HostsGrid, ::testing::ValuesIn(hosts_params()),
                         hosts_param_name);

// Without hosts, or with one host, or with every rank alone on its host,
// they decline, and say why.
TEST(HostsGrid, DeclinesWithoutSeveralHostsAndSaysWhy) {
  size_t checked = 0;
  for (const Algorithm& a : all_algorithms()) {
    if (!needs_hosts(a)) continue;
    ++checked;
    CollectiveSpec spec{a.collective, 4, 0, 16, 4, 0};
    Support s = supports(a, spec);
    EXPECT_FALSE(s);
    EXPECT_NE(s.reason.find("hosts"), std::string::npos) << s.reason;
    spec.host_of = std::make_shared<const std::vector<int>>(std::vector<int>{7, 7, 7, 7});
    s = supports(a, spec);
    EXPECT_FALSE(s);
    EXPECT_NE(s.reason.find("on one"), std::string::npos) << s.reason;
    spec.host_of = std::make_shared<const std::vector<int>>(std::vector<int>{0, 1, 2, 3});
    s = supports(a, spec);
    EXPECT_FALSE(s);
    EXPECT_NE(s.reason.find("host of its own"), std::string::npos) << s.reason;
    spec.host_of = std::make_shared<const std::vector<int>>(std::vector<int>{0, 0, 1});
    s = supports(a, spec);
    EXPECT_FALSE(s);
    EXPECT_NE(s.reason.find("3 ranks, not 4"), std::string::npos) << s.reason;
  }
  EXPECT_EQ(checked, 5u) << "hier_two_level of four collectives and hier_leader";
}

}  // namespace
}  // namespace chorus
