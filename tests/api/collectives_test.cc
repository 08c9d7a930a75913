// Every registered algorithm, run for real on in-process ranks over the
// foundation grid: N in {1,2,3,4,5,7,8,13,16} x counts {0, 1, N-1, N+1} x
// every dtype x every op x in-place and out-of-place (x roots), each call
// twice on one communicator, plus 1000003 elements on a dtype/op slice; the
// floating sums and averages again in deterministic mode.
#include "algorithms/algorithm.h"
#include "support/grid.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus {
namespace {

struct GridParam {
  const Algorithm* algo;
  int nranks;
  // Each rank's host (testing::run_ranks(host_of, ...)); empty: one host.
  std::vector<int> hosts = {};
};

std::string param_name(const ::testing::TestParamInfo<GridParam>& info) {
  std::string name = std::string(to_string(info.param.algo->collective)) + "_" +
                     std::string(info.param.algo->name) + "_N" + std::to_string(info.param.nranks);
  if (!info.param.hosts.empty()) {
    name += "_hosts";
    for (int h : info.param.hosts) name += std::to_string(h);
  }
  for (char& ch : name)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<GridParam> all_params() {
  std::vector<GridParam> out;
  for (const Algorithm& a : all_algorithms()) {
    if (a.collective == Collective::barrier) continue;
#ifdef CHORUS_REDUCED_GRIDS  // sanitizer builds: fewer rank counts, no large case
    for (int n : {1, 2, 3, 4, 5, 8}) {
#else
    for (int n : {1, 2, 3, 4, 5, 7, 8, 13, 16}) {
#endif
      // An algorithm that declines a rank count as a whole (recursive
      // doubling AllGather off powers of two) is not gridded there; that it
      // declines with a reason is checked below.
      // In-process ranks share windows, as the communicators do.
      CollectiveSpec spec{a.collective, n, 0, 1, 4, 0};
      spec.windows = true;
      if (supports(a, spec)) out.push_back({&a, n});
    }
    // Algorithms that need several hosts (hier_*) run on threads playing
    // hosts: even, uneven (3 + 1, 1 + 3), many small ones, interleaved.
    CollectiveSpec one_host{a.collective, 4, 0, 1, 4, 0};
    one_host.windows = true;
    if (supports(a, one_host)) continue;
    for (std::vector<int> hosts : std::vector<std::vector<int>>{
#ifdef CHORUS_REDUCED_GRIDS
             {0, 0, 1, 1},
             {0, 0, 0, 1},
             {0, 1, 0, 1, 2},
#else
             {0, 0, 1, 1},
             {0, 0, 0, 1},
             {0, 1, 1, 1},
             {0, 1, 0, 1, 2},
             {0, 0, 1, 1, 2, 2, 3, 3},
             {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3},
#endif
         }) {
      CollectiveSpec spec = one_host;
      spec.nranks = static_cast<int>(hosts.size());
      spec.host_of = std::make_shared<const std::vector<int>>(hosts);
      if (supports(a, spec)) out.push_back({&a, spec.nranks, std::move(hosts)});
    }
  }
  return out;
}

class CollectiveGrid : public ::testing::TestWithParam<GridParam> {};

// The grid's large case (1000003 elements) writes its output with
// non-temporal stores (exec/executor.h), the small ones through the caches:
// both write modes meet every algorithm.
class StreamBytes {
 public:
  StreamBytes() { ::setenv("CHORUS_STREAM_BYTES", "1048576", 1); }
  ~StreamBytes() { ::unsetenv("CHORUS_STREAM_BYTES"); }
  StreamBytes(const StreamBytes&) = delete;
  StreamBytes& operator=(const StreamBytes&) = delete;
};

TEST_P(CollectiveGrid, MatchesReferenceExactly) {
  const GridParam p = GetParam();
  const StreamBytes stream_bytes;
#ifdef CHORUS_REDUCED_GRIDS
  constexpr bool kLarge = false;
#else
  constexpr bool kLarge = true;
#endif
  auto cases = test::grid_cases(p.algo->collective, p.nranks, /*include_large=*/kLarge);
  // One-sided algorithms also over buffers in shared windows.
  if (test::needs_windows(*p.algo)) cases = test::with_window_buffers(cases);
  // Every reducing algorithm also as the integer pass of deterministic calls
  // (the whole road: the algorithm is named).
  cases = test::with_deterministic(cases);
  std::vector<std::string> errors;
  std::mutex mu;
  size_t skipped = 0;
  test::ReferenceCache cache;
  auto run = [&](const std::function<void(Communicator&)>& body) {
    if (p.hosts.empty())
      testing::run_ranks(p.nranks, body);
    else
      testing::run_ranks(p.hosts, body);
  };
  run([&](Communicator& comm) {
    std::vector<test::GridCase> served;
    for (const auto& c : cases) {
      if (supports(*p.algo, test::case_spec(comm, c))) served.push_back(c);
    }
    auto e = test::run_grid(comm, served, std::string(p.algo->name), &cache);
    std::lock_guard lock(mu);
    errors.insert(errors.end(), e.begin(), e.end());
    if (comm.rank() == 0) skipped = cases.size() - served.size();
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  // An algorithm may decline a case only with a reason; the grid still has to
  // exercise it somewhere.
  EXPECT_LT(skipped, cases.size()) << "algorithm supports no case of its grid";
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, CollectiveGrid, ::testing::ValuesIn(all_params()),
                         param_name);

// Declining is a value with a reason, never an empty "no".
TEST(Support, DeclinedCasesNameAReason) {
  for (const Algorithm& a : all_algorithms())
    for (int n = 1; n <= 17; ++n)
      for (size_t count : {size_t{0}, size_t{1}, size_t{1031}}) {
        const Support s = supports(a, {a.collective, n, n - 1, count, 4, 0});
        if (!s) {
          EXPECT_FALSE(s.reason.empty()) << a.name << " N=" << n << " count=" << count;
        }
      }
}

TEST(Barrier, EveryRankWaitsForTheLast) {
  for (int n : {1, 2, 3, 5, 8, 13}) {
    std::atomic<int> arrived{0};
    std::atomic<bool> early{false};
    testing::run_ranks(n, [&](Communicator& comm) {
      for (int round = 1; round <= 3; ++round) {
        if (comm.rank() == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        arrived.fetch_add(1);
        comm.barrier();
        if (arrived.load() < round * n) early = true;
        comm.barrier();
      }
    });
    EXPECT_FALSE(early.load()) << "a rank left the barrier before all arrived, N=" << n;
  }
}

}  // namespace
}  // namespace chorus
