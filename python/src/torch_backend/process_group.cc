// ProcessGroupChorus (process_group.h): the group, its worker thread, its
// argument checks and chorus.torch.empty's windows.
#include "torch_backend/process_group.h"

#include "api/derive.h"
#include "core/check.h"
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
  worker_ = std::thread([this] { run(); });
}

ProcessGroupChorus::ProcessGroupChorus(Communicator comm)
    : ProcessGroup(comm.rank(), comm.size()), comm_(std::move(comm)) {
  init();
  worker_ = std::thread([this] { run(); });
}

c10::intrusive_ptr<ProcessGroupChorus> ProcessGroupChorus::new_group(
    const std::vector<int>& ranks, std::chrono::milliseconds timeout) {
  auto made = std::make_shared<std::optional<Communicator>>();
  c10::intrusive_ptr<c10d::Work> work = enqueue(
      c10d::OpType::UNKNOWN, "new_group", {}, false,
      [made, ranks, timeout](Communicator& c, std::vector<chorus::Work>&) {
        *made = chorus::detail::derive(c, ranks, timeout);
      },
      [] {});
  work->wait(kNoTimeout);
  return c10::make_intrusive<ProcessGroupChorus>(std::move(**made));
}

c10::intrusive_ptr<ProcessGroupChorus> ProcessGroupChorus::shrink(
    std::chrono::milliseconds timeout) {
  auto made = std::make_shared<std::optional<Communicator>>();
  c10::intrusive_ptr<c10d::Work> work = enqueue(
      c10d::OpType::UNKNOWN, "shrink", {}, false,
      [made, timeout](Communicator& c, std::vector<chorus::Work>&) { *made = c.shrink(timeout); },
      [] {});
  work->wait(kNoTimeout);
  return c10::make_intrusive<ProcessGroupChorus>(std::move(**made));
}

ProcessGroupChorus::~ProcessGroupChorus() {
  // Torch may drop the last reference while holding the GIL; a future's
  // callback on the worker may want it.
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
      c10d::OpType::UNKNOWN, call, {}, false,
      [window, bytes](Communicator& c, std::vector<chorus::Work>&) { *window = c.window(bytes); },
      [] {});
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

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::enqueue(c10d::OpType type,
                                                           const std::string& call,
                                                           std::vector<at::Tensor> outputs,
                                                           bool user_p2p, Start start,
                                                           std::function<void()> finish) {
  auto op = std::make_unique<Op>();
  op->work = c10::make_intrusive<ChorusWork>(rank_, type, call, std::move(outputs));
  op->user_p2p = user_p2p;
  op->start = std::move(start);
  op->finish = std::move(finish);
  c10::intrusive_ptr<c10d::Work> work = op->work;
  {
    std::lock_guard lock(mu_);
    if (stopping_) unsupported(call, "the process group is being destroyed");
    queue_.push_back(std::move(op));
    ++unfinished_;
  }
  cv_.notify_one();
  return work;
}

void ProcessGroupChorus::complete(Op& op, std::exception_ptr error) {
  if (!error) {
    try {
      for (chorus::Work& w : op.calls) w.wait();
      op.finish();
    } catch (...) {
      error = std::current_exception();
    }
  }
  {
    std::lock_guard lock(mu_);
    --unfinished_;
  }
  op.work->complete(error);
}

void ProcessGroupChorus::run() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  at::AutoGradMode no_grad(false);  // the copies back are not part of any graph
  std::deque<std::unique_ptr<Op>> active;
  while (true) {
    std::deque<std::unique_ptr<Op>> incoming;
    {
      std::unique_lock lock(mu_);
      if (active.empty()) cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && queue_.empty() && active.empty()) return;
      incoming.swap(queue_);
    }
    for (auto& op : incoming) {
      try {
        op->start(comm_, op->calls);
        active.push_back(std::move(op));
      } catch (...) {
        complete(*op, std::current_exception());
      }
    }
    if (active.empty()) continue;
    const bool poll =
        std::any_of(active.begin(), active.end(), [](const auto& op) { return op->user_p2p; });
    if (!poll) {
      std::unique_ptr<Op> op = std::move(active.front());
      active.pop_front();
      complete(*op, nullptr);  // blocks in chorus's wait
      continue;
    }
    bool progressed = false;
    for (auto it = active.begin(); it != active.end();) {
      bool ended = true;
      for (chorus::Work& w : (*it)->calls) ended = ended && w.done();
      if (!ended) {
        ++it;
        continue;
      }
      complete(**it, nullptr);
      it = active.erase(it);
      progressed = true;
    }
    if (!progressed) std::this_thread::yield();
  }
}

void ProcessGroupChorus::shut_down() {
  int unfinished = 0;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    unfinished = unfinished_;
  }
  // Calls nobody waited for would keep the worker until their timeout: the
  // peers learn why instead.
  if (unfinished > 0)
    comm_.abort(str_cat("the process group of rank ", rank_, " was destroyed with ", unfinished,
                        " call(s) unfinished"));
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

}  // namespace chorus::torch_backend
