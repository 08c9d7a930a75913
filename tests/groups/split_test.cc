// Communicator::split and split_by_host over inproc (the ranks are threads);
// tests/multiprocess runs the same checks (support/split_check.h) over shm
// and tcp.
#include "core/check.h"
#include "groups/derive.h"
#include "support/split_check.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace chorus {
namespace {

using testing::run_ranks;

class SplitChecks : public ::testing::TestWithParam<int> {};

TEST_P(SplitChecks, EveryCaseOnEveryRank) {
  std::mutex mu;
  std::vector<std::string> problems;
  run_ranks(GetParam(), [&](Communicator& comm) {
    for (const std::string& p : test::check_splits(comm)) {
      std::lock_guard lock(mu);
      problems.push_back(str_cat("rank ", comm.rank(), ": ", p));
    }
  });
  EXPECT_TRUE(problems.empty()) << problems.front();
}

// 1, 4 and 5 ranks: one rank alone, even groups, and uneven ones.
INSTANTIATE_TEST_SUITE_P(Ranks, SplitChecks, ::testing::Values(1, 4, 5));

TEST(Split, ChildrenAreInprocWithWindows) {
  run_ranks(4, [](Communicator& comm) {
    std::optional<Communicator> child = comm.split(comm.rank() / 2, 0);
    ASSERT_TRUE(child);
    EXPECT_EQ(child->transport(), "inproc");
    Window w = child->window(4 * sizeof(float));
    auto* v = static_cast<float*>(w.data());
    for (int i = 0; i < 4; ++i) v[i] = float(comm.rank());
    CallOptions one_shot;
    one_shot.algorithm = "one_shot";
    child->allreduce(v, v, 4, DataType::float32, ReduceOp::sum, one_shot);
    const float pair = comm.rank() < 2 ? 0 + 1 : 2 + 3;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(v[i], pair);
  });
}

TEST(Split, SplitAgainstAnotherCallIsAMismatch) {
  std::atomic<int> mismatches{0};
  run_ranks(3, [&](Communicator& comm) {
    try {
      if (comm.rank() == 0) {
        comm.split(0, 0);
      } else {
        std::vector<float> v(8, 1.0f);
        comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
      }
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::mismatch) << e.what();
      if (e.code() == ErrorCode::mismatch) ++mismatches;
      return;
    }
    ADD_FAILURE() << "rank " << comm.rank() << " raised nothing";
  });
  EXPECT_EQ(mismatches.load(), 3);
}

TEST(Split, AbortingAChildLeavesTheParentWorking) {
  run_ranks(4, [](Communicator& comm) {
    std::optional<Communicator> child = comm.split(comm.rank() % 2, comm.rank());
    if (comm.rank() == 1) child->abort("done with the odd ranks");
    if (comm.rank() % 2 == 1) {
      try {
        child->barrier();
        ADD_FAILURE() << "the aborted child's barrier succeeded on rank " << comm.rank();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::aborted) << e.what();
        EXPECT_NE(std::string(e.what()).find("done with the odd ranks"), std::string::npos)
            << e.what();
      }
    } else {
      child->barrier();
    }
    int64_t v = comm.rank();
    comm.allreduce(&v, &v, 1, DataType::int64, ReduceOp::sum);
    EXPECT_EQ(v, 0 + 1 + 2 + 3);
  });
}

TEST(Split, ChildCallsHonourTheirTimeout) {
  run_ranks(2, [](Communicator& comm) {
    std::optional<Communicator> child = comm.split(0, 0);
    if (comm.rank() == 0) {
      CallOptions quick;
      quick.timeout = std::chrono::milliseconds(200);
      const auto start = std::chrono::steady_clock::now();
      try {
        child->barrier(quick);
        ADD_FAILURE() << "a barrier that rank 1 never entered succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
    }
    comm.barrier();  // rank 1 waits here until rank 0's child call has failed
  });
}

TEST(Split, ARankThatDiesFailsTheSplitOnTheOthers) {
  std::atomic<int> failed{0};
  try {
    run_ranks(3, [&](Communicator& comm) {
      if (comm.rank() == 2) throw Error(ErrorCode::internal, "rank 2 gives up");
      try {
        comm.split(0, comm.rank());
        ADD_FAILURE() << "split succeeded without rank 2 on rank " << comm.rank();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 2 gives up"), std::string::npos) << e.what();
        ++failed;
      }
    });
    ADD_FAILURE() << "run_ranks did not rethrow rank 2's error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 gives up"), std::string::npos) << e.what();
  }
  EXPECT_EQ(failed.load(), 2);
}

TEST(Split, ArgumentsAreChecked) {
  run_ranks(2, [](Communicator& comm) {
    try {
      detail::derive(comm, {0, 0});
      ADD_FAILURE() << "a member named twice was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("named twice"), std::string::npos) << e.what();
    }
    try {
      detail::derive(comm, {1 - comm.rank(), 5});
      ADD_FAILURE() << "a member outside the communicator was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    }
    // A user's message may not carry chorus's own (negative) tag.
    CallOptions negative;
    negative.tag = -1;
    int32_t v = 0;
    try {
      comm.send(&v, 1, DataType::int32, 1 - comm.rank(), negative);
      ADD_FAILURE() << "a negative tag was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("negative tag"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace chorus
