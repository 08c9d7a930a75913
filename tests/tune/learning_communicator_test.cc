// The learner inside a communicator (in-process ranks, CHORUS_TUNER=learn):
// with each rank's timings injected through the test hook, the ranks explore
// the same candidates in the same order, agree on the winner from the
// maximum over ranks even where one rank's own times favour another, and
// every result stays exact throughout. CHORUS_TUNER=off and model, an
// algorithm named by the call, and CHORUS_ALGO keep the learner out.
#include "core/check.h"
#include "engine/communicator_impl.h"
#include "tune/learner.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

Learner* learner_of(Communicator& comm) {
  return detail::impl_of(comm).selector().learner();
}

constexpr size_t kCount = 16384;  // 64 KiB of float32: size class 16

// `calls` AllReduces of kCount floats; each result checked exactly.
void allreduce_calls(Communicator& comm, int calls, const CallOptions& options = {}) {
  std::vector<float> v(kCount);
  const int n = comm.size();
  for (int i = 0; i < calls; ++i) {
    for (size_t k = 0; k < kCount; ++k) v[k] = static_cast<float>(comm.rank() + i + int(k % 7));
    comm.allreduce(v.data(), v.data(), kCount, DataType::float32, ReduceOp::sum, options);
    for (size_t k = 0; k < kCount; ++k) {
      const float expect = static_cast<float>(n * (n - 1) / 2 + n * (i + int(k % 7)));
      if (v[k] != expect) {
        ADD_FAILURE() << "rank " << comm.rank() << " call " << i << " element " << k << ": " << v[k]
                      << " != " << expect;
        return;
      }
    }
  }
}

TEST(LearningCommunicator, RanksAgreeOnTheWinnerOfTheSlowestRanksTimes) {
  ScopedEnv tuner("CHORUS_TUNER", "learn");
  std::mutex mu;
  std::vector<std::string> winners(3), expected(3);
  std::vector<std::vector<std::string>> candidates(3);
  testing::run_ranks(3, [&](Communicator& comm) {
    Learner* learner = learner_of(comm);
    ASSERT_NE(learner, nullptr);
    const int rank = comm.rank();
    // Candidate 0 is the model's pick. Rank 1 finds it fastest; on rank 0 it
    // is slow: its maximum over ranks (4 ms) loses to candidate 1's (3 ms).
    learner->set_timing_hook([learner, rank](const LearnKey& key, const Algorithm& a, double) {
      const auto& cands = learner->classes().at(key).candidates();
      if (a.name == cands[0].algorithm->name) return rank == 0 ? 4e-3 : 1e-3;
      if (a.name == cands[1].algorithm->name) return rank == 1 ? 3e-3 : 2.5e-3;
      return 5e-3;
    });
    allreduce_calls(comm, 150);
    ASSERT_EQ(learner->classes().size(), 1u);
    const LearnClass& c = learner->classes().begin()->second;
    EXPECT_EQ(c.key().size_class, 16);
    EXPECT_EQ(c.phase(), LearnPhase::decided);
    ASSERT_GE(c.candidates().size(), 2u);
    std::lock_guard lock(mu);
    winners[static_cast<size_t>(rank)] = c.current().name;
    expected[static_cast<size_t>(rank)] = c.candidates()[1].algorithm->name;
    for (const LearnCandidate& k : c.candidates())
      candidates[static_cast<size_t>(rank)].push_back(std::string(k.algorithm->name));
    // The learned pick is what the communicator now runs.
    CollectiveSpec spec{Collective::allreduce, comm.size(), rank, kCount, 4, 0};
    spec.windows = true;  // in-process ranks share windows
    EXPECT_EQ(detail::impl_of(comm)
                  .current_algorithm(spec, DataType::float32, ReduceOp::sum, CallOptions{})
                  .name,
              c.current().name);
  });
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(candidates[r], candidates[0]) << "rank " << r;
    EXPECT_EQ(winners[r], expected[0]) << "rank " << r;
  }
}

TEST(LearningCommunicator, ADriftingWinnerIsExploredAgainInTheCommunicator) {
  ScopedEnv tuner("CHORUS_TUNER", "learn");
  std::mutex mu;
  std::vector<std::string> first(2), second(2);
  testing::run_ranks(2, [&](Communicator& comm) {
    Learner* learner = learner_of(comm);
    ASSERT_NE(learner, nullptr);
    bool slow_first = false;  // flips: the first winner turns slow
    learner->set_timing_hook(
        [&slow_first, learner](const LearnKey& key, const Algorithm& a, double) {
          const auto& cands = learner->classes().at(key).candidates();
          const bool is_first = a.name == cands[0].algorithm->name;
          if (is_first) return slow_first ? 9e-3 : 1e-3;
          return 2e-3;
        });
    allreduce_calls(comm, 120);
    const LearnClass& c = learner->classes().begin()->second;
    ASSERT_EQ(c.phase(), LearnPhase::decided);
    const std::string was(c.current().name);
    slow_first = true;
    allreduce_calls(comm, 400);
    EXPECT_EQ(c.explorations(), 2);
    std::lock_guard lock(mu);
    first[static_cast<size_t>(comm.rank())] = was;
    second[static_cast<size_t>(comm.rank())] = c.current().name;
  });
  EXPECT_EQ(first[0], first[1]);
  EXPECT_EQ(second[0], second[1]);
  EXPECT_NE(first[0], second[0]);
}

// Calls kCount floats until this rank's class is due for an agreement (the
// next call starts with the tuner's exchange); returns the calls made.
int calls_until_agreement(Communicator& comm) {
  Learner* learner = learner_of(comm);
  std::vector<float> v(kCount, 1.0f);
  for (int i = 0; i < 200; ++i) {
    if (!learner->classes().empty() && learner->classes().begin()->second.due() != Agreement::none)
      return i;
    comm.allreduce(v.data(), v.data(), kCount, DataType::float32, ReduceOp::sum);
  }
  ADD_FAILURE() << "no agreement due in 200 calls";
  return 200;
}

// The tuner's agreement is a call like any other: it keeps the fault
// contract. A rank that calls another collective there is a mismatch on
// both; a rank that never comes is the waiting rank's per-call timeout; an
// abort from another thread ends it.
TEST(LearningCommunicator, TheAgreementKeepsTheFaultContract) {
  ScopedEnv tuner("CHORUS_TUNER", "learn");
  std::vector<ErrorCode> codes(2, ErrorCode::internal);
  testing::run_ranks(2, [&](Communicator& comm) {
    calls_until_agreement(comm);
    std::vector<float> v(kCount, 1.0f), all(2 * kCount);
    try {
      if (comm.rank() == 0)
        comm.allreduce(v.data(), v.data(), kCount, DataType::float32, ReduceOp::sum);
      else
        comm.allgather(v.data(), all.data(), kCount, DataType::float32);
      ADD_FAILURE() << "rank " << comm.rank() << ": no error";
    } catch (const Error& e) {
      codes[static_cast<size_t>(comm.rank())] = e.code();
    }
  });
  EXPECT_EQ(codes[0], ErrorCode::mismatch);
  EXPECT_EQ(codes[1], ErrorCode::mismatch);

  std::vector<std::string> what(2);
  std::atomic<bool> done{false};
  testing::run_ranks(2, [&](Communicator& comm) {
    calls_until_agreement(comm);
    if (comm.rank() == 1) {  // alive, but never comes to the agreement
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    struct Done {
      std::atomic<bool>& d;
      ~Done() { d = true; }
    } mark{done};
    CallOptions brief;
    brief.timeout = std::chrono::milliseconds(200);
    std::vector<float> v(kCount, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.allreduce(v.data(), v.data(), kCount, DataType::float32, ReduceOp::sum, brief);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
      what[0] = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  });
  EXPECT_NE(what[0].find("tuner agreement"), std::string::npos) << what[0];

  std::vector<ErrorCode> aborted(2, ErrorCode::internal);
  testing::run_ranks(2, [&](Communicator& comm) {
    calls_until_agreement(comm);
    std::thread aborter;
    if (comm.rank() == 1) {
      // Rank 1 stays out of the agreement and aborts: rank 0, waiting in it,
      // raises aborted.
      aborter = std::thread([&comm] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        comm.abort("stop the job");
      });
      aborter.join();
      aborted[1] = ErrorCode::aborted;
      return;
    }
    CallOptions patient;
    patient.timeout = std::chrono::minutes(10);
    std::vector<float> v(kCount, 1.0f);
    try {
      comm.allreduce(v.data(), v.data(), kCount, DataType::float32, ReduceOp::sum, patient);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      aborted[0] = e.code();
    }
  });
  EXPECT_EQ(aborted[0], ErrorCode::aborted);
}

TEST(LearningCommunicator, OffModelNamedAndAlgoKeepTheLearnerOut) {
  {
    ScopedEnv tuner("CHORUS_TUNER", "off");
    testing::run_ranks(2, [](Communicator& comm) {
      EXPECT_EQ(learner_of(comm), nullptr);
      EXPECT_EQ(detail::impl_of(comm).selector().tuner(), nullptr);
      allreduce_calls(comm, 3);
    });
  }
  {
    ScopedEnv tuner("CHORUS_TUNER", "model");
    testing::run_ranks(2, [](Communicator& comm) {
      EXPECT_EQ(learner_of(comm), nullptr);
      EXPECT_NE(detail::impl_of(comm).selector().tuner(), nullptr);
    });
  }
  {
    // In-process ranks learn only when asked: tests stay deterministic.
    testing::run_ranks(2, [](Communicator& comm) { EXPECT_EQ(learner_of(comm), nullptr); });
  }
  ScopedEnv tuner("CHORUS_TUNER", "learn");
  testing::run_ranks(2, [](Communicator& comm) {
    ASSERT_NE(learner_of(comm), nullptr);
    CallOptions named;
    named.algorithm = "ring";
    allreduce_calls(comm, 60, named);
    EXPECT_TRUE(learner_of(comm)->classes().empty());
    allreduce_calls(comm, 1);
    EXPECT_EQ(learner_of(comm)->classes().size(), 1u);
  });
  ScopedEnv algo("CHORUS_ALGO", "allreduce=halving_doubling");
  testing::run_ranks(2, [](Communicator& comm) {
    allreduce_calls(comm, 60);
    EXPECT_TRUE(learner_of(comm)->classes().empty());
    CollectiveSpec spec{Collective::allreduce, comm.size(), comm.rank(), kCount, 4, 0};
    spec.windows = true;
    EXPECT_EQ(detail::impl_of(comm)
                  .current_algorithm(spec, DataType::float32, ReduceOp::sum, CallOptions{})
                  .name,
              "halving_doubling");
    // Another collective, not named by CHORUS_ALGO, still learns.
    std::vector<float> in(64, 1.0f), out(128);
    comm.allgather(in.data(), out.data(), in.size(), DataType::float32);
    EXPECT_EQ(learner_of(comm)->classes().size(), 1u);
  });
}

}  // namespace
}  // namespace chorus
