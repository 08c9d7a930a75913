// ChorusWork: the c10d::Work that every call of the torch backend returns.
// The last of the call's chorus calls to complete completes it (on the thread
// that completed that call: chorus's progress thread, or one inside wait());
// its future's value is the call's output tensors (DDP's reducer and comm
// hooks wait on the future).
#pragma once

#include <chorus/communicator.h>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace chorus::torch_backend {

class ChorusWork final : public c10d::Work {
 public:
  // `what` names the call in a Work.wait timeout ("all_reduce") and, as
  // "chorus:all_reduce", in torch.profiler, with `outputs` (the tensors the
  // call writes; for the in-place calls, its inputs) as the event's inputs.
  ChorusWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;

  // Waits for the call, advancing its chorus calls on this thread; rethrows
  // its error. A `timeout` (0: none) that passes first raises chorus's
  // timeout error; the call itself goes on.
  bool wait(std::chrono::milliseconds timeout) override;
  // The chorus calls it is made of (set once, by the group, after submitting
  // them), which wait() advances.
  void set_calls(std::vector<chorus::Work> calls) { calls_ = std::move(calls); }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // A receive from any rank (recvAnysource): the sender, once the call has
  // ended (torch's dist.recv returns it); -1 before, and for other calls.
  int sourceRank() const override { return source_ ? source_->load() : -1; }
  // Where the receiving thread writes the sender; set before the Work is
  // handed out.
  void set_source(std::shared_ptr<std::atomic<int>> source) { source_ = std::move(source); }

  // The group's, once: the future first, so that a wait() that returns finds
  // it completed too. `error` null: the call succeeded.
  void complete(std::exception_ptr error);

 private:
  std::string what_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<std::atomic<int>> source_;
  std::vector<chorus::Work> calls_;
};

}  // namespace chorus::torch_backend
