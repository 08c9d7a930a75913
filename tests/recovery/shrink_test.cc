// Communicator::revoke and shrink over inproc (the ranks are threads; a
// rank dies by returning, which closes its communicator);
// tests/multiprocess runs the same checks (support/shrink_check.h) over shm
// and tcp, where ranks die by SIGKILL.
#include "core/check.h"
#include "support/shrink_check.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace chorus {
namespace {

using testing::run_ranks;

// Runs `check` on 4 ranks and fails with every rank's problems.
void expect_clean(const std::function<std::vector<std::string>(Communicator&)>& check,
                  int nranks = 4) {
  std::mutex mu;
  std::vector<std::string> problems;
  run_ranks(nranks, [&](Communicator& comm) {
    for (const std::string& p : check(comm)) {
      std::lock_guard lock(mu);
      problems.push_back(str_cat("rank ", comm.rank(), ": ", p));
    }
  });
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << all;
}

// (victim, inside a large call)
class ShrinkAfterDeath : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ShrinkAfterDeath, SurvivorsShrinkAndReduceExactly) {
  const auto [victim, inside] = GetParam();
  expect_clean([&](Communicator& comm) {
    return test::check_shrink_after_death(comm, victim, inside, [] {});
  });
}

// Rank 0, a middle rank and the last rank of 4, between calls and inside one.
INSTANTIATE_TEST_SUITE_P(Victims, ShrinkAfterDeath,
                         ::testing::Combine(::testing::Values(0, 1, 3), ::testing::Bool()));

TEST(Shrink, ASecondRankDyingDuringTheShrinkIsLeftOutToo) {
  expect_clean([&](Communicator& comm) {
    return test::check_shrink_after_death(
        comm, 3, false, [] {}, 1);
  });
  // The coordinator itself dies during the shrink.
  expect_clean([&](Communicator& comm) {
    return test::check_shrink_after_death(
        comm, 2, false, [] {}, 0);
  });
}

// The silent rank: the last one, or rank 0, the first coordinator (the
// others then wait for it for the timeout and rank 1 coordinates).
class SilentRank : public ::testing::TestWithParam<int> {};

TEST_P(SilentRank, ALiveRankThatNeverCallsShrinkIsCountedFailed) {
  const int silent = GetParam();
  expect_clean([&](Communicator& comm) {
    std::vector<std::string> problems;
    std::vector<float> v(100, 1.0f);
    comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    if (comm.rank() == silent) {
      // Alive, its communicator open, but silent for longer than the timeout.
      std::this_thread::sleep_for(std::chrono::milliseconds(5000));
      return problems;
    }
    CallOptions quick;
    quick.timeout = std::chrono::milliseconds(300);
    try {
      comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum, quick);
      problems.push_back("an AllReduce without the silent rank returned");
    } catch (const Error&) {
    }
    const auto start = std::chrono::steady_clock::now();
    Communicator next = comm.shrink(std::chrono::milliseconds(1500));
    const auto took = std::chrono::steady_clock::now() - start;
    // The bound: one silent coordinator (the timeout) and a vote window.
    if (took > std::chrono::milliseconds(4500))
      problems.push_back(
          str_cat("the shrink took ", std::chrono::duration<double>(took).count(), " s"));
    std::vector<int> members;
    for (int r = 0; r < comm.size(); ++r)
      if (r != silent) members.push_back(r);
    for (auto& p : test::check_exact_allreduce(next, members, comm.rank())) problems.push_back(p);
    return problems;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, SilentRank, ::testing::Values(0, 3));

TEST(Revoke, FromASecondThreadUnblocksEveryRank) {
  std::mutex mu;
  double worst = 0;
  expect_clean([&](Communicator& comm) {
    double measured = 0;
    auto problems = test::check_revoke_unblocks(comm, 2000, measured);
    std::lock_guard lock(mu);
    worst = std::max(worst, measured);
    return problems;
  });
  std::printf("revoke to the last blocked rank's error: %.2f ms\n", worst);
}

TEST(Revoke, NamesTheRankAndLaterCallsRaiseItToo) {
  expect_clean([&](Communicator& comm) {
    std::vector<std::string> problems;
    if (comm.rank() == 2) comm.revoke();
    float x = 1;
    for (int i = 0; i < 2; ++i) {
      try {
        comm.allreduce(&x, &x, 1, DataType::float32, ReduceOp::sum);
        if (comm.rank() == 2) problems.push_back("a call after revoke() returned");
      } catch (const Error& e) {
        if (e.code() != ErrorCode::revoked)
          problems.push_back(str_cat("raised ", to_string(e.code()), ": ", e.what()));
        if (std::string(e.what()).find("rank 2") == std::string::npos)
          problems.push_back(str_cat("the error does not name rank 2: ", e.what()));
      }
    }
    return problems;
  });
}

TEST(Shrink, OfAWorkingCommunicatorRevokesItAndKeepsEveryRank) {
  expect_clean(
      [&](Communicator& comm) {
        // Before any call: nothing is in flight that the revoke could cut short.
        Communicator next = comm.shrink();
        return test::check_exact_allreduce(next, {0, 1, 2}, comm.rank());
      },
      3);
}

TEST(Shrink, AShrunkCommunicatorShrinksAgainAfterTheNextDeath) {
  expect_clean(
      [&](Communicator& comm) {
        std::vector<std::string> problems;
        std::optional<Communicator> next;
        problems = test::check_shrink_after_death(
            comm, 4, false, [] {}, -1, &next);
        if (comm.rank() == 4) return problems;
        // Old rank 0 (rank 0 of the shrunk one) dies now.
        for (auto& p : test::check_shrink_after_death(*next, 0, false, [] {}))
          problems.push_back(p);
        return problems;
      },
      5);
}

TEST(Shrink, ANegativeTimeoutIsRefused) {
  run_ranks(1, [](Communicator& comm) {
    try {
      comm.shrink(std::chrono::milliseconds(-1));
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("negative timeout"), std::string::npos) << e.what();
    }
  });
}

// Bad input to grow and join_from_env is a clear Error, before anything waits.
void expect_error(const std::function<void()>& f, ErrorCode code, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error (expected one containing '" << text << "')";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Grow, BadInputIsRefusedNamingTheProblem) {
  run_ranks(2, [](Communicator& comm) {
    expect_error([&] { comm.grow(0); }, ErrorCode::invalid_argument, "joining must be >= 1");
    expect_error([&] { comm.grow(1, std::chrono::milliseconds(-5)); }, ErrorCode::invalid_argument,
                 "negative timeout");
    // Threads of one process have no job store for joiners.
    expect_error([&] { comm.grow(1); }, ErrorCode::invalid_argument, "threads of one process");
  });
}

TEST(Grow, JoinFromEnvNamesAMissingOrBadVariable) {
  ::unsetenv("CHORUS_JOIN_GENERATION");
  expect_error([] { join_from_env(); }, ErrorCode::invalid_argument, "CHORUS_JOIN_GENERATION");
  ::setenv("CHORUS_JOIN_GENERATION", "zero", 1);
  expect_error([] { join_from_env(); }, ErrorCode::invalid_argument,
               "CHORUS_JOIN_GENERATION='zero' is not a generation");
  ::setenv("CHORUS_JOIN_GENERATION", "0", 1);
  expect_error([] { join_from_env(); }, ErrorCode::invalid_argument, "an integer >= 1");
  ::unsetenv("CHORUS_JOIN_GENERATION");
}

}  // namespace
}  // namespace chorus
