// A latch with a bounded wait, for test threads that must acknowledge each
// other ("I have judged the message", "I have closed") instead of sleeping
// and hoping the other side got there first. The bound only keeps a broken
// test from hanging: a wait that reaches it returns false, for the test to
// fail on.
//
//   test::Latch judged;
//   // thread A:                              // thread B:
//   EXPECT_TRUE(judged.wait());               test::CountDownOnExit done(judged);
//                                             ...  // counts down however it leaves
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace chorus::test {

class Latch {
 public:
  explicit Latch(int count = 1) : count_(count) {}

  // One of the `count` events has happened.
  void count_down() {
    {
      std::lock_guard lock(mu_);
      if (count_ > 0) --count_;
    }
    cv_.notify_all();
  }

  // Blocks until every event has happened (true) or `limit` has passed (false).
  bool wait(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

// Counts `latch` down when it goes out of scope, by return or by exception.
class CountDownOnExit {
 public:
  explicit CountDownOnExit(Latch& latch) : latch_(latch) {}
  ~CountDownOnExit() { latch_.count_down(); }
  CountDownOnExit(const CountDownOnExit&) = delete;
  CountDownOnExit& operator=(const CountDownOnExit&) = delete;

 private:
  Latch& latch_;
};

}  // namespace chorus::test
