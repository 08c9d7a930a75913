// The numpy binding's interruptible waits (waiter.h).
#include "numpy_binding/waiter.h"

#include <pybind11/pybind11.h>

#include <pthread.h>
#include <signal.h>

#include <utility>

namespace py = pybind11;

namespace chorus::python {

bool on_main_thread() {
  static const unsigned long main_ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  return PyThread_get_thread_ident() == main_ident;
}

Waiter::Waiter() : thread_([this] { run(); }) {}

Waiter::~Waiter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Waiter::start(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    job_ = std::move(job);
    finished_ = false;
    error_ = nullptr;
  }
  cv_.notify_all();
}

bool Waiter::wait_for(std::chrono::nanoseconds slice) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, slice, [&] { return finished_; });
}

void Waiter::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return finished_; });
}

std::exception_ptr Waiter::error() {
  std::lock_guard lock(mu_);
  return error_;
}

void Waiter::run() {
  // Signals go to the interpreter's thread, which handles them.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || job_ != nullptr; });
    if (job_ == nullptr) return;  // stopping
    std::function<void()> job = std::exchange(job_, nullptr);
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    finished_ = true;
    cv_.notify_all();
  }
}

}  // namespace chorus::python
