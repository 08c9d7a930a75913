// The shm transport's implementation class, private to transport/shm/: the
// per-peer state and ShmTransport, the Transport over the FIFOs of slots in
// the ranks' segments (shm_segment.h has their layout). Its members are
// defined by section, one file each:
//   shm_transport.cc  construction and set-up: creating this rank's segment,
//                     attaching the peers', deciding who may spin
//   shm_fifo.cc       the message path: isend, irecv, and the progress pass
//                     that fills slots and consumes them (copying or reducing
//                     from them, or from the sender's memory); one file, so
//                     that the pass inlines both sides
//   shm_wait.cc       waiting: spinning, then sleeping on the doorbell
//   shm_liveness.cc   liveness and failures: the call each rank publishes,
//                     stall reports, aborts, exited or closed peers
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
#pragma once

#include "core/cpu_relax.h"
#include "store/store.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_transport.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <sys/types.h>

namespace chorus::shm {

// A sleeping rank wakes at least this often to check that the peers it waits
// for are still alive (a SIGKILLed peer rings no doorbell).
inline constexpr std::chrono::milliseconds kLivenessPeriod{100};
// SlotHeader::fragment_bytes is 32 bits.
inline constexpr size_t kMaxSlotBytes = size_t{1} << 30;
// Piece size for a reduction over the cross-memory path: process_vm_readv
// into a buffer this small stays in L2, and the reduction reads it from
// there, so the piece costs about one extra pass over cache, not over DRAM.
inline constexpr size_t kCrossMemoryPiece = size_t{64} << 10;
// The start of the spin phase that busy-waits without yielding, when the
// rank may have a core of its own: long enough for a peer on another core to
// answer a small message, short enough not to matter when it shares ours.
inline constexpr std::chrono::microseconds kPausePhase{5};
// Polls between two clock reads in that phase. One poll of an unchanged FIFO
// is a few loads that hit the cache, plus one pause (about 25 ns on the
// development host, as long as a clock read): polling after every pause
// sees a message within ~50 ns of its arrival, where the earlier bursts of
// 16 pauses added ~0.2 us on average to every small message.
inline constexpr int kPollsPerClockRead = 8;
inline constexpr uint32_t kAliveStride = 64;
// isend publishes messages up to this size itself (a copy of a few
// microseconds at most); larger ones wait for the next progress pass, so
// that isend stays cheap.
inline constexpr size_t kPublishInIsendBytes = size_t{16} << 10;

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
  WriteMode store;  // how deliver() and the cross-memory read write dst
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
  ShmTransport(int rank, int size, const ShmOptions& options);
  ~ShmTransport() override;

  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  // Set-up; see make_shm_transport.
  void connect(Store& store, Deadline deadline);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  TransportKind kind() const override { return TransportKind::shm; }
  bool shares_memory() const override { return true; }
  bool shares_cores() const override { return oversubscribed_; }
  void check_peer(int peer) override;
  std::optional<CallStamp> waiting_message(int peer) override;

  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override;
  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer, const CallStamp& stamp,
                  WriteMode store) override;
  void poll(std::vector<RequestId>& done) override { progress(done); }
  void begin_call(const CallStamp& stamp) override;
  std::vector<PeerProgress> peer_progress(Deadline deadline) override;
  void wait_some(std::vector<RequestId>& done, Deadline deadline) override;
  void abort(ErrorCode cause, const std::string& reason) override;
  void interrupt() override;

 private:
  // Whether interrupt() was called since the last look (which clears it).
  bool interrupted() {
    return interrupted_.load(std::memory_order_relaxed) &&
           interrupted_.exchange(false, std::memory_order_acquire);
  }

  Peer& peer_at(int peer, const char* what) {
    if (peer < 0 || peer >= size_ || peer == rank_) bad_peer(peer, what);
    return peers_[static_cast<size_t>(peer)];
  }
  [[noreturn]] void bad_peer(int peer, const char* what) const;

  std::byte* slot(std::byte* area, uint64_t index) const {
    return area + (index % layout_.slots) * layout_.slot_stride();
  }

  // --- the message path (shm_fifo.cc)
  //
  // The members declared inline here are defined in shm_fifo.cc and used
  // there only, so that the compiler folds them into the progress pass and
  // isend, as it did while the class lived in one file with internal
  // linkage (receive_from, larger than its inlining limit, is called only
  // from the pass, and was folded in as a function called once).

  // One pass over every peer: consume what arrived, fill free slots, then ring
  // the peers that may be waiting for what this pass published.
  void progress(std::vector<RequestId>& done);
  // Wakes the touched peers that announced they sleep. Every slot seq and
  // tail store and load, the waiter's `sleeping` store and this load of it
  // are seq_cst, so they sit in one total order: if the waiter's last pass
  // missed an index published here, its `sleeping = 1` came before that
  // store, hence before this load, which therefore sees it. (Fences would do
  // the same but are not supported by ThreadSanitizer.) On x86 only the
  // stores cost an xchg.
  inline void ring_touched();
  // Wakes every peer (an abort, a closing transport).
  void ring_everyone();

  // Sends:

  // Publishes what fits of the peer's sends and completes those that are done.
  inline void send_to(Peer& p, std::vector<RequestId>& done);
  // Fills free slots with the unwritten sends, in order.
  inline void fill_slots(Peer& p);
  // Throws the mismatch the peer found in a message from this rank, if any.
  // The line it loads is written only on a mismatch, so it stays cached.
  void check_send_error(const Peer& p) const {
    const uint64_t e = p.out->error_slot.load(std::memory_order_acquire);
    if (e != 0) raise_send_error(p, e);
  }
  [[noreturn]] void raise_send_error(const Peer& p, uint64_t error_slot) const;

  // Receives:

  // Consumes the published slots of the peer's FIFO into its receives.
  [[gnu::always_inline]] inline void receive_from(Peer& p, std::vector<RequestId>& done);
  // A message waiting at the head of a peer's FIFO that no receive asks for
  // yet, of this rank's current collective call number with another stamp,
  // proves that the peer is in another call (a broadcast rooted elsewhere
  // sends to a rank that, on its own tree, receives from someone else): the
  // peer may already have moved on, so its published call says nothing.
  void check_unread_message(const Peer& p) const;
  // Refuses the message whose first slot `h` does not match receive `r`: the
  // sender learns why through error_slot, this rank throws. No byte lands.
  [[noreturn]] void refuse(Peer& p, const PendingRecv& r, const SlotHeader& h);
  // Copies or reduces one inline fragment straight from the slot into dst.
  inline void deliver(const PendingRecv& r, const std::byte* data, size_t bytes);
  inline void read_cross_memory(Peer& p, const PendingRecv& r, uint64_t address);
  void read_remote(Peer& p, std::byte* dst, uint64_t address, size_t bytes);

  // --- liveness and failures (shm_liveness.cc)

  // A message exchanged with a peer that has aborted fails this rank too,
  // even when the message itself arrived whole (an eager send lets a late
  // rank find its data although the peer gave up on the call). The flag's
  // line is written only on abort, so this load is a cache hit.
  void check_not_aborted(const Peer& p) const {
    const uint32_t flag = p.header->aborted.load(std::memory_order_acquire);
    if (flag != 0) raise_peer_aborted(p, flag);
  }
  [[noreturn]] void raise_peer_aborted(const Peer& p, uint32_t flag) const;
  // The slow-path checks: a peer that aborted fails this rank at once, and so
  // does one in this rank's collective call with another stamp; a peer
  // that exited or closed its transport fails it when this rank still has
  // messages pending with that peer after one more drain.
  void check_peers(std::vector<RequestId>& done);
  // The call a peer last published (stall reports, failure messages).
  // False when the peer kept rewriting it (the values are then unset).
  static bool read_call(const Peer& p, CallStamp& stamp, uint32_t& collectives);
  // " (in call 17: allreduce(float32 sum, count 8))", or "" before any call.
  static std::string call_of(const Peer& p);

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
  uint64_t cma_probe_ = kMagic;
};

// The steady clock in nanoseconds (the liveness stamps in segment headers).
inline int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline int64_t steady_ns() {
  return to_ns(Clock::now());
}

}  // namespace chorus::shm
