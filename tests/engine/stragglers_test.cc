// Straggler attribution (src/engine/stragglers.h, Communicator::stragglers):
// the attribution on made-up arrivals and clocks, and over inproc ranks a
// rank that sleeps before each call is named by every rank, and the flight
// record carries the verdicts. Over shm and tcp: tests/python/test_stragglers.py.
#include "engine/stragglers.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using detail::attribute_stragglers;
using detail::CallVerdict;
using detail::RankArrivals;
using testing::run_ranks;

constexpr int64_t kMs = 1'000'000;

// Four ranks, 20 calls 10 ms apart; rank 2 arrives `late` after the others,
// and each rank's clock is off rank 0's by -offsets[r] (offset_ns corrects it).
std::vector<RankArrivals> made_up(int64_t late, int64_t error_ns) {
  const int64_t offsets[4] = {0, 7 * kMs, -3 * kMs, 1'000 * kMs};
  std::vector<RankArrivals> ranks(4);
  for (int r = 0; r < 4; ++r) {
    ranks[r].offset_ns = offsets[r];
    ranks[r].error_ns = r == 0 ? 0 : error_ns;
    for (uint32_t k = 1; k <= 20; ++k) {
      const int64_t true_arrival = k * 10 * kMs + (r == 2 ? late : r * 1000);
      ranks[r].calls.push_back({k, true_arrival - offsets[r]});
    }
  }
  return ranks;
}

TEST(Stragglers, NamesTheLateRankOnRankZerosClock) {
  std::vector<CallVerdict> verdicts;
  const auto stats = attribute_stragglers(made_up(5 * kMs, 20'000), 0, &verdicts);
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_EQ(stats[2].last_count, 20);
  EXPECT_EQ(stats[2].calls, 20);
  EXPECT_NEAR(stats[2].mean_late_s, 5e-3, 1e-9);
  EXPECT_NEAR(stats[2].p90_late_s, 5e-3, 1e-9);
  EXPECT_NEAR(stats[2].wait_share, 1.0, 1e-12);
  EXPECT_NEAR(stats[2].error_s, 40e-6, 1e-12);
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(stats[r].last_count, 0);
    EXPECT_EQ(stats[r].wait_share, 0);
  }
  ASSERT_EQ(verdicts.size(), 20u);
  for (const CallVerdict& v : verdicts) {
    EXPECT_EQ(v.last_rank, 2);
    EXPECT_EQ(v.late_ns, 5 * kMs);
    EXPECT_TRUE(v.attributed);
  }
}

TEST(Stragglers, LatenessWithinTheErrorIsNotAttributed) {
  // Rank 2 is 15 us late, within the 0 + 20 us error of rank 0's offset
  // (the first arriver) and its own.
  std::vector<CallVerdict> verdicts;
  const auto stats = attribute_stragglers(made_up(15'000, 20'000), 0, &verdicts);
  for (const auto& s : stats) {
    EXPECT_EQ(s.last_count, 0) << s.rank;
    EXPECT_EQ(s.wait_share, 0) << s.rank;
  }
  for (const CallVerdict& v : verdicts) EXPECT_FALSE(v.attributed);
  EXPECT_NEAR(stats[2].mean_late_s, 15e-6, 1e-9);  // reported, not blamed
}

TEST(Stragglers, WindowTakesTheLastCallsEveryRankHas) {
  auto ranks = made_up(5 * kMs, 0);
  ranks[1].calls.erase(ranks[1].calls.begin(), ranks[1].calls.begin() + 5);  // 6..20
  std::vector<CallVerdict> verdicts;
  EXPECT_EQ(attribute_stragglers(ranks, 0, &verdicts)[0].calls, 15);
  verdicts.clear();
  EXPECT_EQ(attribute_stragglers(ranks, 4, &verdicts)[0].calls, 4);
  ASSERT_EQ(verdicts.size(), 4u);
  EXPECT_EQ(verdicts.front().number, 17u);
}

// Every rank's report over inproc ranks, rank `slow` sleeping `delay` before
// each of `calls` AllReduces (slow < 0: none sleeps).
std::vector<std::vector<StragglerStats>> run(int nranks, int slow, std::chrono::milliseconds delay,
                                             int calls, std::vector<std::string>* records) {
  std::vector<std::vector<StragglerStats>> reports(static_cast<size_t>(nranks));
  std::mutex mu;
  run_ranks(nranks, [&](Communicator& comm) {
    float x = 1;
    for (int i = 0; i < calls; ++i) {
      if (comm.rank() == slow) std::this_thread::sleep_for(delay);
      comm.allreduce(&x, &x, 1, DataType::float32, ReduceOp::sum);
    }
    auto report = comm.stragglers();
    const std::string record = comm.flight_record();
    std::lock_guard lock(mu);
    reports[static_cast<size_t>(comm.rank())] = std::move(report);
    if (records != nullptr) records->push_back(record);
  });
  return reports;
}

TEST(Stragglers, InprocSleepingRankIsNamedOnEveryRank) {
  constexpr int kCalls = 20;
  std::vector<std::string> records;
  const auto reports = run(4, 2, std::chrono::milliseconds(20), kCalls, &records);
  for (const auto& report : reports) {
    ASSERT_EQ(report.size(), 4u);
    int named = 0;
    for (const auto& s : report)
      if (s.last_count > report[static_cast<size_t>(named)].last_count) named = s.rank;
    EXPECT_EQ(named, 2);
    EXPECT_EQ(report[2].calls, kCalls);
    // Last in nearly every call, and late by about the delay (at least half
    // of it, whatever the host's load).
    EXPECT_GE(report[2].last_count, kCalls - 2);
    EXPECT_GE(report[2].mean_late_s, 0.010);
    EXPECT_GE(report[2].wait_share, 0.5);
    // Every rank computes the same report.
    for (size_t r = 0; r < 4; ++r) {
      EXPECT_EQ(report[r].last_count, reports[0][r].last_count);
      EXPECT_EQ(report[r].mean_late_s, reports[0][r].mean_late_s);
    }
  }
  for (const std::string& record : records)
    EXPECT_NE(record.find("\"last_rank\": 2"), std::string::npos) << record;
}

TEST(Stragglers, WithoutADelayNoRankIsBlamedForTheDelay) {
  const auto reports = run(4, -1, {}, 20, nullptr);
  for (const auto& s : reports[0]) {
    // No rank carries anything like the 20 ms of the test above; the shares
    // attributed beyond the error never exceed the whole.
    EXPECT_LT(s.mean_late_s, 0.010) << s.rank;
  }
  double shares = 0;
  for (const auto& s : reports[0]) shares += s.wait_share;
  EXPECT_LE(shares, 1.0 + 1e-9);
}

}  // namespace
}  // namespace chorus
