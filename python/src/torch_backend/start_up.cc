// The torch backend's start-up over torch's c10d store (start_up.h).
#include "torch_backend/start_up.h"

#include "bootstrap/bootstrap.h"
#include "core/check.h"
#include "core/config.h"
#include "engine/communicator_impl.h"
#include "store/store.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace chorus::torch_backend {
namespace {

// chorus's Store over torch's c10d Store. c10d has no abort: abort()
// publishes the reason under kAbortKey, and every wait looks for it. c10d's
// get blocks until its own timeout, so waits poll check() instead, with
// growing pauses, until chorus's deadline.
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

// The host of the TCPStore under torch's prefix stores; "" for another
// store (a file store gives no host).
std::string tcp_store_host(c10::intrusive_ptr<c10d::Store> store) {
  while (auto* prefix = dynamic_cast<c10d::PrefixStore*>(store.get()))
    store = prefix->getUnderlyingStore();
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(store.get())) return tcp->getHost();
  return "";
}

}  // namespace

Communicator connect(const c10::intrusive_ptr<c10d::Store>& c10d_store, int rank, int size,
                     std::chrono::milliseconds timeout) {
  Config config = Config::from_env();
  config.timeout = timeout;
  const Deadline deadline = deadline_after(std::max(timeout, c10d_store->getTimeout()));
  TorchStore store(c10d_store);
  auto transport =
      bootstrap_over_store(store, tcp_store_host(c10d_store), rank, size, config, deadline);
  return make_communicator(std::move(transport), std::move(config));
}

}  // namespace chorus::torch_backend
