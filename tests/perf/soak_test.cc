// chorus-soak's library part: the call sequence every rank derives, and short
// soaks over the in-process transport (clean, with one corrupted element,
// with a time limit).
#include "perf/soak.h"
#include "algorithms/algorithm.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace chorus::perf {
namespace {

bool same(const SoakCall& a, const SoakCall& b) {
  return describe(a) == describe(b) && a.max_outstanding == b.max_outstanding &&
         a.wait_order == b.wait_order && a.rank_salt == b.rank_salt;
}

TEST(SoakCall, DependsOnSeedAndIndexOnly) {
  constexpr int n = 4;
  constexpr size_t kMax = size_t{1} << 20;
  size_t differ = 0;
  for (size_t i = 0; i < 200; ++i) {
    EXPECT_TRUE(same(soak_call(7, i, n, kMax), soak_call(7, i, n, kMax))) << i;
    differ += same(soak_call(7, i, n, kMax), soak_call(8, i, n, kMax)) ? 0 : 1;
  }
  EXPECT_GT(differ, 190u);
  // A call replayed alone is the call of the sequence.
  EXPECT_EQ(describe(soak_call(7, 123, n, kMax)).rfind("call 123: ", 0), 0u);
}

// Over many calls every kind, dtype, op, placement and shape shows up, every
// buffer stays within max_bytes, and every named algorithm serves its call.
TEST(SoakCall, CoversTheSpaceWithinBounds) {
  constexpr int n = 3;
  constexpr size_t kMax = 64 * 1024;
  std::set<int> kinds, types, ops;
  std::set<size_t> counts;
  size_t in_place = 0, async_p2p = 0, named = 0, automatic = 0;
  std::set<int> async_kinds;
  for (size_t i = 0; i < 5000; ++i) {
    const SoakCall c = soak_call(1, i, n, kMax);
    kinds.insert(static_cast<int>(c.kind));
    types.insert(static_cast<int>(c.type));
    ops.insert(static_cast<int>(c.op));
    in_place += c.in_place ? 1 : 0;
    if (c.kind == SoakKind::send_recv) {
      async_p2p += c.async ? 1 : 0;
      ASSERT_FALSE(c.messages.empty());
      for (const SoakMessage& m : c.messages) {
        EXPECT_NE(m.from, m.to);
        EXPECT_TRUE(m.from >= 0 && m.from < n && m.to >= 0 && m.to < n);
        EXPECT_LE(m.count * dtype_size(m.type), kMax);
      }
      continue;
    }
    if (c.async) async_kinds.insert(static_cast<int>(c.kind));
    EXPECT_TRUE(c.kind != SoakKind::alltoall || !c.in_place) << describe(c);
    EXPECT_TRUE(c.root >= 0 && c.root < n);
    if (c.kind == SoakKind::barrier) {
      EXPECT_EQ(c.count, 0u);
    } else {
      counts.insert(c.count);
      const bool blocks = per_rank_blocks(*parse_collective(to_string(c.kind)));
      EXPECT_LE(c.count * dtype_size(c.type) * (blocks ? n : 1), kMax) << describe(c);
    }
    if (c.algorithm.empty()) {
      ++automatic;
      continue;
    }
    ++named;
    const Collective coll =
        c.kind == SoakKind::barrier ? Collective::barrier : *parse_collective(to_string(c.kind));
    const Algorithm* a = find_algorithm(coll, c.algorithm);
    ASSERT_NE(a, nullptr) << describe(c);
    const size_t es = c.kind == SoakKind::barrier ? 1 : dtype_size(c.type);
    EXPECT_TRUE(
        supported_everywhere(*a, {coll, n, 0, c.count, es, c.root, 0, c.op == ReduceOp::avg}))
        << describe(c);
  }
  EXPECT_EQ(kinds.size(), static_cast<size_t>(kSoakKindCount));
  EXPECT_EQ(types.size(), static_cast<size_t>(kDataTypeCount));
  EXPECT_EQ(ops.size(), static_cast<size_t>(kReduceOpCount));
  for (size_t c : {size_t{0}, size_t{1}, size_t{2}, size_t{4}, size_t{5}, size_t{1021}})
    EXPECT_TRUE(counts.contains(c)) << c;
  EXPECT_GT(*counts.rbegin(), size_t{4096});
  EXPECT_GT(in_place, 1000u);
  // Every collective is drawn asynchronous too (send_recv counts apart).
  EXPECT_EQ(async_kinds.size(), static_cast<size_t>(kSoakKindCount - 1));
  EXPECT_GT(async_p2p, 100u);
  EXPECT_GT(named, 2000u);
  EXPECT_GT(automatic, 500u);
}

TEST(SoakCall, OneRankHasNoPointToPoint) {
  for (size_t i = 0; i < 1000; ++i) EXPECT_NE(soak_call(3, i, 1, 4096).kind, SoakKind::send_recv);
}

// Runs `o` on n in-process ranks; returns every rank's report.
std::vector<SoakReport> soak(int n, const SoakOptions& o) {
  std::vector<SoakReport> reports(static_cast<size_t>(n));
  testing::run_ranks(n, [&](Communicator& comm) {
    reports[static_cast<size_t>(comm.rank())] = run_soak(comm, o);
  });
  return reports;
}

TEST(RunSoak, CleanRunCountsEveryCallAndFindsNothingWrong) {
  for (int n : {1, 3, 4}) {
    SoakOptions o;
    o.calls = 150;
    o.max_bytes = 32 * 1024;
    o.seed = 11;
    for (const SoakReport& r : soak(n, o)) {
      EXPECT_TRUE(r.ok()) << "N=" << n << " rank " << r.rank << ": "
                          << (r.problems.empty() ? "" : r.problems.front());
      EXPECT_TRUE(r.all_ranks);
      EXPECT_EQ(r.calls, 150u);
      EXPECT_EQ(r.total().calls, 150u);
      EXPECT_EQ(r.nranks, n);
      EXPECT_EQ(r.transport, "inproc");
      EXPECT_TRUE(r.problems.empty());
    }
  }
}

// One flipped element on the last rank: every rank's report says exactly one
// wrong call with one wrong element, and the last rank names it.
TEST(RunSoak, ACorruptedElementIsCountedOnce) {
  SoakOptions o;
  o.calls = 40;
  o.max_bytes = 4096;
  o.corrupt_one = true;
  const std::vector<SoakReport> reports = soak(3, o);
  for (const SoakReport& r : reports) {
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.total().wrong_calls, 1u);
    EXPECT_EQ(r.total().wrong_elements, 1u);
    EXPECT_EQ(r.total().failures, 0u);
  }
  ASSERT_EQ(reports.back().problems.size(), 1u);
  EXPECT_NE(reports.back().problems[0].find("1 of "), std::string::npos)
      << reports.back().problems[0];
  EXPECT_NE(reports.back().problems[0].find("rank 2: call "), std::string::npos);
  EXPECT_TRUE(reports[0].problems.empty());
}

// The ranks agree when to stop, and stopping early is no failure.
TEST(RunSoak, TimeLimitStopsEveryRankAfterTheSameCall) {
  SoakOptions o;
  o.calls = 1'000'000;
  o.max_bytes = 1024;
  o.time_limit = std::chrono::milliseconds(200);
  const std::vector<SoakReport> reports = soak(3, o);
  for (const SoakReport& r : reports) {
    EXPECT_TRUE(r.ok());
    EXPECT_TRUE(r.time_limit_hit);
    EXPECT_LT(r.calls, o.calls);
    EXPECT_EQ(r.calls, reports[0].calls);
  }
}

// A replayed stretch of the sequence is the same calls.
TEST(RunSoak, FirstStartsTheSequenceAtThatCall) {
  SoakOptions o;
  o.calls = 5;
  o.first = 1000;
  o.corrupt_one = true;  // so that the last rank names the first checked call
  const std::vector<SoakReport> reports = soak(2, o);
  EXPECT_EQ(reports[0].calls, 5u);
  ASSERT_FALSE(reports[1].problems.empty());
  EXPECT_NE(reports[1].problems[0].find("call 100"), std::string::npos) << reports[1].problems[0];
}

}  // namespace
}  // namespace chorus::perf
