// Who advances a communicator's outstanding calls: the thread that calls
// into it, or its progress thread.
//
// A communicator's executor (exec/executor.h) is driven by one thread at a
// time, the holder of its Turn:
//
//   caller thread            Turn              progress thread
//   -------------            ----              ---------------
//   submit / wait / done --> lock()  -- interrupt the transport -->  lets go
//   ... runs the call ...                                             (sleeps on
//   unlock(): work left? ------------ kick() ---------------------->  its cv)
//                                                          try_lock_for_progress()
//                                              drive the executor, blocked in the
//                                              transport's wait (epoll, futex)
//                                              until a caller asks for the turn
//                                              or nothing is outstanding
//
// A blocking call (submit and wait in one turn) never wakes the progress
// thread: the hand-over happens only when a caller returns with work
// outstanding. One progress thread per communicator, started at its first
// hand-over: each communicator's transport has its own readiness signal (an
// epoll set, a futex doorbell, a condition variable), and a thread blocks on
// only one of them; a thread shared by several communicators would have to
// poll them in turn, which is a spin or a nap. An idle progress thread
// sleeps on a condition variable with no timeout: it costs nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace chorus {

// The right to drive one communicator's executor. Re-entrant for the thread
// that holds it (a blocking call holds it across its submit and its wait).
class Turn {
 public:
  // `interrupt` wakes a holder blocked in the transport (Transport::interrupt).
  explicit Turn(std::function<void()> interrupt) : interrupt_(std::move(interrupt)) {}

  // A caller's thread: asks the progress thread to let go, then takes the
  // turn (blocking until it is free).
  void lock();
  // A caller's thread, without waiting: false where another thread holds it.
  bool try_lock();
  // Whether this thread's unlock() gives the turn up (its outermost hold).
  bool outermost() const { return depth_ == 1; }
  void unlock();

  // The progress thread: takes the turn only where no caller holds or wants
  // it.
  bool try_lock_for_progress();
  void unlock_progress();
  // Whether a caller waits for the turn: the progress thread lets go.
  const std::atomic<int>& wanted() const { return callers_; }

 private:
  std::mutex mu_;
  std::atomic<std::thread::id> owner_{};
  int depth_ = 0;  // the owner's holds; only the owner touches it
  std::atomic<int> callers_{0};
  std::atomic<bool> progress_holds_{false};
  std::function<void()> interrupt_;
};

// A communicator's progress thread. It sleeps until kicked, then runs
// `advance` (which takes the Turn with try_lock_for_progress and drives the
// executor until a caller wants the turn or nothing is outstanding), and
// sleeps again.
class ProgressThread {
 public:
  // `cpu` >= 0 pins the thread to that CPU (CHORUS_PROGRESS_CPU); a CPU the
  // process may not use is an Error(invalid_argument) naming it.
  ProgressThread(std::function<void()> advance, int cpu);
  // Stops and joins the thread: the caller holds the communicator's Turn, so
  // that an advance under way has let go (try_lock_for_progress fails).
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // There is outstanding work that no caller drives. Cheap when the thread
  // was kicked already; a futex wake where it sleeps.
  void kick();
  // How many times the thread ran `advance` (for tests and benchmarks).
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }

 private:
  void run();

  std::function<void()> advance_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool kicked_ = false;
  bool stop_ = false;
  std::atomic<uint64_t> rounds_{0};
  std::thread thread_;
};

}  // namespace chorus
