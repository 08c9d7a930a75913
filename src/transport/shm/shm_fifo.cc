// The shm transport's message path: isend and irecv, and the progress pass
// that moves messages through the FIFOs. A send goes into the next free
// slots of its FIFO in the receiver's segment (or, cross-memory, one slot
// carries its address) and completes once published (cross-memory: once
// consumed); a receive checks each message's first slot against its stamp
// and size before any byte lands, then copies or reduces straight from the
// slots, or reads the sender's memory with process_vm_readv. Publishing
// rings the doorbell of a peer that said it sleeps.
//
// Sends and receives share this file because the progress pass, which a
// waiting rank runs every few tens of nanoseconds, calls both: in one
// translation unit the compiler inlines them into it.
#include "transport/shm/shm_transport_impl.h"

#include "core/check.h"
#include "core/reduce_kernels.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace chorus::shm {

RequestId ShmTransport::isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) {
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

RequestId ShmTransport::irecv(int peer, void* dst, size_t bytes, const Reducer* reducer,
                              const CallStamp& stamp, WriteMode store) {
  Peer& p = peer_at(peer, "irecv");
  const RequestId id = next_id_++;
  PendingRecv r{id,    static_cast<std::byte*>(dst), bytes,
                stamp, reducer != nullptr,           reducer ? *reducer : Reducer{},
                store};
  if (r.reduce && bytes % dtype_size(r.reducer.type) != 0)
    fail(ErrorCode::invalid_argument, "rank ", rank_, ": shm irecv from peer ", peer, ": ", bytes,
         " B is not a whole number of ", to_string(r.reducer.type), " elements");
  p.recvs.push_back(r);
  return id;
}

void ShmTransport::progress(std::vector<RequestId>& done) {
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

void ShmTransport::send_to(Peer& p, std::vector<RequestId>& done) {
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

void ShmTransport::fill_slots(Peer& p) {
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
      std::byte* data = m.bytes <= kSmallBytes ? h.small : s + kCacheLine;
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

void ShmTransport::raise_send_error(const Peer& p, uint64_t error_slot) const {
  // The refused slot stays as it was: the receiver never moved past it.
  const auto& h = *reinterpret_cast<const SlotHeader*>(slot(p.out_slots, error_slot - 1));
  const CallStamp expected = load_stamp(p.out->error_stamp);
  if (h.stamp != expected) throw StampMismatch(p.rank, rank_, expected, h.stamp);
  fail(ErrorCode::mismatch, "rank ", rank_, ": shm: message size mismatch: this rank sends ",
       p.out->error_sent.load(std::memory_order_relaxed), " B, peer ", p.rank, " expects ",
       p.out->error_expected.load(std::memory_order_relaxed), " B");
}

void ShmTransport::receive_from(Peer& p, std::vector<RequestId>& done) {
  while (!p.recvs.empty()) {
    std::byte* s = slot(p.in_slots, p.in_tail);
    auto& h = *reinterpret_cast<SlotHeader*>(s);
    if (h.seq.load(std::memory_order_seq_cst) != p.in_tail + 1) return;
    PendingRecv& r = p.recvs.front();
    // The first slot of a message: is it the message this receive expects?
    if (r.received == 0 && (h.stamp != r.stamp || h.message_bytes != r.bytes)) refuse(p, r, h);
    if (h.kind == SlotKind::cross_memory) {
      uint64_t address;
      std::memcpy(&address, h.small, sizeof address);
      read_cross_memory(p, r, address);
      r.received = r.bytes;
    } else {
      if (h.kind != SlotKind::inline_data || h.stamp != r.stamp || h.message_bytes != r.bytes ||
          h.fragment_bytes > layout_.slot_bytes || h.fragment_bytes > r.bytes - r.received ||
          (h.fragment_bytes == 0 && r.bytes > 0))
        fail(ErrorCode::internal, "rank ", rank_, ": shm: corrupt slot from peer ", p.rank,
             " (kind ", static_cast<uint32_t>(h.kind), ", fragment ", h.fragment_bytes,
             " B, at offset ", r.received, " of ", r.bytes, " B)");
      const std::byte* data = h.message_bytes <= kSmallBytes ? h.small : s + kCacheLine;
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

std::optional<CallStamp> ShmTransport::waiting_message(int peer) {
  const Peer& p = peer_at(peer, "waiting_message");
  if (!p.recvs.empty() || p.in_slots == nullptr) return std::nullopt;
  const auto& h = *reinterpret_cast<const SlotHeader*>(slot(p.in_slots, p.in_tail));
  if (h.seq.load(std::memory_order_acquire) != p.in_tail + 1) return std::nullopt;
  return h.stamp;
}

void ShmTransport::check_unread_message(const Peer& p) const {
  if (!p.recvs.empty() || p.in_slots == nullptr) return;
  const auto& h = *reinterpret_cast<const SlotHeader*>(slot(p.in_slots, p.in_tail));
  if (h.seq.load(std::memory_order_acquire) != p.in_tail + 1) return;
  if (calls_disagree(current_, h.stamp)) throw StampMismatch(rank_, p.rank, current_, h.stamp);
}

void ShmTransport::refuse(Peer& p, const PendingRecv& r, const SlotHeader& h) {
  p.in->error_sent.store(h.message_bytes, std::memory_order_relaxed);
  p.in->error_expected.store(r.bytes, std::memory_order_relaxed);
  store_stamp(p.in->error_stamp, r.stamp);
  p.in->error_slot.store(p.in_tail + 1, std::memory_order_release);
  p.touched = true;
  ring_touched();
  if (h.stamp != r.stamp) throw StampMismatch(rank_, p.rank, r.stamp, h.stamp);
  fail(ErrorCode::mismatch, "rank ", rank_, ": shm: message size mismatch: peer ", p.rank,
       " sends ", h.message_bytes, " B, this rank expects ", r.bytes, " B");
}

void ShmTransport::deliver(const PendingRecv& r, const std::byte* data, size_t bytes) {
  std::byte* dst = r.dst + r.received;
  if (!r.reduce) {
    copy_bytes(dst, data, bytes, r.store);
    return;
  }
  const size_t elem = dtype_size(r.reducer.type);
  const auto* local = static_cast<const std::byte*>(r.reducer.local) + r.received;
  reduce_into(r.reducer.type, r.reducer.op, dst, local, data, bytes / elem, r.store);
}

void ShmTransport::read_cross_memory(Peer& p, const PendingRecv& r, uint64_t address) {
  if (!r.reduce && r.store == WriteMode::cached) {
    read_remote(p, r.dst, address, r.bytes);
    return;
  }
  // dst = local (+) remote, or a streaming copy of remote, piece by piece
  // through a cache-resident buffer: the kernel's copy into dst would write
  // it through the caches.
  if (bounce_.empty()) bounce_.resize(kCrossMemoryPiece / sizeof(uint64_t));
  auto* buf = reinterpret_cast<std::byte*>(bounce_.data());
  if (!r.reduce) {
    for (size_t off = 0; off < r.bytes; off += kCrossMemoryPiece) {
      const size_t n = std::min(kCrossMemoryPiece, r.bytes - off);
      read_remote(p, buf, address + off, n);
      copy_bytes(r.dst + off, buf, n, WriteMode::streaming);
    }
    return;
  }
  const size_t elem = dtype_size(r.reducer.type);
  const auto* local = static_cast<const std::byte*>(r.reducer.local);
  for (size_t off = 0; off < r.bytes; off += kCrossMemoryPiece) {
    const size_t n = std::min(kCrossMemoryPiece, r.bytes - off);
    read_remote(p, buf, address + off, n);
    reduce_into(r.reducer.type, r.reducer.op, r.dst + off, local + off, buf, n / elem, r.store);
  }
}

void ShmTransport::read_remote(Peer& p, std::byte* dst, uint64_t address, size_t bytes) {
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
    fail(ErrorCode::system, "rank ", rank_, ": shm: process_vm_readv from peer ", p.rank, " (pid ",
         p.pid, "): ", std::strerror(err));
  }
}

void ShmTransport::ring_touched() {
  for (Peer& p : peers_) {
    if (!p.touched) continue;
    p.touched = false;
    Doorbell& bell = p.header->bell;
    if (bell.sleeping.load(std::memory_order_seq_cst) != 0) {
      bell.seq.fetch_add(1, std::memory_order_seq_cst);
      futex_wake(bell.seq);
    }
  }
}

void ShmTransport::ring_everyone() {
  for (Peer& p : peers_) {
    if (p.header == nullptr) continue;
    p.header->bell.seq.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(p.header->bell.seq);
  }
}

}  // namespace chorus::shm
