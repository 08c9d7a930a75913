#include "transport/composite/composite_transport.h"

#include <algorithm>
#include <atomic>
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
  TransportKind kind() const override { return TransportKind::shm_tcp; }
  std::string address() const override { return tcp_->address(); }

  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override {
    const int local = local_[static_cast<size_t>(peer)];
    if (local >= 0) return shm_call([&] { return shm_->isend(local, data, bytes, stamp) << 1; });
    return (tcp_->isend(peer, data, bytes, stamp) << 1) | 1;
  }
  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer, const CallStamp& stamp,
                  WriteMode store) override {
    const int local = local_[static_cast<size_t>(peer)];
    if (local >= 0)
      return shm_call([&] { return shm_->irecv(local, dst, bytes, reducer, stamp, store) << 1; });
    return (tcp_->irecv(peer, dst, bytes, reducer, stamp, store) << 1) | 1;
  }
  void poll(std::vector<RequestId>& done) override {
    take(*shm_, 0, done, nullptr);
    take(*tcp_, 1, done, nullptr);
  }
  std::optional<CallStamp> waiting_message(int peer) override {
    const int local = local_[static_cast<size_t>(peer)];
    if (local >= 0) return shm_->waiting_message(local);
    return tcp_->waiting_message(peer);
  }
  void begin_call(const CallStamp& stamp) override {
    shm_call([&] {
      shm_->begin_call(stamp);
      return 0;
    });
    tcp_->begin_call(stamp);
  }
  std::vector<PeerProgress> peer_progress(Deadline deadline) override {
    std::vector<PeerProgress> out = tcp_->peer_progress(deadline);
    for (PeerProgress p : shm_->peer_progress(deadline)) {
      p.rank = global_of(p.rank);
      out.push_back(std::move(p));
    }
    std::sort(out.begin(), out.end(),
              [](const PeerProgress& a, const PeerProgress& b) { return a.rank < b.rank; });
    return out;
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
    auto run = [&] {
      if (until)
        t.wait_some(scratch_, *until);
      else
        t.poll(scratch_);
      return 0;
    };
    if (tag == 0)
      shm_call(run);
    else
      run();
    for (RequestId id : scratch_) done.push_back((id << 1) | tag);
  }

  // The job's rank of rank `local` of the shm group (this rank's own too,
  // which local_ leaves out).
  int global_of(int local) const {
    if (local == shm_->rank()) return rank_;
    for (size_t g = 0; g < local_.size(); ++g)
      if (local_[g] == local) return static_cast<int>(g);
    return -1;
  }

  // The shm transport speaks of ranks of its own group: a mismatch it finds
  // is restated with the job's ranks.
  template <typename F>
  auto shm_call(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const StampMismatch& m) {
      throw StampMismatch(global_of(m.rank), global_of(m.peer), m.mine, m.theirs);
    }
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
