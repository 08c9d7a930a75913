#include "transport/composite/composite_transport.h"

#include <atomic>
#include <algorithm>
#include <chrono>

namespace chorus {

namespace {

// Routes each peer to shm_ or tcp_, as composite_transport.h describes.
class CompositeTransport final : public Transport {
 public:
  CompositeTransport(int rank, int size, std::unique_ptr<Transport> shm,
                     std::vector<int> local_of_global, std::unique_ptr<Transport> tcp)
      : rank_(rank),
        size_(size),
        shm_(std::move(shm)),
        tcp_(std::move(tcp)),
        local_(std::move(local_of_global)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "shm+tcp"; }

  RequestId isend(int peer, const void* data, size_t bytes) override {
    const int local = local_[static_cast<size_t>(peer)];
    if (local >= 0) return shm_->isend(local, data, bytes) << 1;
    return (tcp_->isend(peer, data, bytes) << 1) | 1;
  }
  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer) override {
    const int local = local_[static_cast<size_t>(peer)];
    if (local >= 0) return shm_->irecv(local, dst, bytes, reducer) << 1;
    return (tcp_->irecv(peer, dst, bytes, reducer) << 1) | 1;
  }
  void poll(std::vector<RequestId>& done) override {
    take(*shm_, 0, done, nullptr);
    take(*tcp_, 1, done, nullptr);
  }
  void wait_some(std::vector<RequestId>& done, Deadline deadline) override {
    const size_t before = done.size();
    while (true) {
      poll(done);
      if (done.size() > before) return;
      const auto now = Clock::now();
      if (now >= deadline) return;
      const Deadline slice = std::min(deadline, now + kSlice);
      take(*shm_, 0, done, &slice);
      if (done.size() > before) return;
      take(*tcp_, 1, done, &slice);
      if (done.size() > before) return;
      if (interrupted_.exchange(false, std::memory_order_acquire)) return;
    }
  }
  void abort(ErrorCode cause, const std::string& reason) override {
    shm_->abort(cause, reason);
    tcp_->abort(cause, reason);
  }
  void interrupt() override {
    interrupted_.store(true, std::memory_order_release);
    shm_->interrupt();
    tcp_->interrupt();
  }

 private:
  static constexpr auto kSlice = std::chrono::microseconds(200);

  void take(Transport& t, RequestId tag, std::vector<RequestId>& done, const Deadline* until) {
    scratch_.clear();
    if (until) t.wait_some(scratch_, *until);
    else t.poll(scratch_);
    for (RequestId id : scratch_) done.push_back((id << 1) | tag);
  }

  int rank_;
  int size_;
  std::atomic<bool> interrupted_{false};
  std::unique_ptr<Transport> shm_;
  std::unique_ptr<Transport> tcp_;
  std::vector<int> local_;  // global rank -> rank in the shm group, -1 = over tcp
  std::vector<RequestId> scratch_;
};

}  // namespace

std::unique_ptr<Transport> make_composite_transport(int rank, int size,
                                                    std::unique_ptr<Transport> shm,
                                                    std::vector<int> local_of_global,
                                                    std::unique_ptr<Transport> tcp) {
  return std::make_unique<CompositeTransport>(rank, size, std::move(shm),
                                              std::move(local_of_global), std::move(tcp));
}

}  // namespace chorus
