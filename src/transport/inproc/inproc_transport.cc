#include "transport/inproc/inproc_transport.h"

#include "core/check.h"
#include "core/reduce_kernels.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

namespace chorus {

namespace {

struct PendingSend {
  RequestId id;
  const void* data;
  size_t bytes;
  CallStamp stamp;
};
struct PendingRecv {
  RequestId id;
  void* dst;
  size_t bytes;
  std::optional<Reducer> reducer;
  CallStamp stamp;
  WriteMode store;
};

// Messages of one ordered pair (src -> dst), matched in FIFO order.
struct Channel {
  std::mutex mu;
  std::deque<PendingSend> sends;
  std::deque<PendingRecv> recvs;
};

// A failed match: each side gets its own copy to throw (one exception
// object must not be thrown on two threads at once).
struct MatchError {
  std::optional<StampMismatch> stamps;
  std::string sizes;  // a size mismatch, when the stamps agree
  [[noreturn]] void raise() const {
    if (stamps) throw StampMismatch(*stamps);
    throw Error(ErrorCode::mismatch, sizes);
  }
};

struct Completion {
  RequestId id;
  std::optional<MatchError> error;  // unset on success
};

// Completion queue of one rank.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Completion> done;
  std::atomic<size_t> ready{0};  // size of `done`, for the lock-free spin
  // Peers this rank currently waits for (pending receives or sends), counted.
  std::vector<int> waiting_on;
  // Deliveries in progress on other threads that read or write this rank's
  // buffers (a pending request of this rank that a peer has taken off a
  // channel). A rank that withdraws waits for these to finish before its
  // buffers may go away.
  std::atomic<int> borrowed{0};
  // Where the rank is, for the stall reports of its peers.
  std::mutex state_mu;
  CallStamp last;
  uint32_t collectives = 0;
};

}  // namespace

class InprocWorld {
 public:
  explicit InprocWorld(int n)
      : n_(n),
        channels_(static_cast<size_t>(n) * static_cast<size_t>(n)),
        boxes_(static_cast<size_t>(n)),
        exited_(static_cast<size_t>(n)) {
    for (auto& b : boxes_) b.waiting_on.assign(static_cast<size_t>(n), 0);
  }

  int size() const { return n_; }
  Channel& channel(int src, int dst) {
    return channels_[static_cast<size_t>(src) * static_cast<size_t>(n_) + static_cast<size_t>(dst)];
  }
  Mailbox& box(int rank) { return boxes_[static_cast<size_t>(rank)]; }

  void complete(int rank, RequestId id, std::optional<MatchError> error = std::nullopt) {
    Mailbox& b = box(rank);
    {
      std::lock_guard lock(b.mu);
      b.done.push_back({id, std::move(error)});
      b.ready.store(b.done.size(), std::memory_order_release);
    }
    b.cv.notify_one();
  }

  void notify_all() {
    for (auto& b : boxes_) {
      { std::lock_guard lock(b.mu); }
      b.cv.notify_all();
    }
  }

  void mark_failed(int rank, ErrorCode cause, const std::string& reason) {
    {
      std::lock_guard lock(fail_mu_);
      if (failed_rank_ < 0) {
        failed_rank_ = rank;
        fail_cause_ = cause;
        fail_reason_ = reason;
      }
    }
    failed_.store(true, std::memory_order_release);
    notify_all();
  }

  void exited(int rank) {
    exited_[static_cast<size_t>(rank)].store(true, std::memory_order_release);
    notify_all();
  }
  bool has_exited(int rank) const {
    return exited_[static_cast<size_t>(rank)].load(std::memory_order_acquire);
  }

  // Throws when another rank failed, when a peer is in this rank's call with
  // another stamp, or when a peer this rank waits for is gone.
  void check_peers(int self) {
    if (failed_.load(std::memory_order_acquire)) {
      std::lock_guard lock(fail_mu_);
      if (failed_rank_ != self)
        throw PeerAborted(peer_code(fail_cause_),
                          str_cat("rank ", self, ": peer ", failed_rank_, " ",
                                  peer_verb(fail_cause_), ": ", fail_reason_),
                          fail_reason_);
    }
    Mailbox& b = box(self);
    CallStamp mine;
    {
      std::lock_guard lock(b.state_mu);
      mine = b.last;
    }
    for (int p = 0; p < n_; ++p) {
      if (p == self) continue;
      Mailbox& other = box(p);
      CallStamp theirs;
      {
        std::lock_guard lock(other.state_mu);
        theirs = other.last;
      }
      if (calls_disagree(mine, theirs)) throw StampMismatch(self, p, mine, theirs);
    }
    for (int p = 0; p < n_; ++p)
      if (b.waiting_on[static_cast<size_t>(p)] > 0 &&
          exited_[static_cast<size_t>(p)].load(std::memory_order_acquire)) {
        // A peer completes this rank's requests before it returns: a
        // completion not drained yet (pushed after this rank's last drain)
        // is visible now, and the caller drains it first.
        if (b.ready.load(std::memory_order_acquire) > 0) return;
        fail_with(ErrorCode::peer_failure, "rank ", self, ": peer ", p,
                  " has returned while this rank still waits for a message with it");
      }
  }

 private:
  template <typename... Parts>
  [[noreturn]] static void fail_with(ErrorCode code, Parts&&... parts) {
    ::chorus::fail(code, std::forward<Parts>(parts)...);
  }

  int n_;
  std::vector<Channel> channels_;
  std::vector<Mailbox> boxes_;
  std::vector<std::atomic<bool>> exited_;
  std::atomic<bool> failed_{false};
  std::mutex fail_mu_;
  int failed_rank_ = -1;
  ErrorCode fail_cause_ = ErrorCode::peer_failure;
  std::string fail_reason_;
};

namespace {

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocWorld> world, int rank, std::chrono::microseconds spin)
      : world_(std::move(world)), rank_(rank), spin_(spin) {}

  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  TransportKind kind() const override { return TransportKind::inproc; }
  bool shares_memory() const override { return true; }
  bool shares_cores() const override {
    return static_cast<unsigned>(world_->size()) > std::thread::hardware_concurrency();
  }
  void check_peer(int peer) override {
    check_rank(peer);
    world_->check_peers(rank_);
    if (world_->has_exited(peer))
      fail(ErrorCode::peer_failure, "rank ", rank_, ": peer ", peer,
           " has returned while this rank waits for its signal");
  }

  std::optional<CallStamp> waiting_message(int peer) override {
    Channel& ch = world_->channel(peer, rank_);
    std::lock_guard lock(ch.mu);
    if (!ch.recvs.empty() || ch.sends.empty()) return std::nullopt;
    return ch.sends.front().stamp;
  }
  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override {
    check_rank(peer);
    check_peer(peer);  // a failed peer, or one that has returned, fails the post
    const RequestId id = next_id_++;
    Channel& ch = world_->channel(rank_, peer);
    std::unique_lock lock(ch.mu);
    if (ch.recvs.empty()) {
      // Tracked before the peer can see it, so its completion always finds it.
      track(peer, id);
      ch.sends.push_back({id, data, bytes, stamp});
      return id;
    }
    PendingRecv r = std::move(ch.recvs.front());
    ch.recvs.pop_front();
    Mailbox& owner = world_->box(peer);
    owner.borrowed.fetch_add(1, std::memory_order_acq_rel);  // under the lock: see withdraw()
    lock.unlock();
    deliver(rank_, PendingSend{id, data, bytes, stamp}, peer, r);
    owner.borrowed.fetch_sub(1, std::memory_order_acq_rel);
    return id;
  }

  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer, const CallStamp& stamp,
                  WriteMode store) override {
    check_rank(peer);
    check_peer(peer);  // a failed peer, or one that has returned, fails the post
    const RequestId id = next_id_++;
    PendingRecv r{id,    dst,  bytes, reducer ? std::optional<Reducer>(*reducer) : std::nullopt,
                  stamp, store};
    Channel& ch = world_->channel(peer, rank_);
    std::unique_lock lock(ch.mu);
    if (ch.sends.empty()) {
      track(peer, id);
      ch.recvs.push_back(std::move(r));
      return id;
    }
    PendingSend s = ch.sends.front();
    ch.sends.pop_front();
    Mailbox& owner = world_->box(peer);
    owner.borrowed.fetch_add(1, std::memory_order_acq_rel);
    lock.unlock();
    deliver(peer, s, rank_, r);
    owner.borrowed.fetch_sub(1, std::memory_order_acq_rel);
    return id;
  }

  void begin_call(const CallStamp& stamp) override {
    Mailbox& b = world_->box(rank_);
    {
      std::lock_guard lock(b.state_mu);
      b.last = stamp;
      if (!stamp.point_to_point()) b.collectives = stamp.seq;
    }
    world_->check_peers(rank_);
  }

  std::vector<PeerProgress> peer_progress(Deadline) override {
    std::vector<PeerProgress> out;
    for (int p = 0; p < world_->size(); ++p) {
      if (p == rank_) continue;
      Mailbox& b = world_->box(p);
      PeerProgress pp;
      pp.rank = p;
      {
        std::lock_guard lock(b.state_mu);
        pp.last = b.last;
        pp.collectives_entered = b.collectives;
      }
      // Threads of one process: a peer is there unless it has returned.
      pp.responsive = !world_->has_exited(p);
      if (!pp.responsive) pp.note = "has returned from its rank function";
      out.push_back(std::move(pp));
    }
    return out;
  }

  void poll(std::vector<RequestId>& done) override { drain(done); }

  void wait_some(std::vector<RequestId>& done, Deadline deadline) override {
    const size_t before = done.size();
    Mailbox& b = world_->box(rank_);
    // Bounded spin first: a wake-up through the condition variable costs tens
    // of microseconds; yield so that oversubscribed threads still progress.
    const auto spin_end = Clock::now() + spin_;
    while (b.ready.load(std::memory_order_acquire) == 0 && Clock::now() < spin_end)
      std::this_thread::yield();
    while (true) {
      drain(done);
      if (done.size() > before) return;
      world_->check_peers(rank_);
      if (interrupted_.exchange(false, std::memory_order_acq_rel)) return;
      std::unique_lock lock(b.mu);
      if (!b.done.empty() || interrupted_.load(std::memory_order_acquire)) continue;
      if (Clock::now() >= deadline) return;
      // Wake at least every 100 ms to re-check peer state even without notify.
      const auto wake = std::min(deadline, Clock::now() + std::chrono::milliseconds(100));
      b.cv.wait_until(lock, wake);
    }
  }

  void abort(ErrorCode cause, const std::string& reason) override {
    world_->mark_failed(rank_, cause, reason);
    withdraw();
  }

  void interrupt() override {
    Mailbox& b = world_->box(rank_);
    interrupted_.store(true, std::memory_order_release);
    { std::lock_guard lock(b.mu); }
    b.cv.notify_all();
  }

  ~InprocTransport() override { withdraw(); }

 private:
  // Takes this rank's pending requests off every channel, then waits for
  // deliveries that peers took off before, so that no peer touches this
  // rank's buffers once it has failed or gone (its caller is about to unwind
  // and free them).
  void withdraw() {
    const int n = world_->size();
    for (int p = 0; p < n; ++p) {
      if (p == rank_) continue;
      {
        Channel& out = world_->channel(rank_, p);
        std::lock_guard lock(out.mu);
        out.sends.clear();
      }
      Channel& in = world_->channel(p, rank_);
      std::lock_guard lock(in.mu);
      in.recvs.clear();
    }
    Mailbox& b = world_->box(rank_);
    while (b.borrowed.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  }

  void check_rank(int peer) const {
    if (peer < 0 || peer >= world_->size() || peer == rank_)
      fail(ErrorCode::internal, "rank ", rank_, ": inproc transport: bad peer ", peer);
  }

  void track(int peer, RequestId id) {
    Mailbox& b = world_->box(rank_);
    std::lock_guard lock(b.mu);
    ++b.waiting_on[static_cast<size_t>(peer)];
    tracked_.emplace(id, peer);
  }

  // Moves one message; runs on whichever thread completed the match. A
  // mismatch fails both sides, and no byte lands.
  void deliver(int src, const PendingSend& s, int dst, const PendingRecv& r) {
    const RequestId send_id = s.id;
    const void* data = s.data;
    const size_t send_bytes = s.bytes;
    std::optional<MatchError> error;
    if (s.stamp != r.stamp) {
      error = MatchError{StampMismatch(dst, src, r.stamp, s.stamp), {}};
    } else if (send_bytes != r.bytes) {
      error = MatchError{std::nullopt,
                         str_cat("message size mismatch between rank ", src, " (sends ", send_bytes,
                                 " B) and rank ", dst, " (expects ", r.bytes, " B)")};
    }
    if (error) {
      world_->complete(src, send_id, error);
      world_->complete(dst, r.id, error);
      return;
    }
    if (send_bytes > 0) {
      if (r.reducer) {
        const size_t count = send_bytes / dtype_size(r.reducer->type);
        reduce_into(r.reducer->type, r.reducer->op, r.dst, r.reducer->local, data, count, r.store);
      } else {
        copy_bytes(r.dst, data, send_bytes, r.store);
      }
    }
    world_->complete(src, send_id);
    world_->complete(dst, r.id);
  }

  void drain(std::vector<RequestId>& done) {
    Mailbox& b = world_->box(rank_);
    if (b.ready.load(std::memory_order_acquire) == 0) return;
    std::vector<Completion> got;
    {
      std::lock_guard lock(b.mu);
      got.swap(b.done);
      b.ready.store(0, std::memory_order_release);
      for (const Completion& c : got) {
        auto it = tracked_.find(c.id);
        if (it != tracked_.end()) {
          --b.waiting_on[static_cast<size_t>(it->second)];
          tracked_.erase(it);
        }
      }
    }
    for (const Completion& c : got) {
      if (c.error) c.error->raise();
      done.push_back(c.id);
    }
  }

  std::shared_ptr<InprocWorld> world_;
  int rank_;
  std::chrono::microseconds spin_;
  std::atomic<bool> interrupted_{false};  // interrupt(): the next wait returns
  RequestId next_id_ = 1;
  // Requests left pending at post time, with their peer (guarded by box mu).
  std::unordered_map<RequestId, int> tracked_;
};

}  // namespace

std::shared_ptr<InprocWorld> make_inproc_world(int nranks) {
  return std::make_shared<InprocWorld>(nranks);
}

void inproc_rank_exited(InprocWorld& world, int rank) {
  world.exited(rank);
}

std::unique_ptr<Transport> make_inproc_transport(std::shared_ptr<InprocWorld> world, int rank,
                                                 std::chrono::microseconds spin) {
  return std::make_unique<InprocTransport>(std::move(world), rank, spin);
}

}  // namespace chorus
