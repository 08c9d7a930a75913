// chorus.torch._backend: chorus as a torch.distributed backend (torch 1.13's
// c10d extension API). chorus/torch/__init__.py registers it as "chorus":
//
//   import chorus.torch
//   dist.init_process_group("chorus")          # env://, file://, tcp://
//   dist.all_reduce(t)                         # through ProcessGroupChorus
//
// ProcessGroupChorus meets its peers through the c10d Store that torch hands
// it (TorchStore below adapts it to chorus's Store) and keeps one chorus
// Communicator. Every call is queued to one worker thread, which alone uses
// the communicator (one thread at a time, in call order, as chorus requires)
// and completes a ChorusWork and its future when the call ends. Collectives
// the C++ API lacks (gather, scatter, uneven all_to_all) are composed of
// chorus's point-to-point calls.
//
// The worker blocks in chorus's wait while only collectives are in flight:
// those complete without any later call of this rank. A user's send or recv
// may wait for a call this rank has not queued yet (isend, then recv), so
// while one is in flight the worker polls and keeps taking new calls.
#include "api/communicator_impl.h"
#include "bootstrap/bootstrap.h"
#include "core/check.h"
#include "core/config.h"
#include "net/socket.h"
#include "store/store.h"

#include <chorus/chorus.h>

#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace py = pybind11;

namespace chorus::torch_backend {
namespace {

using std::chrono::milliseconds;
// A chorus call in flight (c10d has a Work class of its own).
using CallHandle = chorus::Work;

[[noreturn]] void unsupported(const std::string& call, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, "chorus backend: " + call + ": " + what);
}

// --- the store -------------------------------------------------------------------

// chorus's Store over torch's c10d Store: the communicator's set-up goes
// through the store torch hands the backend (no second store). c10d has no
// abort: abort() publishes the reason under kAbortKey, and every wait looks
// for it. c10d's get blocks until its own timeout, so waits poll check()
// instead, with growing pauses, until chorus's deadline.
class TorchStore final : public Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    guarded("set", key, [&] { store_->set(key, value); });
  }
  std::vector<uint8_t> get(const std::string& key, Deadline deadline) override {
    wait({key}, deadline);
    std::vector<uint8_t> value;
    guarded("get", key, [&] { value = store_->get(key); });
    return value;
  }
  void wait(const std::vector<std::string>& keys, Deadline deadline) override {
    auto pause = std::chrono::microseconds(50);
    constexpr auto kLongestPause = std::chrono::microseconds(10'000);
    const std::string what = keys.empty() ? std::string("no key") : keys.front();
    while (true) {
      bool present = false;
      guarded("check", what, [&] { present = store_->check(keys); });
      if (present) return;
      check_aborted();
      const auto now = Clock::now();
      if (now >= deadline)
        fail(ErrorCode::timeout, "torch store: timed out waiting for key '", what, "'");
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, kLongestPause);
    }
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t v = 0;
    guarded("add", key, [&] { v = store_->add(key, delta); });
    return v;
  }
  void abort(const std::string& reason) override {
    // The first reason wins: only the first to count publishes its own.
    if (add(std::string(kAbortKey) + "/count", 1) == 1)
      set(kAbortKey, std::vector<uint8_t>(reason.begin(), reason.end()));
  }

 private:
  static constexpr const char* kAbortKey = "chorus/aborted";

  void check_aborted() {
    bool aborted = false;
    guarded("check", kAbortKey, [&] { aborted = store_->check({kAbortKey}); });
    if (!aborted) return;
    std::vector<uint8_t> reason;
    guarded("get", kAbortKey, [&] { reason = store_->get(kAbortKey); });
    fail(ErrorCode::peer_failure, std::string(reason.begin(), reason.end()));
  }

  template <typename F>
  void guarded(const char* op, const std::string& key, F&& f) {
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(ErrorCode::peer_failure, "torch store: ", op, " '", key, "' failed: ", e.what());
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
};

// The host of the TCPStore under torch's prefix stores, if that is what it is.
std::optional<std::string> tcp_store_host(c10::intrusive_ptr<c10d::Store> store) {
  while (auto* prefix = dynamic_cast<c10d::PrefixStore*>(store.get()))
    store = prefix->getUnderlyingStore();
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(store.get())) return tcp->getHost();
  return std::nullopt;
}

// Every rank adds itself; the last one opens the barrier.
void store_barrier(Store& store, const std::string& name, int size, Deadline deadline) {
  if (store.add(name + "/arrived", 1) == size) store.set(name + "/open", {1});
  store.get(name + "/open", deadline);
}

// The group's timeout is every call's deadline. The start-up meets the
// others through torch's store, so it waits as long as the store's own
// timeout allows when that is longer (a group made with a short timeout
// still starts while the ranks arrive at their own pace).
Communicator connect(const c10::intrusive_ptr<c10d::Store>& c10d_store, int rank, int size,
                     milliseconds timeout) {
  Config config = Config::from_env();
  config.timeout = timeout;
  const Deadline deadline = deadline_after(std::max(timeout, c10d_store->getTimeout()));
  TorchStore store(c10d_store);
  try {
    std::string address = config.tcp_address;
    if (address.empty()) {
      // Towards the TCPStore's host, as chorus's own bootstrap does; a file
      // store gives no host: loopback, unless CHORUS_TCP_ADDR says otherwise.
      const std::optional<std::string> host = tcp_store_host(c10d_store);
      address = host ? local_address_towards(resolve(*host, 0, "torch store host")) : "127.0.0.1";
    }
    auto transport =
        connect_transport(store, rank, size, config.transport, config, address, deadline);
    store_barrier(store, "chorus/ready", size, deadline);
    return make_communicator(std::move(transport), std::move(config));
  } catch (const Error& e) {
    std::string reason = e.what();
    if (reason.rfind("rank ", 0) != 0) reason = str_cat("rank ", rank, ": ", reason);
    try {
      store.abort(reason);
    } catch (const Error&) {
      // The store itself failed; the others will time out.
    }
    throw Error(e.code(), reason);
  }
}

// --- tensors ---------------------------------------------------------------------

std::optional<DataType> chorus_type(at::ScalarType t) {
  switch (t) {
    case at::kChar:
      return DataType::int8;
    case at::kByte:
      return DataType::uint8;
    case at::kInt:
      return DataType::int32;
    case at::kLong:
      return DataType::int64;
    case at::kHalf:
      return DataType::float16;
    case at::kBFloat16:
      return DataType::bfloat16;
    case at::kFloat:
      return DataType::float32;
    case at::kDouble:
      return DataType::float64;
    default:
      return std::nullopt;
  }
}

void check_tensor(const at::Tensor& t, const std::string& call) {
  if (!t.defined()) unsupported(call, "an undefined tensor");
  if (t.device().type() != at::kCPU)
    unsupported(call, "the tensor is on " + t.device().str() +
                          "; the chorus backend moves CPU tensors only");
  if (t.layout() != at::kStrided)
    unsupported(call, str_cat("a ", t.layout(),
                              " tensor; the chorus backend moves dense (strided) tensors only"));
}

// What chorus sees of a tensor's elements: its type and count. Types chorus
// does not reduce (bool, int16, complex, ...) travel as bytes where nothing
// is reduced; a reduction of them is an error naming the type.
struct Elements {
  DataType type = DataType::uint8;
  size_t count = 0;
};

Elements elements(const at::Tensor& t, const std::string& call, bool reduces) {
  if (auto type = chorus_type(t.scalar_type())) return {*type, static_cast<size_t>(t.numel())};
  if (reduces)
    unsupported(call, std::string("dtype ") + c10::toString(t.scalar_type()) +
                          " cannot be reduced; chorus reduces int8, uint8, int32, int64, "
                          "float16, bfloat16, float32 and float64");
  return {DataType::uint8, static_cast<size_t>(t.nbytes())};
}

ReduceOp chorus_op(const c10d::ReduceOp& op, const std::string& call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::prod;
    case c10d::ReduceOp::MIN:
      return ReduceOp::min;
    case c10d::ReduceOp::MAX:
      return ReduceOp::max;
    case c10d::ReduceOp::AVG:
      return ReduceOp::avg;
    case c10d::ReduceOp::BAND:
      unsupported(
          call,
          "ReduceOp.BAND is not supported; chorus reduces with SUM, PRODUCT, MIN, MAX and AVG");
    case c10d::ReduceOp::BOR:
      unsupported(
          call,
          "ReduceOp.BOR is not supported; chorus reduces with SUM, PRODUCT, MIN, MAX and AVG");
    case c10d::ReduceOp::BXOR:
      unsupported(
          call,
          "ReduceOp.BXOR is not supported; chorus reduces with SUM, PRODUCT, MIN, MAX and AVG");
    case c10d::ReduceOp::PREMUL_SUM:
      unsupported(call,
                  "ReduceOp.PREMUL_SUM is not supported; chorus reduces with SUM, PRODUCT, MIN, "
                  "MAX and AVG");
    case c10d::ReduceOp::UNUSED:
      break;
  }
  unsupported(call,
              "ReduceOp value " + std::to_string(static_cast<int>(op.op_)) + " is not supported");
}

// A tensor's memory as chorus sees it: the tensor itself when contiguous,
// else a contiguous copy, written back after the call when the call writes
// it.
struct Staged {
  at::Tensor user;
  at::Tensor buffer;

  std::byte* data() const { return static_cast<std::byte*>(buffer.data_ptr()); }
  void write_back() const {
    if (!buffer.is_same(user)) user.copy_(buffer);
  }
};

enum class Use { read, write, read_write };

Staged stage(const at::Tensor& t, Use use) {
  if (t.is_contiguous()) return {t, t};
  if (use == Use::write) return {t, at::empty(t.sizes(), t.options())};
  return {t, t.contiguous()};
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& call) {
  if (tensors.size() != 1)
    unsupported(call,
                "takes exactly one tensor per process, got " + std::to_string(tensors.size()));
  check_tensor(tensors[0], call);
  return tensors[0];
}

void check_like(const at::Tensor& t, const at::Tensor& ref, const std::string& call,
                const std::string& what, int64_t numel) {
  check_tensor(t, call);
  if (t.scalar_type() != ref.scalar_type())
    unsupported(call, what + " has dtype " + c10::toString(t.scalar_type()) + ", the input " +
                          c10::toString(ref.scalar_type()));
  if (t.numel() != numel)
    unsupported(call, what + " has " + std::to_string(t.numel()) + " elements, expected " +
                          std::to_string(numel));
}

// The tensors of a list as one contiguous buffer when they already are one
// (adjacent, in order, each contiguous), else an empty tensor.
at::Tensor as_one_buffer(const std::vector<at::Tensor>& list) {
  if (list.empty()) return {};
  const auto* base = static_cast<const std::byte*>(list[0].data_ptr());
  const size_t bytes = list[0].nbytes();
  for (size_t j = 0; j < list.size(); ++j)
    if (!list[j].is_contiguous() || list[j].data_ptr() != base + j * bytes) return {};
  return at::from_blob(list[0].data_ptr(), {static_cast<int64_t>(list.size() * list[0].numel())},
                       list[0].options());
}

// --- work ------------------------------------------------------------------------

// One call of the process group: completed by the worker, with the output
// tensors as the value of its future (DDP's reducer and comm hooks wait on
// the future).
class ChorusWork final : public c10d::Work {
 public:
  ChorusWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs)
      : Work(rank, type),
        what_(std::move(what)),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  bool isCompleted() override {
    std::lock_guard lock(mutex_);
    return completed_;
  }
  bool isSuccess() const override {
    std::lock_guard lock(mutex_);
    return completed_ && !exception_;
  }
  std::exception_ptr exception() const override {
    std::lock_guard lock(mutex_);
    return exception_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }

  // Waits for the call; rethrows its error. A `timeout` (0: none) that passes
  // first raises chorus's timeout error; the call itself goes on.
  bool wait(milliseconds timeout) override {
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

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // The worker's: the future first, so that a wait() that returns finds it
  // completed too.
  void complete(std::exception_ptr error) {
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(outputs_));
    finish(error);
  }

 private:
  std::string what_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One queued call: what it submits to chorus (on the worker) and what it
// does once every chorus call of it has succeeded (copies back into the
// caller's tensors). The tensors it captures stay alive until then.
struct Op {
  c10::intrusive_ptr<ChorusWork> work;
  bool user_p2p = false;  // a user's send or recv: see the file comment
  std::function<void(Communicator&, std::vector<CallHandle>&)> start;
  std::function<void()> finish;
  std::vector<CallHandle> calls;
};

CallOptions call_options(milliseconds timeout) {
  CallOptions o;
  if (timeout.count() > 0) o.timeout = timeout;
  return o;
}

CallHandle submit(Communicator& comm, const CallDescriptor& call) {
  return CallHandle(comm.impl().submit(call));
}

// --- the process group -------------------------------------------------------------

class ProcessGroupChorus final : public c10d::ProcessGroup {
 public:
  ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     milliseconds timeout)
      : ProcessGroup(rank, size), comm_(connect(store, rank, size, timeout)) {
    init();
    worker_ = std::thread([this] { run(); });
  }

  ~ProcessGroupChorus() override {
    // Torch may drop the last reference while holding the GIL; a future's
    // callback on the worker may want it.
    if (PyGILState_Check() != 0) {
      py::gil_scoped_release nogil;
      shut_down();
    } else {
      shut_down();
    }
  }

  const std::string getBackendName() const override { return "chorus"; }

  void abort(const std::string& reason) { comm_.abort(reason); }
  std::string transport_name() const { return std::string(comm_.impl().transport().name()); }
  std::string flight_record() const { return comm_.flight_record(); }

  // A collective, queued like every call: a tensor of `sizes` in a new window
  // of the communicator (Communicator::window), whose memory lives as long as
  // the tensor's storage. Calls whose tensors all lie in windows read the
  // peers' data in place. Blocks until every rank has made the window.
  at::Tensor empty(const std::vector<int64_t>& sizes, at::ScalarType type) {
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
        [window, bytes](Communicator& c, std::vector<CallHandle>&) { *window = c.window(bytes); },
        [] {});
    work->wait(kNoTimeout);
    const Window w = *window;
    // The deleter's copy of the window keeps the memory mapped.
    return at::from_blob(
        w.data(), sizes, [w](void*) {}, at::TensorOptions().dtype(type).device(at::kCPU));
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const std::string call = "broadcast";
    at::Tensor& t = single(tensors, call);
    if (opts.rootTensor != 0) unsupported(call, "rootTensor must be 0 (one tensor per process)");
    const int root = root_rank(opts.rootRank, call);
    const Elements e = elements(t, call, false);
    const Staged s = stage(t, Use::read_write);
    const CallOptions options = call_options(opts.timeout);
    return enqueue(
        c10d::OpType::BROADCAST, call, {t}, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(submit(c, {Collective::broadcast, s.data(), s.data(), e.count, e.type,
                                     ReduceOp::sum, root, &options}));
        },
        [s] { s.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const std::string call = "all_reduce";
    at::Tensor& t = single(tensors, call);
    const Elements e = elements(t, call, true);
    const ReduceOp op = chorus_op(opts.reduceOp, call);
    const Staged s = stage(t, Use::read_write);
    const CallOptions options = call_options(opts.timeout);
    return enqueue(
        c10d::OpType::ALLREDUCE, call, {t}, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(submit(
              c, {Collective::allreduce, s.data(), s.data(), e.count, e.type, op, 0, &options}));
        },
        [s] { s.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    const std::string call = "reduce";
    at::Tensor& t = single(tensors, call);
    if (opts.rootTensor != 0) unsupported(call, "rootTensor must be 0 (one tensor per process)");
    const int root = root_rank(opts.rootRank, call);
    const Elements e = elements(t, call, true);
    const ReduceOp op = chorus_op(opts.reduceOp, call);
    const Staged s = stage(t, Use::read_write);
    const CallOptions options = call_options(opts.timeout);
    return enqueue(
        c10d::OpType::REDUCE, call, {t}, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(submit(
              c, {Collective::reduce, s.data(), s.data(), e.count, e.type, op, root, &options}));
        },
        [s] { s.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    const std::string call = "all_gather";
    at::Tensor& in = single(inputs, call);
    if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(size_))
      unsupported(call, "takes one list of " + std::to_string(size_) + " output tensors");
    std::vector<at::Tensor>& list = outputs[0];
    for (size_t j = 0; j < list.size(); ++j)
      check_like(list[j], in, call, "output " + std::to_string(j), in.numel());
    const Elements e = elements(in, call, false);
    const Staged src = stage(in, Use::read);
    at::Tensor joined = as_one_buffer(list);
    const bool direct = joined.defined();
    if (!direct) joined = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
    const CallOptions options = call_options(opts.timeout);
    return enqueue(
        c10d::OpType::ALLGATHER, call, list, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(submit(c, {Collective::allgather, src.data(), joined.data_ptr(), e.count,
                                     e.type, ReduceOp::sum, 0, &options}));
        },
        [=] {
          if (direct) return;
          for (size_t j = 0; j < list.size(); ++j)
            list[j].copy_(joined.narrow(0, static_cast<int64_t>(j) * in.numel(), in.numel())
                              .view(list[j].sizes()));
        });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    const std::string call = "all_gather_into_tensor";
    check_tensor(input, call);
    check_like(output, input, call, "the output", input.numel() * size_);
    const Elements e = elements(input, call, false);
    const Staged dst = stage(output, Use::write);
    const Staged src = stage(input, Use::read);
    const CallOptions options = call_options(opts.timeout);
    return enqueue(
        c10d::OpType::_ALLGATHER_BASE, call, {output}, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(submit(c, {Collective::allgather, src.data(), dst.data(), e.count, e.type,
                                     ReduceOp::sum, 0, &options}));
        },
        [dst] { dst.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const std::string call = "reduce_scatter";
    at::Tensor& out = single(outputs, call);
    if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_))
      unsupported(call, "takes one list of " + std::to_string(size_) + " input tensors");
    const std::vector<at::Tensor>& list = inputs[0];
    for (size_t j = 0; j < list.size(); ++j)
      check_like(list[j], out, call, "input " + std::to_string(j), out.numel());
    const Elements e = elements(out, call, true);
    const ReduceOp op = chorus_op(opts.reduceOp, call);
    at::Tensor joined = as_one_buffer(list);
    if (!joined.defined()) {
      joined = at::empty({static_cast<int64_t>(size_) * out.numel()}, out.options());
      for (size_t j = 0; j < list.size(); ++j)
        joined.narrow(0, static_cast<int64_t>(j) * out.numel(), out.numel())
            .view(list[j].sizes())
            .copy_(list[j]);
    }
    const Staged dst = stage(out, Use::write);
    const CallOptions options = call_options(opts.timeout);
    return enqueue(
        c10d::OpType::REDUCE_SCATTER, call, {out}, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(submit(c, {Collective::reduce_scatter, joined.data_ptr(), dst.data(),
                                     e.count, e.type, op, 0, &options}));
        },
        [dst] { dst.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    const std::string call = "reduce_scatter_tensor";
    check_tensor(output, call);
    check_like(input, output, call, "the input", output.numel() * size_);
    const Elements e = elements(output, call, true);
    const ReduceOp op = chorus_op(opts.reduceOp, call);
    const Staged dst = stage(output, Use::write);
    const Staged src = stage(input, Use::read);
    const CallOptions options = call_options(opts.timeout);
    return enqueue(
        c10d::OpType::_REDUCE_SCATTER_BASE, call, {output}, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(submit(c, {Collective::reduce_scatter, src.data(), dst.data(), e.count,
                                     e.type, op, 0, &options}));
        },
        [dst] { dst.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override {
    const std::string call = "all_to_all_single";
    check_tensor(input, call);
    check_tensor(output, call);
    if (output.scalar_type() != input.scalar_type())
      unsupported(call, std::string("the output has dtype ") + c10::toString(output.scalar_type()) +
                            ", the input " + c10::toString(input.scalar_type()));
    const CallOptions options = call_options(opts.timeout);
    const Staged dst = stage(output, Use::write);
    const Staged src = stage(input, Use::read);
    if (output_splits.empty() && input_splits.empty()) {
      if (input.numel() % size_ != 0 || output.numel() != input.numel())
        unsupported(call,
                    "equal splits need input and output of the same number of elements, a "
                    "multiple of the group size " +
                        std::to_string(size_) + " (input " + std::to_string(input.numel()) +
                        ", output " + std::to_string(output.numel()) + ")");
      Elements e = elements(input, call, false);
      e.count /= static_cast<size_t>(size_);
      return enqueue(
          c10d::OpType::ALLTOALL_BASE, call, {output}, false,
          [=](Communicator& c, std::vector<CallHandle>& calls) {
            calls.push_back(submit(c, {Collective::alltoall, src.data(), dst.data(), e.count,
                                       e.type, ReduceOp::sum, 0, &options}));
          },
          [dst] { dst.write_back(); });
    }
    // Uneven splits (rows of the first dimension): one message per peer.
    const std::vector<Block> send = split_rows(input, input_splits, call, "input");
    const std::vector<Block> recv = split_rows(output, output_splits, call, "output");
    return exchange(c10d::OpType::ALLTOALL_BASE, call, {output}, src, send, dst, recv, options);
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    const std::string call = "all_to_all";
    if (outputs.size() != static_cast<size_t>(size_) || inputs.size() != static_cast<size_t>(size_))
      unsupported(call, "takes lists of " + std::to_string(size_) + " input and output tensors");
    for (int j = 0; j < size_; ++j) {
      check_tensor(inputs[static_cast<size_t>(j)], call);
      check_tensor(outputs[static_cast<size_t>(j)], call);
      if (inputs[static_cast<size_t>(j)].scalar_type() != inputs[0].scalar_type() ||
          outputs[static_cast<size_t>(j)].scalar_type() != inputs[0].scalar_type())
        unsupported(call, "all tensors must have one dtype");
    }
    const auto self = static_cast<size_t>(rank_);
    if (inputs[self].nbytes() != outputs[self].nbytes())
      unsupported(call, "rank " + std::to_string(rank_) + " sends itself " +
                            std::to_string(inputs[self].nbytes()) + " bytes into a " +
                            std::to_string(outputs[self].nbytes()) + "-byte output");
    std::vector<Staged> src, dst;
    for (int j = 0; j < size_; ++j) {
      src.push_back(stage(inputs[static_cast<size_t>(j)], Use::read));
      dst.push_back(stage(outputs[static_cast<size_t>(j)], Use::write));
    }
    const CallOptions options = call_options(opts.timeout);
    const int me = rank_;
    const int n = size_;
    return enqueue(
        c10d::OpType::ALLTOALL, call, outputs, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          // Each rank sends to and receives from the others in the same order.
          for (int j = 0; j < n; ++j) {
            const auto u = static_cast<size_t>(j);
            if (j == me) {
              std::memmove(dst[u].data(), src[u].data(), src[u].buffer.nbytes());
              continue;
            }
            calls.push_back(
                c.isend(src[u].data(), src[u].buffer.nbytes(), DataType::uint8, j, options));
            calls.push_back(
                c.irecv(dst[u].data(), dst[u].buffer.nbytes(), DataType::uint8, j, options));
          }
        },
        [dst] {
          for (const Staged& d : dst) d.write_back();
        });
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    const std::string call = "gather";
    at::Tensor& in = single(inputs, call);
    const int root = root_rank(opts.rootRank, call);
    std::vector<Staged> dst;
    std::vector<at::Tensor> list;
    if (rank_ == root) {
      if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(size_))
        unsupported(call,
                    "the root takes one list of " + std::to_string(size_) + " output tensors");
      list = outputs[0];
      for (size_t j = 0; j < list.size(); ++j) {
        check_like(list[j], in, call, "output " + std::to_string(j), in.numel());
        dst.push_back(stage(list[j], Use::write));
      }
    } else if (!outputs.empty()) {
      unsupported(call, "only the root (rank " + std::to_string(root) + ") takes output tensors");
    }
    const Staged src = stage(in, Use::read);
    const size_t bytes = in.nbytes();
    const CallOptions options = call_options(opts.timeout);
    const int me = rank_;
    const int n = size_;
    return enqueue(
        c10d::OpType::GATHER, call, list, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          if (me != root) {
            calls.push_back(c.isend(src.data(), bytes, DataType::uint8, root, options));
            return;
          }
          for (int j = 0; j < n; ++j) {
            const auto u = static_cast<size_t>(j);
            if (j == me)
              std::memmove(dst[u].data(), src.data(), bytes);
            else
              calls.push_back(c.irecv(dst[u].data(), bytes, DataType::uint8, j, options));
          }
        },
        [dst] {
          for (const Staged& d : dst) d.write_back();
        });
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    const std::string call = "scatter";
    at::Tensor& out = single(outputs, call);
    const int root = root_rank(opts.rootRank, call);
    std::vector<Staged> src;
    if (rank_ == root) {
      if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_))
        unsupported(call, "the root takes one list of " + std::to_string(size_) + " input tensors");
      for (size_t j = 0; j < inputs[0].size(); ++j) {
        check_like(inputs[0][j], out, call, "input " + std::to_string(j), out.numel());
        src.push_back(stage(inputs[0][j], Use::read));
      }
    } else if (!inputs.empty()) {
      unsupported(call, "only the root (rank " + std::to_string(root) + ") takes input tensors");
    }
    const Staged dst = stage(out, Use::write);
    const size_t bytes = out.nbytes();
    const CallOptions options = call_options(opts.timeout);
    const int me = rank_;
    const int n = size_;
    return enqueue(
        c10d::OpType::SCATTER, call, {out}, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          if (me != root) {
            calls.push_back(c.irecv(dst.data(), bytes, DataType::uint8, root, options));
            return;
          }
          for (int j = 0; j < n; ++j) {
            const auto u = static_cast<size_t>(j);
            if (j == me)
              std::memmove(dst.data(), src[u].data(), bytes);
            else
              calls.push_back(c.isend(src[u].data(), bytes, DataType::uint8, j, options));
          }
        },
        [dst] { dst.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override {
    const std::string call = "send";
    at::Tensor& t = single(tensors, call);
    const CallOptions options = tagged(tag, call);
    check_peer(dst_rank, call);
    const Elements e = elements(t, call, false);
    const Staged s = stage(t, Use::read);
    return enqueue(
        c10d::OpType::SEND, call, {t}, true,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(c.isend(s.data(), e.count, e.type, dst_rank, options));
        },
        [] {});
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override {
    const std::string call = "recv";
    at::Tensor& t = single(tensors, call);
    const CallOptions options = tagged(tag, call);
    check_peer(src_rank, call);
    const Elements e = elements(t, call, false);
    const Staged s = stage(t, Use::write);
    return enqueue(
        c10d::OpType::RECV, call, {t}, true,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(c.irecv(s.data(), e.count, e.type, src_rank, options));
        },
        [s] { s.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>&, int) override {
    unsupported("recv",
                "a receive from any source is not supported (chorus matches the k-th "
                "send from a to b with the k-th recv at b from a): name the source rank");
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    const std::string call = "barrier";
    const CallOptions options = call_options(opts.timeout);
    return enqueue(
        c10d::OpType::BARRIER, call, {}, false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          calls.push_back(submit(c, {Collective::barrier, nullptr, nullptr, 0, DataType::uint8,
                                     ReduceOp::sum, 0, &options}));
        },
        [] {});
  }

 private:
  // A run of elements of a tensor, in bytes (for uneven all_to_all).
  struct Block {
    size_t offset = 0;
    size_t bytes = 0;
  };

  int root_rank(int64_t root, const std::string& call) const {
    if (root < 0 || root >= size_)
      unsupported(call,
                  "root " + std::to_string(root) + " outside [0, " + std::to_string(size_) + ")");
    return static_cast<int>(root);
  }

  void check_peer(int peer, const std::string& call) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      unsupported(call, "peer " + std::to_string(peer) + " is not another rank of this group of " +
                            std::to_string(size_));
  }

  // The k-th send from a to b matches the k-th recv at b from a, and their
  // tags must agree (a different tag raises mismatch on both): tags check
  // the order, they do not reorder messages as gloo's do.
  static CallOptions tagged(int tag, const std::string& call) {
    if (tag < 0)
      unsupported(call, "tag " + std::to_string(tag) + " is negative; chorus's tags are >= 0");
    CallOptions o;
    o.tag = tag;
    return o;
  }

  std::vector<Block> split_rows(const at::Tensor& t, const std::vector<int64_t>& splits,
                                const std::string& call, const char* what) const {
    if (t.dim() == 0)
      unsupported(call, std::string("the ") + what + " is a scalar; splits need rows");
    const int64_t rows = t.size(0);
    const size_t row_bytes = rows == 0 ? 0 : t.nbytes() / static_cast<size_t>(rows);
    std::vector<Block> blocks(static_cast<size_t>(size_));
    if (splits.empty()) {
      if (rows % size_ != 0)
        unsupported(call, std::string("the ") + what + "'s " + std::to_string(rows) +
                              " rows do not split evenly among " + std::to_string(size_) +
                              " ranks");
      for (int j = 0; j < size_; ++j)
        blocks[static_cast<size_t>(j)] = {
            static_cast<size_t>(j) * t.nbytes() / static_cast<size_t>(size_),
            t.nbytes() / static_cast<size_t>(size_)};
      return blocks;
    }
    if (splits.size() != static_cast<size_t>(size_))
      unsupported(call, std::string("the ") + what + " splits have " +
                            std::to_string(splits.size()) + " entries for a group of " +
                            std::to_string(size_));
    int64_t row = 0;
    for (int j = 0; j < size_; ++j) {
      const int64_t n = splits[static_cast<size_t>(j)];
      if (n < 0) unsupported(call, std::string("negative ") + what + " split " + std::to_string(n));
      blocks[static_cast<size_t>(j)] = {static_cast<size_t>(row) * row_bytes,
                                        static_cast<size_t>(n) * row_bytes};
      row += n;
    }
    if (row != rows)
      unsupported(call, std::string("the ") + what + " splits add up to " + std::to_string(row) +
                            " rows, the " + what + " has " + std::to_string(rows));
    return blocks;
  }

  // Block j of src goes to rank j, block j of dst comes from rank j.
  c10::intrusive_ptr<c10d::Work> exchange(c10d::OpType type, const std::string& call,
                                          std::vector<at::Tensor> outputs, const Staged& src,
                                          const std::vector<Block>& send, const Staged& dst,
                                          const std::vector<Block>& recv,
                                          const CallOptions& options) {
    const int me = rank_;
    const int n = size_;
    const Block mine_out = send[static_cast<size_t>(me)];
    const Block mine_in = recv[static_cast<size_t>(me)];
    if (mine_out.bytes != mine_in.bytes)
      unsupported(call, "rank " + std::to_string(me) + " sends itself " +
                            std::to_string(mine_out.bytes) + " bytes into a block of " +
                            std::to_string(mine_in.bytes));
    return enqueue(
        type, call, std::move(outputs), false,
        [=](Communicator& c, std::vector<CallHandle>& calls) {
          for (int j = 0; j < n; ++j) {
            const auto u = static_cast<size_t>(j);
            if (j == me) {
              std::memmove(dst.data() + mine_in.offset, src.data() + mine_out.offset,
                           mine_in.bytes);
              continue;
            }
            calls.push_back(
                c.isend(src.data() + send[u].offset, send[u].bytes, DataType::uint8, j, options));
            calls.push_back(
                c.irecv(dst.data() + recv[u].offset, recv[u].bytes, DataType::uint8, j, options));
          }
        },
        [dst] { dst.write_back(); });
  }

  c10::intrusive_ptr<c10d::Work> enqueue(
      c10d::OpType type, const std::string& call, std::vector<at::Tensor> outputs, bool user_p2p,
      std::function<void(Communicator&, std::vector<CallHandle>&)> start,
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

  // Ends an op whose chorus calls have all ended (or that failed to start).
  void complete(Op& op, std::exception_ptr error) {
    if (!error) {
      try {
        for (CallHandle& w : op.calls) w.wait();
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

  void run() {
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
        for (CallHandle& w : (*it)->calls) ended = ended && w.done();
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

  void shut_down() {
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

  Communicator comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Op>> queue_;
  int unfinished_ = 0;  // queued or in flight, under mu_
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace
}  // namespace chorus::torch_backend

PYBIND11_MODULE(_backend, m) {
  using chorus::torch_backend::ProcessGroupChorus;
  m.doc() = "chorus as a torch.distributed backend (import chorus.torch registers it)";
  py::module_::import("torch.distributed");  // c10d's classes, the base of ours
  py::class_<ProcessGroupChorus, c10::intrusive_ptr<ProcessGroupChorus>, c10d::ProcessGroup>(
      m, "ProcessGroupChorus", "A torch.distributed process group over one chorus communicator.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       double timeout_seconds) {
             if (!(timeout_seconds > 0))
               throw chorus::Error(chorus::ErrorCode::invalid_argument,
                                   "chorus backend: the timeout must be positive seconds");
             const double ms = std::ceil(timeout_seconds * 1000.0);
             const auto timeout = ms >= 1e15
                                      ? std::chrono::milliseconds::max()
                                      : std::chrono::milliseconds(static_cast<std::int64_t>(ms));
             return c10::make_intrusive<ProcessGroupChorus>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>(),
           "Meets the other ranks through `store` (a c10d Store); timeout in seconds.")
      .def("abort", &ProcessGroupChorus::abort, py::arg("reason"),
           py::call_guard<py::gil_scoped_release>(),
           "Aborts the communicator: pending and later calls fail here, and the peers raise "
           "chorus.AbortedError naming this rank and the reason.")
      .def_property_readonly("transport", &ProcessGroupChorus::transport_name,
                             "The name of the chorus transport under this group (shm, tcp, ...).")
      .def("flight_record", &ProcessGroupChorus::flight_record,
           "This rank's last 64 chorus calls as JSON text.")
      .def(
          "empty",
          [](ProcessGroupChorus& pg, const std::vector<int64_t>& size, py::handle dtype) {
            if (!THPDtype_Check(dtype.ptr()))
              throw chorus::Error(chorus::ErrorCode::invalid_argument,
                                  std::string("chorus backend: empty: dtype must be a "
                                              "torch.dtype, not ") +
                                      Py_TYPE(dtype.ptr())->tp_name);
            const at::ScalarType type = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
            at::Tensor t;
            {
              py::gil_scoped_release nogil;
              t = pg.empty(size, type);
            }
            return t;
          },
          py::arg("size"), py::arg("dtype"),
          "A collective: a CPU tensor of size and dtype in a new shared window of this group's "
          "communicator (shm only). Calls on tensors in windows read the peers' data in "
          "place. chorus.torch.empty is the front end.");
}
