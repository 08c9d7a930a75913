// Turn and ProgressThread (engine/progress.h).
#include "engine/progress.h"

#include "core/check.h"

#include <chorus/error.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <cstring>

namespace chorus {

void Turn::lock() {
  const std::thread::id me = std::this_thread::get_id();
  if (owner_.load(std::memory_order_relaxed) == me) {
    ++depth_;
    return;
  }
  // Dekker's handshake with try_lock_for_progress: this side raises callers_
  // and then looks at progress_holds_, that side the other way round, both
  // sequentially consistent, so that at least one of them sees the other.
  callers_.fetch_add(1);
  if (progress_holds_.load()) interrupt_();
  mu_.lock();
  callers_.fetch_sub(1);
  owner_.store(me, std::memory_order_relaxed);
  depth_ = 1;
}

bool Turn::try_lock() {
  const std::thread::id me = std::this_thread::get_id();
  if (owner_.load(std::memory_order_relaxed) == me) {
    ++depth_;
    return true;
  }
  if (!mu_.try_lock()) return false;
  owner_.store(me, std::memory_order_relaxed);
  depth_ = 1;
  return true;
}

void Turn::unlock() {
  CHORUS_CHECK(owner_.load(std::memory_order_relaxed) == std::this_thread::get_id());
  if (--depth_ > 0) return;
  owner_.store(std::thread::id{}, std::memory_order_relaxed);
  mu_.unlock();
}

bool Turn::try_lock_for_progress() {
  if (callers_.load() > 0 || !mu_.try_lock()) return false;
  progress_holds_.store(true);
  if (callers_.load() > 0) {
    progress_holds_.store(false);
    mu_.unlock();
    return false;
  }
  return true;
}

void Turn::unlock_progress() {
  progress_holds_.store(false);
  mu_.unlock();
}

ProgressThread::ProgressThread(std::function<void()> advance, int cpu)
    : advance_(std::move(advance)), thread_([this] { run(); }) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(thread_.native_handle(), sizeof(set), &set);
  if (rc == 0) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
  fail(ErrorCode::invalid_argument, "CHORUS_PROGRESS_CPU=", cpu,
       ": cannot run the progress thread on that CPU (", std::strerror(rc), ")");
}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ProgressThread::kick() {
  {
    std::lock_guard lock(mu_);
    if (kicked_) return;
    kicked_ = true;
  }
  cv_.notify_one();
}

void ProgressThread::run() {
  // Signals go to the application's threads (Python's handlers run on its
  // main thread), never to this one.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return kicked_ || stop_; });
    if (stop_) return;
    kicked_ = false;
    lock.unlock();
    rounds_.fetch_add(1, std::memory_order_relaxed);
    advance_();
    lock.lock();
  }
}

}  // namespace chorus
