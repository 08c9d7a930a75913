// The torch backend's Work (work.h).
#include "torch_backend/work.h"

#include "core/check.h"

#include <chorus/error.h>

#include <mutex>
#include <string>
#include <unordered_set>

namespace chorus::torch_backend {
namespace {

// "chorus:<call>" for torch.profiler, as gloo's Works are "gloo:<call>".
// at::RecordFunction keeps the name's pointer, not a copy: each title lives
// for the process, one per call name.
const char* profiling_title(const std::string& call) {
  static std::mutex mu;
  static std::unordered_set<std::string> titles;
  std::lock_guard lock(mu);
  return titles.insert("chorus:" + call).first->c_str();
}

}  // namespace

ChorusWork::ChorusWork(int rank, c10d::OpType type, std::string what,
                       std::vector<at::Tensor> outputs)
    // c10d::Work opens an at::RecordFunction named `title` with the tensors
    // as its inputs (shapes with record_shapes) when a profiler is active,
    // and finish() (complete()) ends it: every call of the backend is an
    // event in torch.profiler, as gloo's are.
    : Work(rank, type, profiling_title(what), outputs),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool ChorusWork::isCompleted() {
  std::lock_guard lock(mutex_);
  return completed_;
}

bool ChorusWork::isSuccess() const {
  std::lock_guard lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr ChorusWork::exception() const {
  std::lock_guard lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> ChorusWork::result() {
  return outputs_;
}

bool ChorusWork::wait(std::chrono::milliseconds timeout) {
  // Advances the chorus calls on this thread (as a blocking call would),
  // rather than waking up when another thread has: the completion's callback
  // then runs here too. Their errors are the call's, reported below.
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  for (chorus::Work& w : calls_) {
    try {
      if (timeout == kNoTimeout) {
        w.wait();
      } else {
        const auto left = give_up - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero() || !w.wait_for(left)) break;
      }
    } catch (const std::exception&) {
      // The call's error: complete() carries it.
    }
  }
  std::unique_lock lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_until(lock, give_up, [&] { return completed_; })) {
    fail(ErrorCode::timeout, "rank ", rank_, ": ", what_, " did not complete within ",
         timeout.count(), " ms (Work.wait)");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> ChorusWork::getFuture() {
  return future_;
}

void ChorusWork::complete(std::exception_ptr error) {
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
  finish(error);
}

}  // namespace chorus::torch_backend
