// ProcessGroupChorus (process_group.h): the group, how a call is submitted
// and completed, its argument checks and chorus.torch.empty's windows.
#include "torch_backend/process_group.h"

#include "core/check.h"
#include "groups/derive.h"
#include "torch_backend/start_up.h"

#include <torch/csrc/utils/pybind.h>

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace py = pybind11;

namespace chorus::torch_backend {

ProcessGroupChorus::ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size), comm_(connect(store, rank, size, timeout)) {
  init();
}

ProcessGroupChorus::ProcessGroupChorus(Communicator comm)
    : ProcessGroup(comm.rank(), comm.size()), comm_(std::move(comm)) {
  init();
}

c10::intrusive_ptr<ProcessGroupChorus> ProcessGroupChorus::new_group(
    const std::vector<int>& ranks, std::chrono::milliseconds timeout) {
  auto made = std::make_shared<std::optional<Communicator>>();
  c10::intrusive_ptr<c10d::Work> work = enqueue(
      c10d::OpType::UNKNOWN, "new_group", {},
      [made, ranks, timeout](Calls& calls) {
        *made = chorus::detail::derive(calls.comm(), ranks, timeout);
      },
      [] {});
  work->wait(kNoTimeout);
  return c10::make_intrusive<ProcessGroupChorus>(std::move(**made));
}

c10::intrusive_ptr<ProcessGroupChorus> ProcessGroupChorus::shrink(
    std::chrono::milliseconds timeout) {
  auto made = std::make_shared<std::optional<Communicator>>();
  c10::intrusive_ptr<c10d::Work> work = enqueue(
      c10d::OpType::UNKNOWN, "shrink", {},
      [made, timeout](Calls& calls) { *made = calls.comm().shrink(timeout); }, [] {});
  work->wait(kNoTimeout);
  return c10::make_intrusive<ProcessGroupChorus>(std::move(**made));
}

ProcessGroupChorus::~ProcessGroupChorus() {
  // Torch may drop the last reference while holding the GIL; a future's
  // callback on chorus's progress thread may want it.
  if (PyGILState_Check() != 0) {
    py::gil_scoped_release nogil;
    shut_down();
  } else {
    shut_down();
  }
}

at::Tensor ProcessGroupChorus::empty(const std::vector<int64_t>& sizes, at::ScalarType type) {
  const std::string call = "empty";
  size_t bytes = c10::elementSize(type);
  for (const int64_t d : sizes) {
    if (d < 0) unsupported(call, "negative size " + std::to_string(d));
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes) ||
        bytes > static_cast<size_t>(std::numeric_limits<int64_t>::max()))
      unsupported(call, "the tensor would hold more than 2^63 bytes");
  }
  auto window = std::make_shared<Window>();
  c10::intrusive_ptr<c10d::Work> work = enqueue(
      c10d::OpType::UNKNOWN, call, {},
      [window, bytes](Calls& calls) { *window = calls.comm().window(bytes); }, [] {});
  work->wait(kNoTimeout);
  const Window w = *window;
  // The deleter's copy of the window keeps the memory mapped.
  return at::from_blob(
      w.data(), sizes, [w](void*) {}, at::TensorOptions().dtype(type).device(at::kCPU));
}

int ProcessGroupChorus::root_rank(int64_t root, const std::string& call) const {
  if (root < 0 || root >= size_)
    unsupported(call,
                "root " + std::to_string(root) + " outside [0, " + std::to_string(size_) + ")");
  return static_cast<int>(root);
}

void ProcessGroupChorus::check_peer(int peer, const std::string& call) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    unsupported(call, "peer " + std::to_string(peer) + " is not another rank of this group of " +
                          std::to_string(size_));
}

CallOptions ProcessGroupChorus::tagged(int tag, const std::string& call) {
  if (tag < 0)
    unsupported(call, "tag " + std::to_string(tag) + " is negative; chorus's tags are >= 0");
  CallOptions o;
  o.tag = tag;
  return o;
}

void ProcessGroupChorus::Calls::submit(const Call& call) {
  op_->remaining.fetch_add(1);
  std::shared_ptr<Op> op = op_;
  chorus::Work w;
  try {
    w = comm_.submit(call, [op] { op->one_done(); });
  } catch (...) {
    op_->remaining.fetch_sub(1);  // never submitted: no callback will come
    throw;
  }
  std::lock_guard lock(op_->mu);
  op_->calls.push_back(std::move(w));
}

void ProcessGroupChorus::Op::one_done() {
  if (remaining.fetch_sub(1) != 1) return;
  // Every chorus call of it has completed: their outcomes are final, and
  // wait() on each returns or raises at once.
  std::exception_ptr error = start_error;
  if (!error) {
    try {
      std::vector<chorus::Work> ended;
      {
        std::lock_guard lock(mu);
        ended = calls;
      }
      for (chorus::Work& w : ended) w.wait();
      at::AutoGradMode no_grad(false);  // the copies back are not part of any graph
      finish();
    } catch (...) {
      error = std::current_exception();
    }
  }
  // The buffers the calls used are free now.
  start = nullptr;
  finish = nullptr;
  unfinished->fetch_sub(1);
  work->complete(error);
}

std::shared_ptr<ProcessGroupChorus::Op> ProcessGroupChorus::new_op(c10d::OpType type,
                                                                   const std::string& call,
                                                                   std::vector<at::Tensor> outputs,
                                                                   std::function<void()> finish) {
  if (stopping_.load()) unsupported(call, "the process group is being destroyed");
  auto op = std::make_shared<Op>();
  op->work = c10::make_intrusive<ChorusWork>(rank_, type, call, std::move(outputs));
  op->finish = std::move(finish);
  op->unfinished = unfinished_;
  unfinished_->fetch_add(1);
  return op;
}

void ProcessGroupChorus::run_start(const std::shared_ptr<Op>& op, Start start) {
  try {
    Calls calls(comm_, op);
    start(calls);
  } catch (...) {
    op->start_error = std::current_exception();
  }
  op->start = std::move(start);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::enqueue(c10d::OpType type,
                                                           const std::string& call,
                                                           std::vector<at::Tensor> outputs,
                                                           Start start,
                                                           std::function<void()> finish) {
  std::shared_ptr<Op> op = new_op(type, call, std::move(outputs), std::move(finish));
  c10::intrusive_ptr<c10d::Work> work = op->work;
  run_start(op, std::move(start));
  {
    std::lock_guard lock(op->mu);
    static_cast<ChorusWork&>(*work).set_calls(op->calls);
  }
  op->one_done();  // the start's own count
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::enqueue_blocking(c10d::OpType type,
                                                                    const std::string& call,
                                                                    std::vector<at::Tensor> outputs,
                                                                    Start start,
                                                                    std::function<void()> finish) {
  std::shared_ptr<Op> op = new_op(type, call, std::move(outputs), std::move(finish));
  c10::intrusive_ptr<c10d::Work> work = op->work;
  std::lock_guard lock(threads_mu_);
  threads_.emplace_back([this, op, start = std::move(start)]() mutable {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    run_start(op, std::move(start));
    op->one_done();
  });
  return work;
}

void ProcessGroupChorus::shut_down() {
  stopping_ = true;
  // Calls nobody waited for would keep their threads and peers until their
  // timeout: the peers learn why instead.
  if (const int unfinished = unfinished_->load(); unfinished > 0)
    comm_.abort(str_cat("the process group of rank ", rank_, " was destroyed with ", unfinished,
                        " call(s) unfinished"));
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(threads_mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace chorus::torch_backend
