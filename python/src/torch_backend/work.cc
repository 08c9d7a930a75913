// The torch backend's Work (work.h).
#include "torch_backend/work.h"

#include "core/check.h"

#include <chorus/error.h>

#include <mutex>

namespace chorus::torch_backend {

ChorusWork::ChorusWork(int rank, c10d::OpType type, std::string what,
                       std::vector<at::Tensor> outputs)
    : Work(rank, type),
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
  std::unique_lock lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
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
