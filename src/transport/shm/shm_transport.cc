// The shm transport: FIFOs of slots in POSIX shared memory, one per ordered
// pair, a futex doorbell per receiving rank, and a single-copy path for large
// messages through process_vm_readv. See shm_transport.h and shm_segment.h.
//
// Protocol of one message a -> b (FIFO in b's segment, sender index a):
//   - inline: the message is cut into fragments of slot_bytes; each fragment
//     goes into the next free slot, published by its header's seq, so b
//     consumes fragment k while a fills k+1. A message of at most kSmallBytes
//     rides in the header's own cache line. A zero-byte message still takes
//     one slot.
//   - cross_memory (bytes >= cma_threshold, when every rank could read every
//     other with process_vm_readv at set-up): one slot carries the address of
//     a's buffer; b reads (or reads and reduces, in cache-sized pieces) straight
//     from a's memory into dst.
//   - b advances tail after it has used a slot. An inline send completes
//     once its last slot is published (eager): the data has left src, and the
//     sender may run ahead into its next call while b still has to read it,
//     which takes the slot-consumed round trip off every small message. A
//     cross-memory send completes when tail has passed its slot, because b
//     reads src in place. Programs never rely on either: they do not assume a
//     send completes before, or only after, its receive is posted.
//   - Each slot carries the stamp of the sending call. b compares it (and
//     the message size) with its receive's before it takes a byte; on a
//     difference b records the message, both sizes and its own stamp in
//     error_slot and throws. a throws mismatch too: at once when it still
//     has sends pending to b, otherwise at its next isend to b or once it
//     waits on anything (the slow path checks every peer's error_slot). An
//     eager send that already completed is thus reported by a's next call,
//     at the latest by its begin_call, which sees b's abort.
//
// Wake-ups: a rank that found nothing to do for `spin` announces it sleeps
// (doorbell.sleeping = 1), makes one last progress pass, and futex-waits on
// doorbell.seq for at most kLivenessPeriod. A peer that publishes a slot or a
// tail this rank may be waiting for then checks `sleeping` (all seq_cst) and only
// then bumps seq and issues FUTEX_WAKE (Dekker's pattern: either the waiter's
// last pass sees the new index, or the publisher sees `sleeping`).
#include "transport/shm/shm_transport.h"

#include "core/check.h"
#include "core/reduce_kernels.h"
#include "transport/shm/shm_segment.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <new>
#include <sstream>
#include <thread>

#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

namespace chorus {
namespace {

using shm::Doorbell;
using shm::FifoControl;
using shm::kCacheLine;
using shm::Layout;
using shm::Segment;
using shm::SegmentHeader;
using shm::SlotHeader;
using shm::SlotKind;

// A sleeping rank wakes at least this often to check that the peers it waits
// for are still alive (a SIGKILLed peer rings no doorbell).
constexpr std::chrono::milliseconds kLivenessPeriod{100};
// SlotHeader::fragment_bytes is 32 bits.
constexpr size_t kMaxSlotBytes = size_t{1} << 30;
// Piece size for a reduction over the cross-memory path: process_vm_readv
// into a buffer this small stays in L2, and the reduction reads it from
// there, so the piece costs about one extra pass over cache, not over DRAM.
constexpr size_t kCrossMemoryPiece = size_t{64} << 10;
// The start of the spin phase that busy-waits without yielding, when the
// rank may have a core of its own: long enough for a peer on another core to
// answer a small message, short enough not to matter when it shares ours.
constexpr std::chrono::microseconds kPausePhase{5};
// Polls between two clock reads in that phase. One poll of an unchanged FIFO
// is a few loads that hit the cache, plus one pause (about 25 ns on the
// development host, as long as a clock read): polling after every pause
// sees a message within ~50 ns of its arrival, where the earlier bursts of
// 16 pauses added ~0.2 us on average to every small message.
constexpr int kPollsPerClockRead = 8;
constexpr uint32_t kAliveStride = 64;
// isend publishes messages up to this size itself (a copy of a few
// microseconds at most); larger ones wait for the next progress pass, so
// that isend stays cheap.
constexpr size_t kPublishInIsendBytes = size_t{16} << 10;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

struct PendingSend {
  RequestId id;
  const std::byte* data;
  size_t bytes;
  CallStamp stamp;
  bool cross_memory;
  size_t written = 0;        // payload bytes placed in slots (inline)
  bool all_written = false;  // every slot of the message is published
  uint64_t last_slot = 0;
};

struct PendingRecv {
  RequestId id;
  std::byte* dst;
  size_t bytes;
  CallStamp stamp;
  bool reduce;
  Reducer reducer;
  size_t received = 0;
};

struct Peer {
  int rank = -1;
  pid_t pid = 0;
  Fd pidfd;
  Segment segment;  // the peer's segment (mapped; its name is already gone)
  SegmentHeader* header = nullptr;
  // Where this rank sends: the FIFO in the peer's segment.
  FifoControl* out = nullptr;
  std::byte* out_slots = nullptr;
  uint64_t out_next = 0;       // index of the next slot to publish
  uint64_t out_tail_seen = 0;  // last tail read from the peer
  // Where this rank receives from the peer: the FIFO in its own segment.
  FifoControl* in = nullptr;
  std::byte* in_slots = nullptr;
  uint64_t in_tail = 0;  // only this rank writes it
  std::deque<PendingSend> sends;
  size_t first_unwritten = 0;  // index into sends
  std::deque<PendingRecv> recvs;
  bool touched = false;  // this pass published an index the peer may wait for
};

class ShmTransport final : public Transport {
 public:
  ShmTransport(int rank, int size, const ShmOptions& options)
      : rank_(rank),
        size_(size),
        spin_(options.spin),
        cma_threshold_(options.cma_threshold),
        layout_{size, options.slots, options.slot_bytes},
        peers_(static_cast<size_t>(size)) {}

  ~ShmTransport() override {
    if (own_ != nullptr) {
      own_->closed.store(1, std::memory_order_release);
      ring_everyone();
    }
  }

  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  // Set-up; see make_shm_transport.
  void connect(Store& store, Deadline deadline);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  TransportKind kind() const override { return TransportKind::shm; }
  bool shares_memory() const override { return true; }
  void check_peer(int peer) override {
    const Peer& p = peers_[static_cast<size_t>(peer)];
    if (p.header == nullptr) return;
    check_not_aborted(p);
    const bool closed = p.header->closed.load(std::memory_order_acquire) != 0;
    if (closed || shm::process_exited(p.pidfd, p.pid))
      fail(ErrorCode::peer_failure, "rank ", rank_, ": shm: peer ", peer, " (pid ", p.pid, ") ",
           closed ? "closed its transport" : "exited", call_of(p),
           " while this rank waits for its signal");
  }

  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override {
    Peer& p = peer_at(peer, "isend");
    // An eager send of an earlier call may have been refused by the peer.
    check_send_error(p);
    const RequestId id = next_id_++;
    const bool cma = cma_enabled_ && cma_threshold_ > 0 && bytes >= cma_threshold_;
    p.sends.push_back(PendingSend{id, static_cast<const std::byte*>(data), bytes, stamp, cma});
    // A small message goes out now, not at the next progress pass: the peer
    // may be spinning on it. (It completes at that pass.)
    if (bytes <= kPublishInIsendBytes && p.first_unwritten + 1 == p.sends.size()) {
      fill_slots(p);
      if (p.touched) ring_touched();
    }
    return id;
  }

  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer,
                  const CallStamp& stamp) override {
    Peer& p = peer_at(peer, "irecv");
    const RequestId id = next_id_++;
    PendingRecv r{id,     static_cast<std::byte*>(dst), bytes, stamp, reducer != nullptr,
                  reducer ? *reducer : Reducer{}};
    if (r.reduce && bytes % dtype_size(r.reducer.type) != 0)
      fail(ErrorCode::invalid_argument, "rank ", rank_, ": shm irecv from peer ", peer, ": ", bytes,
           " B is not a whole number of ", to_string(r.reducer.type), " elements");
    p.recvs.push_back(r);
    return id;
  }

  void poll(std::vector<RequestId>& done) override { progress(done); }

  void begin_call(const CallStamp& stamp) override {
    current_ = stamp;
    if (own_ == nullptr) return;
    const uint32_t v = own_->call_version.load(std::memory_order_relaxed);
    own_->call_version.store(v + 1, std::memory_order_relaxed);
    shm::store_stamp(own_->call, stamp);  // release: after the odd version
    if (!stamp.point_to_point()) own_->collectives.store(stamp.seq, std::memory_order_release);
    own_->call_version.store(v + 2, std::memory_order_release);
    // A peer that aborted fails this call now, even one this call would not
    // exchange a message with. It flagged this rank's own header first.
    if (own_->peer_aborted.load(std::memory_order_acquire) != 0)
      for (const Peer& p : peers_)
        if (p.header != nullptr) check_not_aborted(p);
  }

  std::vector<PeerProgress> peer_progress(Deadline) override {
    std::vector<PeerProgress> out;
    const int64_t now = steady_ns();
    for (const Peer& p : peers_) {
      if (p.header == nullptr) continue;
      PeerProgress pp;
      pp.rank = p.rank;
      read_call(p, pp.last, pp.collectives_entered);
      const double silent =
          static_cast<double>(now - p.header->alive_ns.load(std::memory_order_relaxed)) * 1e-9;
      if (p.header->closed.load(std::memory_order_acquire) != 0) {
        pp.note = "closed its transport";
      } else if (shm::process_exited(p.pidfd, p.pid)) {
        pp.note = str_cat("exited (pid ", p.pid, ")");
      } else if (silent > 2 * std::chrono::duration<double>(kLivenessPeriod).count()) {
        // A rank inside a call polls at least every kLivenessPeriod; one that
        // does not is stopped, or busy outside chorus.
        pp.note = str_cat("has not polled for ", fixed1(silent), " s (pid ", p.pid, ")");
      } else {
        pp.responsive = true;
      }
      out.push_back(std::move(pp));
    }
    return out;
  }

  void wait_some(std::vector<RequestId>& done, Deadline deadline) override {
    const size_t before = done.size();
    if (own_ == nullptr) {
      // A group of one has no peer, so nothing can ever complete.
      std::this_thread::sleep_until(deadline);
      return;
    }
    // Liveness for stall reports: a clock read costs as much as a whole
    // small message, so a wait that completes at once stamps it only every
    // kAliveStride-th time; one that spins stamps it below.
    if (++waits_ % kAliveStride == 0) own_->alive_ns.store(steady_ns(), std::memory_order_relaxed);
    progress(done);
    if (done.size() > before || interrupted()) return;

    // Spin phase: cheap polls. A rank on a core of its own spins there for
    // the whole budget. Otherwise only the first few microseconds spin on
    // the core (and not at all with more ranks than CPUs); after that every
    // poll yields, because the peer we wait for may need this very core --
    // on a busy host it often does, and a pure spin would then cost the
    // whole budget plus a futex wake-up per message.
    if (!oversubscribed_) {
      // A reply is often a fraction of a microsecond away: poll before
      // paying for the first clock read.
      for (int i = 0; i < kPollsPerClockRead; ++i) {
        cpu_relax();
        progress(done);
        if (done.size() > before) return;
      }
    }
    const auto start = Clock::now();
    own_->alive_ns.store(to_ns(start), std::memory_order_relaxed);
    const auto spin_end = start + spin_;
    if (!oversubscribed_) {
      // A rank bound to a core no other rank may use spins its whole budget
      // on that core: yielding would only hand it to unrelated processes,
      // and getting it back from one can take a scheduler tick.
      const auto pause_end =
          dedicated_core_ ? spin_end : start + std::min<Clock::duration>(spin_, kPausePhase);
      for (auto now = start; now < pause_end; now = Clock::now()) {
        for (int i = 0; i < kPollsPerClockRead; ++i) {
          cpu_relax();
          progress(done);
          if (done.size() > before) return;
        }
        if (interrupted()) return;
      }
    }
    for (auto now = Clock::now(); now < spin_end; now = Clock::now()) {
      ::sched_yield();
      progress(done);
      if (done.size() > before || interrupted()) return;
    }

    Doorbell& bell = own_->bell;
    while (true) {
      check_peers(done);
      if (done.size() > before) return;
      const auto now = Clock::now();
      if (now >= deadline) return;
      // seq_cst, like the index stores of the peers and their load of
      // `sleeping`: see ring_touched().
      bell.sleeping.store(1, std::memory_order_seq_cst);
      const uint32_t seen = bell.seq.load(std::memory_order_seq_cst);
      progress(done);
      if (done.size() > before) {
        bell.sleeping.store(0, std::memory_order_relaxed);
        return;
      }
      const auto nap = std::min<Clock::duration>(deadline - now, kLivenessPeriod);
      shm::futex_wait(bell.seq, seen, std::chrono::duration_cast<std::chrono::nanoseconds>(nap));
      bell.sleeping.store(0, std::memory_order_relaxed);
      own_->alive_ns.store(steady_ns(), std::memory_order_relaxed);
      progress(done);
      if (done.size() > before || interrupted()) return;
    }
  }

  void abort(ErrorCode cause, const std::string& reason) override {
    if (own_ == nullptr) return;
    const size_t n = std::min(reason.size(), shm::kReasonBytes - 1);
    std::memcpy(own_->reason, reason.data(), n);
    own_->reason[n] = '\0';
    // 1 + the cause's code, so that 0 stays "not aborted".
    own_->aborted.store(1 + static_cast<uint32_t>(cause), std::memory_order_release);
    for (const Peer& p : peers_)
      if (p.header != nullptr) p.header->peer_aborted.store(1, std::memory_order_release);
    ring_everyone();
  }

  void interrupt() override {
    interrupted_.store(true, std::memory_order_release);
    if (own_ == nullptr) return;
    own_->bell.seq.fetch_add(1, std::memory_order_seq_cst);
    shm::futex_wake(own_->bell.seq);
  }

 private:
  // Whether interrupt() was called since the last look (which clears it).
  bool interrupted() {
    return interrupted_.load(std::memory_order_relaxed) &&
           interrupted_.exchange(false, std::memory_order_acquire);
  }

  Peer& peer_at(int peer, const char* what) {
    if (peer < 0 || peer >= size_ || peer == rank_)
      fail(ErrorCode::invalid_argument, "rank ", rank_, ": shm ", what, ": bad peer ", peer,
           " (group of ", size_, ")");
    return peers_[static_cast<size_t>(peer)];
  }

  std::byte* slot(std::byte* area, uint64_t index) const {
    return area + (index % layout_.slots) * layout_.slot_stride();
  }

  // One pass over every peer: consume what arrived, fill free slots, then ring
  // the peers that may be waiting for what this pass published.
  void progress(std::vector<RequestId>& done) {
    bool any = false;
    for (Peer& p : peers_) {
      if (p.rank < 0) continue;
      // Sends first: a peer may be waiting for exactly this message.
      if (!p.sends.empty()) send_to(p, done);
      if (!p.recvs.empty()) receive_from(p, done);
      any |= p.touched;
    }
    if (any) ring_touched();
  }

  void receive_from(Peer& p, std::vector<RequestId>& done) {
    while (!p.recvs.empty()) {
      std::byte* s = slot(p.in_slots, p.in_tail);
      auto& h = *reinterpret_cast<SlotHeader*>(s);
      if (h.seq.load(std::memory_order_seq_cst) != p.in_tail + 1) return;
      PendingRecv& r = p.recvs.front();
      // The first slot of a message: is it the message this receive expects?
      if (r.received == 0 && (h.stamp != r.stamp || h.message_bytes != r.bytes))
        refuse(p, r, h);
      if (h.kind == SlotKind::cross_memory) {
        uint64_t address;
        std::memcpy(&address, h.small, sizeof address);
        read_cross_memory(p, r, address);
        r.received = r.bytes;
      } else {
        if (h.kind != SlotKind::inline_data || h.stamp != r.stamp ||
            h.message_bytes != r.bytes || h.fragment_bytes > layout_.slot_bytes ||
            h.fragment_bytes > r.bytes - r.received ||
            (h.fragment_bytes == 0 && r.bytes > 0))
          fail(ErrorCode::internal, "rank ", rank_, ": shm: corrupt slot from peer ", p.rank,
               " (kind ", static_cast<uint32_t>(h.kind), ", fragment ", h.fragment_bytes,
               " B, at offset ", r.received, " of ", r.bytes, " B)");
        const std::byte* data = h.message_bytes <= shm::kSmallBytes ? h.small : s + kCacheLine;
        if (h.fragment_bytes > 0) deliver(r, data, h.fragment_bytes);
        r.received += h.fragment_bytes;
      }
      ++p.in_tail;
      p.in->tail.store(p.in_tail, std::memory_order_seq_cst);
      p.touched = true;
      if (r.received == r.bytes) {
        check_not_aborted(p);
        done.push_back(r.id);
        p.recvs.pop_front();
      }
    }
  }

  // A message waiting at the head of a peer's FIFO that no receive asks for
  // yet, of this rank's current collective call number with another stamp,
  // proves that the peer is in another call (a broadcast rooted elsewhere
  // sends to a rank that, on its own tree, receives from someone else): the
  // peer may already have moved on, so its published call says nothing.
  void check_unread_message(const Peer& p) const {
    if (!p.recvs.empty() || p.in_slots == nullptr) return;
    const auto& h = *reinterpret_cast<const SlotHeader*>(slot(p.in_slots, p.in_tail));
    if (h.seq.load(std::memory_order_acquire) != p.in_tail + 1) return;
    if (calls_disagree(current_, h.stamp)) throw StampMismatch(rank_, p.rank, current_, h.stamp);
  }

  // Refuses the message whose first slot `h` does not match receive `r`: the
  // sender learns why through error_slot, this rank throws. No byte lands.
  [[noreturn]] void refuse(Peer& p, const PendingRecv& r, const SlotHeader& h) {
    p.in->error_sent.store(h.message_bytes, std::memory_order_relaxed);
    p.in->error_expected.store(r.bytes, std::memory_order_relaxed);
    shm::store_stamp(p.in->error_stamp, r.stamp);
    p.in->error_slot.store(p.in_tail + 1, std::memory_order_release);
    p.touched = true;
    ring_touched();
    if (h.stamp != r.stamp) throw StampMismatch(rank_, p.rank, r.stamp, h.stamp);
    fail(ErrorCode::mismatch, "rank ", rank_, ": shm: message size mismatch: peer ", p.rank,
         " sends ", h.message_bytes, " B, this rank expects ", r.bytes, " B");
  }

  // Copies or reduces one inline fragment straight from the slot into dst.
  void deliver(const PendingRecv& r, const std::byte* data, size_t bytes) {
    std::byte* dst = r.dst + r.received;
    if (!r.reduce) {
      std::memcpy(dst, data, bytes);
      return;
    }
    const size_t elem = dtype_size(r.reducer.type);
    const auto* local = static_cast<const std::byte*>(r.reducer.local) + r.received;
    reduce_into(r.reducer.type, r.reducer.op, dst, local, data, bytes / elem);
  }

  void read_cross_memory(Peer& p, const PendingRecv& r, uint64_t address) {
    if (!r.reduce) {
      read_remote(p, r.dst, address, r.bytes);
      return;
    }
    // dst = local (+) remote, piece by piece through a cache-resident buffer.
    if (bounce_.empty()) bounce_.resize(kCrossMemoryPiece / sizeof(uint64_t));
    auto* buf = reinterpret_cast<std::byte*>(bounce_.data());
    const size_t elem = dtype_size(r.reducer.type);
    const auto* local = static_cast<const std::byte*>(r.reducer.local);
    for (size_t off = 0; off < r.bytes; off += kCrossMemoryPiece) {
      const size_t n = std::min(kCrossMemoryPiece, r.bytes - off);
      read_remote(p, buf, address + off, n);
      reduce_into(r.reducer.type, r.reducer.op, r.dst + off, local + off, buf, n / elem);
    }
  }

  void read_remote(Peer& p, std::byte* dst, uint64_t address, size_t bytes) {
    size_t got = 0;
    while (got < bytes) {
      iovec local{dst + got, bytes - got};
      iovec remote{reinterpret_cast<void*>(address + got), bytes - got};
      const ssize_t n = ::process_vm_readv(p.pid, &local, 1, &remote, 1, 0);
      if (n > 0) {
        got += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      const int err = n < 0 ? errno : EFAULT;
      if (err == ESRCH)
        fail(ErrorCode::peer_failure, "rank ", rank_, ": shm: peer ", p.rank, " (pid ", p.pid,
             ") exited while this rank was reading its message");
      fail(ErrorCode::system, "rank ", rank_, ": shm: process_vm_readv from peer ", p.rank,
           " (pid ", p.pid, "): ", std::strerror(err));
    }
  }

  void send_to(Peer& p, std::vector<RequestId>& done) {
    fill_slots(p);
    // Complete the sends in order: an inline one once all its slots are
    // published, a cross-memory one once the receiver has consumed its slot.
    while (!p.sends.empty() && p.sends.front().all_written) {
      const PendingSend& m = p.sends.front();
      if (m.cross_memory && p.out_tail_seen <= m.last_slot) {
        p.out_tail_seen = p.out->tail.load(std::memory_order_seq_cst);
        if (p.out_tail_seen <= m.last_slot) {
          check_send_error(p);
          return;
        }
      }
      check_not_aborted(p);
      done.push_back(m.id);
      p.sends.pop_front();
      --p.first_unwritten;
    }
    if (!p.sends.empty()) check_send_error(p);
  }

  // Fills free slots with the unwritten sends, in order.
  void fill_slots(Peer& p) {
    while (p.first_unwritten < p.sends.size()) {
      if (p.out_next - p.out_tail_seen == layout_.slots) {
        p.out_tail_seen = p.out->tail.load(std::memory_order_seq_cst);
        if (p.out_next - p.out_tail_seen == layout_.slots) break;
      }
      PendingSend& m = p.sends[p.first_unwritten];
      std::byte* s = slot(p.out_slots, p.out_next);
      auto& h = *reinterpret_cast<SlotHeader*>(s);
      h.message_bytes = m.bytes;
      h.stamp = m.stamp;
      if (m.cross_memory) {
        h.kind = SlotKind::cross_memory;
        const auto address = reinterpret_cast<uint64_t>(m.data);
        std::memcpy(h.small, &address, sizeof address);
        h.fragment_bytes = 0;
        m.written = m.bytes;
      } else {
        const size_t n = std::min(layout_.slot_bytes, m.bytes - m.written);
        h.kind = SlotKind::inline_data;
        h.fragment_bytes = static_cast<uint32_t>(n);
        std::byte* data = m.bytes <= shm::kSmallBytes ? h.small : s + kCacheLine;
        if (n > 0) std::memcpy(data, m.data + m.written, n);
        m.written += n;
      }
      m.last_slot = p.out_next;
      ++p.out_next;
      h.seq.store(p.out_next, std::memory_order_seq_cst);  // publishes the slot
      p.touched = true;
      if (m.written == m.bytes) {
        m.all_written = true;
        ++p.first_unwritten;
      }
    }
  }

  void check_send_error(const Peer& p) {
    const uint64_t e = p.out->error_slot.load(std::memory_order_acquire);
    if (e == 0) return;
    // The refused slot stays as it was: the receiver never moved past it.
    const auto& h = *reinterpret_cast<const SlotHeader*>(slot(p.out_slots, e - 1));
    const CallStamp expected = shm::load_stamp(p.out->error_stamp);
    if (h.stamp != expected) throw StampMismatch(p.rank, rank_, expected, h.stamp);
    fail(ErrorCode::mismatch, "rank ", rank_, ": shm: message size mismatch: this rank sends ",
         p.out->error_sent.load(std::memory_order_relaxed), " B, peer ", p.rank, " expects ",
         p.out->error_expected.load(std::memory_order_relaxed), " B");
  }

  // The call a peer last published (stall reports, failure messages).
  // False when the peer kept rewriting it (the values are then unset).
  static bool read_call(const Peer& p, CallStamp& stamp, uint32_t& collectives) {
    const SegmentHeader& h = *p.header;
    for (int attempt = 0; attempt < 100; ++attempt) {
      const uint32_t v = h.call_version.load(std::memory_order_acquire);
      if (v % 2 != 0) continue;
      stamp = shm::load_stamp(h.call);  // acquire: before the second look
      collectives = h.collectives.load(std::memory_order_acquire);
      if (h.call_version.load(std::memory_order_relaxed) == v) return true;
    }
    stamp = {};
    collectives = 0;
    return false;
  }

  // " (in call 17: allreduce(float32 sum, count 8))", or "" before any call.
  static std::string call_of(const Peer& p) {
    CallStamp stamp;
    uint32_t collectives = 0;
    read_call(p, stamp, collectives);
    if (stamp.kind == 0) return {};
    return str_cat(" (", stamp.point_to_point() ? "in its point-to-point message " : "in call ",
                   stamp.seq, ": ", describe(stamp, ""), ")");
  }

  static int64_t to_ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  static int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  }
  static std::string fixed1(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }

  // A message exchanged with a peer that has aborted fails this rank too,
  // even when the message itself arrived whole (an eager send lets a late
  // rank find its data although the peer gave up on the call). The flag's
  // line is written only on abort, so this load is a cache hit.
  void check_not_aborted(const Peer& p) {
    const uint32_t flag = p.header->aborted.load(std::memory_order_acquire);
    if (flag == 0) return;
    std::string reason(p.header->reason, strnlen(p.header->reason, shm::kReasonBytes));
    const auto cause = flag - 1 <= static_cast<uint32_t>(ErrorCode::internal)
                           ? static_cast<ErrorCode>(flag - 1)
                           : ErrorCode::peer_failure;
    throw PeerAborted(peer_code(cause),
                      str_cat("rank ", rank_, ": shm: peer ", p.rank, " ", peer_verb(cause), ": ",
                              reason),
                      reason);
  }

  // Wakes the touched peers that announced they sleep. Every slot seq and
  // tail store and load, the waiter's `sleeping` store and this load of it are seq_cst,
  // so they sit in one total order: if the waiter's last pass missed an index
  // published here, its `sleeping = 1` came before that store, hence before
  // this load, which therefore sees it. (Fences would do the same but are not
  // supported by ThreadSanitizer.) On x86 only the stores cost an xchg.
  void ring_touched() {
    for (Peer& p : peers_) {
      if (!p.touched) continue;
      p.touched = false;
      Doorbell& bell = p.header->bell;
      if (bell.sleeping.load(std::memory_order_seq_cst) != 0) {
        bell.seq.fetch_add(1, std::memory_order_seq_cst);
        shm::futex_wake(bell.seq);
      }
    }
  }

  void ring_everyone() {
    for (Peer& p : peers_) {
      if (p.header == nullptr) continue;
      p.header->bell.seq.fetch_add(1, std::memory_order_seq_cst);
      shm::futex_wake(p.header->bell.seq);
    }
  }

  // The slow-path checks: a peer that aborted fails this rank at once, and so
  // does one in this rank's collective call with another stamp; a peer
  // that exited or closed its transport fails it when this rank still has
  // messages pending with that peer after one more drain.
  void check_peers(std::vector<RequestId>& done) {
    for (const Peer& p : peers_) {
      if (p.header == nullptr) continue;
      // A refused message first: the peer aborts right after refusing it,
      // and the mismatch is the better report.
      check_send_error(p);
      check_not_aborted(p);
      CallStamp theirs;
      uint32_t collectives = 0;
      if (read_call(p, theirs, collectives) && calls_disagree(current_, theirs)) throw StampMismatch(rank_, p.rank, current_, theirs);
      check_unread_message(p);
    }
    // Probing liveness costs a system call per peer: at most once a period.
    const auto now = Clock::now();
    const bool probe = now - last_liveness_probe_ >= kLivenessPeriod / 2;
    if (probe) last_liveness_probe_ = now;
    std::vector<int> gone;
    for (const Peer& p : peers_) {
      if (p.header == nullptr || (p.sends.empty() && p.recvs.empty())) continue;
      if (p.header->closed.load(std::memory_order_acquire) != 0 ||
          (probe && shm::process_exited(p.pidfd, p.pid)))
        gone.push_back(p.rank);
    }
    if (gone.empty()) return;
    // What a peer published before it left is visible now; use it first.
    const size_t before = done.size();
    progress(done);
    if (done.size() > before) return;
    for (int g : gone) {
      const Peer& p = peers_[static_cast<size_t>(g)];
      if (p.sends.empty() && p.recvs.empty()) continue;
      fail(
          ErrorCode::peer_failure, "rank ", rank_, ": shm: peer ", g, " (pid ", p.pid, ") ",
          p.header->closed.load(std::memory_order_acquire) != 0 ? "closed its transport" : "exited",
          call_of(p), " while this rank still has ", p.sends.size(), " send(s) and ",
          p.recvs.size(), " receive(s) pending with it");
    }
  }

  int rank_;
  int size_;
  std::atomic<bool> interrupted_{false};
  CallStamp current_;  // the call this rank entered last
  std::chrono::microseconds spin_;
  size_t cma_threshold_;
  Layout layout_;
  // More ranks than the CPUs they may use together: a spinning rank can hold
  // the core the sender needs, so every spin iteration yields.
  bool oversubscribed_ = false;
  uint32_t waits_ = 0;  // wait_some calls, for the stride of liveness stamps
  // This rank may run on one CPU only, and no other rank may run there.
  bool dedicated_core_ = false;
  bool cma_enabled_ = false;
  Segment own_segment_;
  SegmentHeader* own_ = nullptr;
  std::vector<Peer> peers_;
  RequestId next_id_ = 1;
  Clock::time_point last_liveness_probe_{};
  std::vector<uint64_t> bounce_;  // cross-memory reduction pieces (uint64 for alignment)
  // Peers read this through process_vm_readv at set-up to prove they can.
  uint64_t cma_probe_ = shm::kMagic;
};

// The calling thread's CPU affinity; every CPU when it cannot be read.
shm::CpuMask current_cpus() {
  shm::CpuMask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    for (auto& w : m.words) w = ~uint64_t{0};
    return m;
  }
  for (size_t c = 0; c < shm::kCpuWords * 64 && c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) m.words[c / 64] |= uint64_t{1} << (c % 64);
  return m;
}

std::string segment_key(int rank) {
  return str_cat("shm/segment/", rank);
}
std::string attached_key(int rank) {
  return str_cat("shm/attached/", rank);
}

std::vector<uint8_t> to_bytes(const std::string& s) {
  return {s.begin(), s.end()};
}
std::string from_bytes(const std::vector<uint8_t>& v) {
  return {v.begin(), v.end()};
}

void ShmTransport::connect(Store& store, Deadline deadline) {
  // 1. Create this rank's segment and initialize it before anyone sees it.
  const pid_t pid = ::getpid();
  const auto nonce = static_cast<unsigned long long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
  const std::string name = str_cat("/chorus-", pid, "-", rank_, "-", std::hex, nonce);
  const size_t bytes = layout_.total_bytes();
  own_segment_ = Segment::create(name, bytes);
  std::byte* base = own_segment_.base();
  own_ = new (base) SegmentHeader();
  own_->magic = shm::kMagic;
  own_->version = shm::kLayoutVersion;
  own_->rank = rank_;
  own_->size = size_;
  own_->pid = pid;
  own_->slots = layout_.slots;
  own_->slot_bytes = layout_.slot_bytes;
  own_->total_bytes = bytes;
  own_->cpus = current_cpus();
  for (int s = 0; s < size_; ++s) new (base + layout_.fifo_control_offset(s)) FifoControl();

  // 2. Publish it; attach every peer's segment.
  std::ostringstream desc;
  desc << name << ' ' << pid << ' ' << layout_.slots << ' ' << layout_.slot_bytes << ' '
       << reinterpret_cast<uint64_t>(&cma_probe_);
  store.set(segment_key(rank_), to_bytes(desc.str()));

  bool cma_ok = true;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    std::istringstream in(from_bytes(store.get(segment_key(q), deadline)));
    std::string peer_name;
    long long peer_pid = 0;
    size_t slots = 0, slot_bytes = 0;
    uint64_t probe = 0;
    if (!(in >> peer_name >> peer_pid >> slots >> slot_bytes >> probe))
      fail(ErrorCode::mismatch, "rank ", rank_, ": shm set-up: malformed segment record of peer ",
           q);
    if (slots != layout_.slots || slot_bytes != layout_.slot_bytes)
      fail(ErrorCode::mismatch, "rank ", rank_, ": shm set-up: peer ", q, " uses ", slots,
           " slots of ", slot_bytes, " B, this rank ", layout_.slots, " slots of ",
           layout_.slot_bytes, " B");
    Peer& p = peers_[static_cast<size_t>(q)];
    p.rank = q;
    p.pid = static_cast<pid_t>(peer_pid);
    p.pidfd = shm::open_pidfd(p.pid);
    p.segment = Segment::attach(peer_name, bytes);
    p.header = reinterpret_cast<SegmentHeader*>(p.segment.base());
    if (p.header->magic != shm::kMagic || p.header->version != shm::kLayoutVersion ||
        p.header->rank != q || p.header->size != size_)
      fail(ErrorCode::mismatch, "rank ", rank_, ": shm set-up: segment ", peer_name, " of peer ", q,
           " does not belong to this group (rank ", p.header->rank, " of ", p.header->size, ")");
    p.out = reinterpret_cast<FifoControl*>(p.segment.base() + layout_.fifo_control_offset(rank_));
    p.out_slots = p.segment.base() + layout_.slot_area_offset(q, rank_);
    p.in = reinterpret_cast<FifoControl*>(base + layout_.fifo_control_offset(q));
    p.in_slots = base + layout_.slot_area_offset(rank_, q);

    // Can this rank read the peer's memory in one copy? (EPERM under a strict
    // ptrace policy or in some containers; then everyone uses slots.)
    uint64_t value = 0;
    iovec local{&value, sizeof value};
    iovec remote{reinterpret_cast<void*>(probe), sizeof value};
    if (::process_vm_readv(p.pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof value) ||
        value != shm::kMagic)
      cma_ok = false;
  }

  // 3. Everyone attached: the names can go, so that no segment outlives the
  // group even if a rank is killed from now on.
  store.set(attached_key(rank_), to_bytes(cma_ok ? "1" : "0"));
  bool all_cma = cma_ok;
  for (int q = 0; q < size_; ++q)
    if (q != rank_) all_cma &= from_bytes(store.get(attached_key(q), deadline)) == "1";
  own_segment_.unlink();
  cma_enabled_ = all_cma;

  // Who may spin: compare the affinities every rank published.
  shm::CpuMask all = own_->cpus, others;
  for (const Peer& p : peers_) {
    if (p.header == nullptr) continue;
    for (size_t w = 0; w < shm::kCpuWords; ++w) {
      all.words[w] |= p.header->cpus.words[w];
      others.words[w] |= p.header->cpus.words[w];
    }
  }
  int usable = 0, mine = 0;
  bool shared = false;
  for (size_t w = 0; w < shm::kCpuWords; ++w) {
    usable += std::popcount(all.words[w]);
    mine += std::popcount(own_->cpus.words[w]);
    shared |= (own_->cpus.words[w] & others.words[w]) != 0;
  }
  oversubscribed_ = usable < size_;
  dedicated_core_ = !oversubscribed_ && mine == 1 && !shared;
}

}  // namespace

std::unique_ptr<Transport> make_shm_transport(Store& store, int rank, int size,
                                              const ShmOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::invalid_argument, "shm transport: rank ", rank, " of ", size,
         " is not a valid rank of the group");
  if (options.slots < 2)
    fail(ErrorCode::invalid_argument, "rank ", rank, ": shm transport: slots = ", options.slots,
         "; at least 2 are needed to pipeline a message");
  if (options.slot_bytes == 0 || options.slot_bytes % kCacheLine != 0 ||
      options.slot_bytes > kMaxSlotBytes)
    fail(ErrorCode::invalid_argument, "rank ", rank,
         ": shm transport: slot_bytes = ", options.slot_bytes, " must be a positive multiple of ",
         kCacheLine, " up to ", kMaxSlotBytes);
  if (options.spin.count() < 0)
    fail(ErrorCode::invalid_argument, "rank ", rank, ": shm transport: negative spin");
  auto t = std::make_unique<ShmTransport>(rank, size, options);
  if (size > 1) t->connect(store, options.deadline);
  return t;
}

}  // namespace chorus
