// The progress engine (src/engine/progress.h): outstanding work advances
// while its caller computes, Works cross threads, done() never waits, plans
// run many times, and failures reach work the progress thread is driving.
#include "engine/communicator_impl.h"
#include "engine/progress.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using testing::run_ranks;

// Sets CHORUS_PROGRESS for the communicators made in a scope.
class ScopedProgress {
 public:
  explicit ScopedProgress(const char* mode) { ::setenv("CHORUS_PROGRESS", mode, 1); }
  ~ScopedProgress() { ::unsetenv("CHORUS_PROGRESS"); }
};

// Spins on the Work's completion flag with no chorus call, for at most
// `limit`: whether it completed while this thread was busy elsewhere.
bool completes_without_calls(const Work& w, std::chrono::seconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < give_up) {
    if (w.is_completed()) return true;
    std::this_thread::yield();
  }
  return w.is_completed();
}

TEST(Engine, AnOutstandingAllReduceCompletesWhileTheCallerComputes) {
  ScopedProgress mode("thread");
  run_ranks(3, [](Communicator& comm) {
    const size_t n = 1 << 20;
    std::vector<float> v(n, float(comm.rank() + 1));
    Work w = comm.allreduce_async(v.data(), v.data(), n, DataType::float32, ReduceOp::sum);
    // No chorus call until the flag is up: only the progress thread moves it.
    EXPECT_TRUE(completes_without_calls(w, std::chrono::seconds(60)))
        << "rank " << comm.rank() << ": the AllReduce did not complete during the loop";
    w.wait();
    for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], 6.0f) << "element " << i;
  });
}

TEST(Engine, CallerModeAdvancesOnlyInsideCalls) {
  ScopedProgress mode("caller");
  run_ranks(2, [](Communicator& comm) {
    std::vector<float> v(1 << 16, 1.0f);
    Work w = comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    // Nothing drives this rank's executor between calls: the flag stays down.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(w.is_completed());
    w.wait();
    EXPECT_TRUE(w.is_completed());
    EXPECT_EQ(v[0], 2.0f);
    EXPECT_EQ(detail::impl_of(comm).progress_rounds(), 0u);
  });
}

TEST(Engine, BlockingCallsNeverWakeTheProgressThread) {
  ScopedProgress mode("thread");
  run_ranks(2, [](Communicator& comm) {
    std::vector<float> v(1024, 1.0f);
    for (int i = 0; i < 200; ++i)
      comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    EXPECT_EQ(detail::impl_of(comm).progress_rounds(), 0u);
  });
}

TEST(Engine, DoneWithNothingReadyReturnsAndWorkCompletesWithoutWait) {
  ScopedProgress mode("thread");
  run_ranks(2, [](Communicator& comm) {
    std::vector<float> v(1 << 18, 1.0f);
    Work w = comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    // The MPI habit: test in the compute loop, never wait.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!w.done() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    ASSERT_TRUE(w.done());
    EXPECT_EQ(v[12345], 2.0f);
  });
}

TEST(Engine, SubmittedOnOneThreadWaitedOnAnother) {
  ScopedProgress mode("thread");
  run_ranks(3, [](Communicator& comm) {
    constexpr int kCalls = 50;
    std::vector<std::vector<int32_t>> bufs(kCalls, std::vector<int32_t>(5000));
    std::vector<std::optional<Work>> works(kCalls);
    std::atomic<int> submitted{0};
    std::thread submitter([&] {
      for (int i = 0; i < kCalls; ++i) {
        for (size_t k = 0; k < bufs[i].size(); ++k)
          bufs[i][k] = static_cast<int32_t>(comm.rank() * 1000 + i + static_cast<int>(k));
        works[i] = comm.allreduce_async(bufs[i].data(), bufs[i].data(), bufs[i].size(),
                                        DataType::int32, ReduceOp::sum);
        submitted.store(i + 1, std::memory_order_release);
      }
    });
    for (int i = 0; i < kCalls; ++i) {
      while (submitted.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      works[i]->wait();
      const int n = comm.size();
      for (size_t k = 0; k < bufs[i].size(); k += 97)
        ASSERT_EQ(bufs[i][k], 1000 * (n * (n - 1) / 2) + n * (i + static_cast<int>(k)));
    }
    submitter.join();
  });
}

// 10,000 calls: asynchronous collectives and plans, on a parent and two split
// children, interleaved alike on every rank, each result checked exactly.
TEST(Engine, TenThousandMixedCallsAndPlansAcrossThreeCommunicators) {
  ScopedProgress mode("thread");
  run_ranks(4, [](Communicator& parent) {
    std::optional<Communicator> half = parent.split(parent.rank() % 2, parent.rank());
    std::optional<Communicator> all = parent.split(0, -parent.rank());
    ASSERT_TRUE(half && all);
    Communicator* comms[3] = {&parent, &*half, &*all};
    constexpr int kWindow = 8;
    struct Slot {
      std::vector<int64_t> buf;
      std::optional<Work> work;
      Communicator* comm = nullptr;
      int64_t expect = 0;
    };
    std::vector<Slot> slots(kWindow);
    std::vector<int64_t> plan_buf(333);
    Plan plan = parent.prepare(Call::allreduce(plan_buf.data(), plan_buf.data(), plan_buf.size(),
                                               DataType::int64, ReduceOp::sum));
    std::mt19937 pick(7);  // the same sequence on every rank
    int calls = 0;
    auto settle = [&](Slot& s) {
      if (!s.work) return;
      s.work->wait();
      for (size_t k = 0; k < s.buf.size(); k += 7) ASSERT_EQ(s.buf[k], s.expect);
      s.work.reset();
    };
    for (int i = 0; calls < 10000; ++i) {
      Slot& s = slots[static_cast<size_t>(i % kWindow)];
      settle(s);
      const unsigned what = pick() % 4;
      if (what == 3) {
        // The plan: started on the parent, waited at once (its buffers are fixed).
        std::fill(plan_buf.begin(), plan_buf.end(), int64_t{parent.rank()} + i);
        Work w = plan.start();
        ++calls;
        w.wait();
        const int64_t n = parent.size();
        ASSERT_EQ(plan_buf[100], n * (n - 1) / 2 + n * i);
        continue;
      }
      Communicator& c = *comms[what];
      s.comm = &c;
      s.buf.assign(1 + pick() % 2000, int64_t{c.rank()} * 3 + i);
      const int64_t n = c.size();
      s.expect = 3 * n * (n - 1) / 2 + n * i;
      s.work = c.allreduce_async(s.buf.data(), s.buf.data(), s.buf.size(), DataType::int64,
                                 ReduceOp::sum);
      ++calls;
      if (pick() % 5 == 0) std::this_thread::yield();  // a little "compute"
    }
    for (Slot& s : slots) settle(s);
  });
}

TEST(Engine, PlanRunsRepeatedlyAndRefusesAStartWhileRunning) {
  ScopedProgress mode("thread");
  run_ranks(3, [](Communicator& comm) {
    std::vector<float> v(4096);
    Plan plan = comm.prepare(
        Call::allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum));
    EXPECT_FALSE(plan.algorithm().empty());
    for (int step = 0; step < 50; ++step) {
      std::fill(v.begin(), v.end(), float(comm.rank() + step));
      Work w = plan.start();
      if (step == 0) {
        try {
          plan.start();
          ADD_FAILURE() << "a second start while running did not raise";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
          EXPECT_NE(std::string(e.what()).find("still outstanding"), std::string::npos) << e.what();
        }
      }
      w.wait();
      ASSERT_EQ(v[4095], float(3 + 3 * step));
    }
  });
}

TEST(Engine, PlanAfterShrinkRaises) {
  ScopedProgress mode("thread");
  run_ranks(3, [](Communicator& comm) {
    std::vector<float> v(64, 1.0f);
    Plan plan = comm.prepare(
        Call::allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum));
    plan.start().wait();
    Communicator smaller = comm.shrink();
    EXPECT_EQ(smaller.size(), 3);
    try {
      plan.start();
      ADD_FAILURE() << "a plan of a shrunk communicator started";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::revoked) << e.what();
    }
    std::fill(v.begin(), v.end(), 1.0f);
    smaller.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    EXPECT_EQ(v[0], 3.0f);
  });
}

TEST(Engine, PlanOfADestroyedCommunicatorRaises) {
  std::optional<Plan> plan;
  std::vector<float> v(8, 1.0f);
  run_ranks(1, [&](Communicator& comm) {
    plan = comm.prepare(
        Call::allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum));
  });
  try {
    plan->start();
    ADD_FAILURE() << "started";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("destroyed"), std::string::npos) << e.what();
  }
}

// abort() and revoke() from another thread while the progress thread is
// inside the transport with a call that can never complete (rank 0 never
// joins it): every rank's Work fails within milliseconds.
void interrupt_while_driving(bool revoke) {
  ScopedProgress mode("thread");
  std::atomic<int> failed{0};
  run_ranks(3, [&](Communicator& comm) {
    std::vector<float> v(1 << 16, 1.0f);
    if (comm.rank() == 0) {
      // Waits until the others' progress threads are inside the transport.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::thread other([&] {
        if (revoke)
          comm.revoke();
        else
          comm.abort("stopped by the test");
      });
      other.join();
      return;
    }
    Work w = comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    EXPECT_TRUE(completes_without_calls(w, std::chrono::seconds(30)))
        << "rank " << comm.rank() << ": the failure did not reach the Work";
    try {
      w.wait();
      ADD_FAILURE() << "wait() returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), revoke ? ErrorCode::revoked : ErrorCode::aborted) << e.what();
      ++failed;
    }
  });
  EXPECT_EQ(failed.load(), 2);
}

TEST(Engine, AbortFromAnotherThreadReachesWorkTheProgressThreadDrives) {
  interrupt_while_driving(false);
}

TEST(Engine, RevokeFromAnotherThreadReachesWorkTheProgressThreadDrives) {
  interrupt_while_driving(true);
}

TEST(Engine, LocalAbortWhileTheProgressThreadDrives) {
  ScopedProgress mode("thread");
  std::atomic<bool> over{false};
  run_ranks(2, [&](Communicator& comm) {
    std::vector<float> v(1 << 16, 1.0f);
    if (comm.rank() == 1) {
      // Never joins the call: rank 0's waits until rank 0 aborts it.
      while (!over.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;
    }
    Work w = comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    comm.abort("the caller gave up");
    EXPECT_TRUE(completes_without_calls(w, std::chrono::seconds(30)));
    over = true;
    try {
      w.wait();
      ADD_FAILURE() << "wait() returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::aborted) << e.what();
      EXPECT_NE(std::string(e.what()).find("the caller gave up"), std::string::npos) << e.what();
    }
  });
}

// on_complete runs once per call, on whichever thread completes it, and may
// call chorus (it runs after that thread let go of the communicator).
TEST(Engine, OnCompleteRunsOnceAndMayCallChorus) {
  ScopedProgress mode("thread");
  run_ranks(3, [](Communicator& comm) {
    constexpr int kCalls = 200;
    std::vector<std::vector<int32_t>> bufs(kCalls, std::vector<int32_t>(1000, comm.rank() + 1));
    std::atomic<int> ran{0};
    std::vector<Work> works;
    for (int i = 0; i < kCalls; ++i)
      works.push_back(comm.submit(Call::allreduce(bufs[i].data(), bufs[i].data(), bufs[i].size(),
                                                  DataType::int32, ReduceOp::sum),
                                  [&, i] {
                                    EXPECT_EQ(bufs[i][999], 6);
                                    // A chorus call that takes the communicator from inside the
                                    // callback: it must not deadlock.
                                    EXPECT_FALSE(comm.flight_record().empty());
                                    ++ran;
                                  }));
    for (Work& w : works) w.wait();
    // Every callback has run once its Work completed: those still due run
    // as the waiting thread lets go, before wait() returns.
    EXPECT_EQ(ran.load(), kCalls);
    comm.barrier();
  });
}

// wait_for gives up without an error and the call goes on.
TEST(Engine, WaitForGivesUpAndTheCallGoesOn) {
  ScopedProgress mode("thread");
  std::atomic<bool> go{false};
  run_ranks(2, [&](Communicator& comm) {
    std::vector<float> v(256, 1.0f);
    if (comm.rank() == 1) {
      while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      comm.allreduce(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
      return;
    }
    Work w = comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    EXPECT_FALSE(w.wait_for(std::chrono::milliseconds(30)));
    go = true;
    while (!w.wait_for(std::chrono::milliseconds(20))) {
    }
    EXPECT_EQ(v[255], 2.0f);
  });
}

TEST(Engine, TimeoutReachesWorkTheProgressThreadDrives) {
  ScopedProgress mode("thread");
  run_ranks(2, [](Communicator& comm) {
    std::vector<float> v(16, 1.0f);
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      return;
    }
    CallOptions o;
    o.timeout = std::chrono::milliseconds(200);
    Work w =
        comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum, o);
    EXPECT_TRUE(completes_without_calls(w, std::chrono::seconds(30)));
    try {
      w.wait();
      ADD_FAILURE() << "wait() returned";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::timeout || e.code() == ErrorCode::peer_failure)
          << e.what();
    }
  });
}

TEST(Engine, BadProgressSettingsAreNamed) {
  for (const char* bad : {"threads", "1", "Thread"}) {
    ::setenv("CHORUS_PROGRESS", bad, 1);
    try {
      Config::from_env();
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CHORUS_PROGRESS"), std::string::npos) << e.what();
    }
  }
  ::unsetenv("CHORUS_PROGRESS");
  for (const char* bad : {"-1", "x", "1.5", "5000"}) {
    ::setenv("CHORUS_PROGRESS_CPU", bad, 1);
    try {
      Config::from_env();
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CHORUS_PROGRESS_CPU"), std::string::npos) << e.what();
    }
  }
  ::setenv("CHORUS_PROGRESS_CPU", "0", 1);
  EXPECT_EQ(Config::from_env().progress_cpu, 0);
  ::unsetenv("CHORUS_PROGRESS_CPU");
  EXPECT_EQ(Config::from_env().progress, chorus::ProgressMode::thread);
}

TEST(Engine, PinnedProgressThreadStillAdvances) {
  ::setenv("CHORUS_PROGRESS_CPU", "0", 1);
  ScopedProgress mode("thread");
  run_ranks(2, [](Communicator& comm) {
    std::vector<float> v(1 << 16, 1.0f);
    Work w = comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    EXPECT_TRUE(completes_without_calls(w, std::chrono::seconds(60)));
    w.wait();
    EXPECT_EQ(v[7], 2.0f);
  });
  ::unsetenv("CHORUS_PROGRESS_CPU");
}

// The Turn alone: a caller takes it from a holder that waits in its
// "transport" until interrupted.
TEST(Turn, ACallerTakesTheTurnFromTheProgressSide) {
  std::atomic<bool> interrupted{false};
  Turn turn([&] { interrupted = true; });
  ASSERT_TRUE(turn.try_lock_for_progress());
  std::atomic<bool> caller_in{false};
  std::thread caller([&] {
    turn.lock();
    caller_in = true;
    turn.unlock();
  });
  // The "progress thread" waits until a caller wants the turn.
  while (turn.wanted().load() == 0) std::this_thread::yield();
  while (!interrupted.load()) std::this_thread::yield();
  EXPECT_FALSE(caller_in.load());
  turn.unlock_progress();
  caller.join();
  EXPECT_TRUE(caller_in.load());
  // Re-entrant for its holder; the progress side cannot take it meanwhile.
  turn.lock();
  turn.lock();
  EXPECT_FALSE(turn.outermost());
  std::thread progress([&] { EXPECT_FALSE(turn.try_lock_for_progress()); });
  progress.join();
  turn.unlock();
  EXPECT_TRUE(turn.outermost());
  turn.unlock();
}

}  // namespace
}  // namespace chorus
