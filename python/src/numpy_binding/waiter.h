// Waiting in a way that Ctrl-C can interrupt. A blocking call of the numpy
// binding hands its wait to a Waiter thread and wakes up every kSignalSlice,
// with the GIL, to look for a pending signal (and a timeout): the
// KeyboardInterrupt must arrive within 100 ms.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace chorus::python {

// How often a blocked call looks for a pending signal (Ctrl-C): well inside
// the 100 ms within which KeyboardInterrupt must arrive.
constexpr auto kSignalSlice = std::chrono::milliseconds(20);

// Whether this is the interpreter's main thread, the one that handles signals.
bool on_main_thread();

// A thread that blocks in Work::wait() (or in another blocking call: a
// window's creation) on behalf of the caller, so that the caller can wake up
// every kSignalSlice to look for signals. The communicator is used by one
// thread at a time still: the caller only waits meanwhile (or calls
// Communicator::abort, which any thread may). The thread blocks every
// signal, which go to the interpreter's thread.
class Waiter {
 public:
  Waiter();
  ~Waiter();
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  // Runs `job` on the thread (the previous one has finished).
  void start(std::function<void()> job);
  // True once the job has finished (within `slice`).
  bool wait_for(std::chrono::nanoseconds slice);
  // Until the job has finished.
  void wait();
  // What the finished job threw, if anything.
  std::exception_ptr error();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool finished_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace chorus::python
