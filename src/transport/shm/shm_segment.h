// The shared-memory segment of one shm rank: its layout, the RAII owner of the
// mapping, and the pidfd and futex calls that the transport uses (descriptors
// are owned by core/fd.h's Fd).
//
// Rank R's segment holds everything other ranks write *to* R:
//
//   +----------------+  SegmentHeader: identity (magic, pid, geometry), R's
//   | header         |  doorbell (futex word + "I sleep" flag), R's
//   +----------------+  abort/closed flags with the abort reason, and the
//   |                |  call R is in (for its peers' stall reports)
//   | FifoControl[0] |  one per sending rank S (entry R unused): the tail
//   | FifoControl[1] |  index that R advances, on its own cache line, and
//   | ...            |  R's report of a mismatched message
//   +----------------+
//   | slots of S=0   |  `slots` slots per sending rank (none for R itself);
//   | slots of S=1   |  a slot is a 64-byte SlotHeader (with the sending
//   | ...            |  call's stamp) followed by `slot_bytes` of payload
//   +----------------+
//
// Slot indices count from the start of the FIFO (2^64 never wraps); index i
// lives in slot i mod slots. The sender publishes slot i by storing i + 1 in
// its header's `seq` (after the rest), so the receiver polls one word in the
// very cache line that carries the header and, for a message of up to
// kSmallBytes, the payload too: a small message costs the receiver one cache
// miss. The sender may reuse slot i for index i + slots once tail > i.
// A message sent inline is complete for the sender once its last slot is
// published (eager); only a cross-memory message waits for the tail.
#pragma once

#include "core/call_stamp.h"
#include "core/fd.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <sys/types.h>

namespace chorus::shm {

inline constexpr size_t kCacheLine = 64;
inline constexpr uint64_t kMagic = 0x43484f5255535348ULL;  // "CHORUSSH"
inline constexpr uint32_t kLayoutVersion = 4;
inline constexpr size_t kReasonBytes = 512;

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word must be 32 bits");

// The futex word a rank sleeps on. Any peer that publishes something this rank
// waits for bumps `seq` and wakes it -- but only when `sleeping` says the rank
// announced it is about to sleep, so the fast path makes no system call.
struct alignas(kCacheLine) Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleeping{0};
};

// CPUs a rank may run on, as a bit set (CPU c is bit c % 64 of word c / 64).
inline constexpr size_t kCpuWords = 16;  // 1024 CPUs
struct CpuMask {
  uint64_t words[kCpuWords] = {};
};

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t rank = 0;
  int32_t size = 0;
  int32_t pid = 0;
  uint64_t slots = 0;
  uint64_t slot_bytes = 0;
  uint64_t total_bytes = 0;
  // The owner's CPU affinity at set-up: the ranks compare theirs to learn
  // whether each has a core of its own (then a waiting rank may spin).
  CpuMask cpus;
  Doorbell bell;
  // Set (release) by the owner when it aborts or destroys its transport;
  // `reason` is written before `aborted`.
  alignas(kCacheLine) std::atomic<uint32_t> aborted{0};
  std::atomic<uint32_t> closed{0};
  char reason[kReasonBytes] = {};
  // The call the owner is in: written by the owner only, read by peers only
  // for a stall report, so the line stays in the owner's cache. `call_version`
  // is odd while the owner rewrites the rest (a seqlock).
  alignas(kCacheLine) std::atomic<uint32_t> call_version{0};
  std::atomic<uint32_t> collectives{0};  // number of its last collective call
  std::atomic<uint64_t> call[3] = {};    // its last call's CallStamp
  std::atomic<int64_t> alive_ns{0};      // steady clock: when it last polled
  // Set by a peer after it set its own `aborted`: the owner then looks for
  // which one. One word on the owner's own line, so that the owner's check at
  // every call start costs no load from another rank's segment.
  std::atomic<uint32_t> peer_aborted{0};
};
static_assert(sizeof(CallStamp) == 3 * sizeof(uint64_t));

// Control block of one FIFO (sender S -> owner R).
struct FifoControl {
  // Slots consumed by the receiver (written by R only). The sender reads it to
  // find free slots and to learn that a cross-memory message was taken.
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};
  // A mismatched message found by the receiver: 1 + index of the first slot
  // of the offending message (0: none), the byte count the sender sent, the
  // one the receiver expected and the stamp of the receiver's call. Written
  // before the receiver throws, read by the sender. On a line of its own: the sender polls
  // error_slot at every isend, and a line the receiver never writes in normal operation stays in
  // the sender's cache, where the tail's line (written per message) would not.
  alignas(kCacheLine) std::atomic<uint64_t> error_slot{0};
  std::atomic<uint64_t> error_sent{0};
  std::atomic<uint64_t> error_expected{0};
  std::atomic<uint64_t> error_stamp[3] = {};
};

enum class SlotKind : uint32_t {
  inline_data = 1,   // payload follows in this slot
  cross_memory = 2,  // payload stays in the sender: read it with process_vm_readv
};

inline constexpr size_t kSmallBytes = 16;

// Written by the sender; `seq` last. The fragments of a message fill
// consecutive slots in order, so the receiver counts their offsets itself.
struct alignas(kCacheLine) SlotHeader {
  std::atomic<uint64_t> seq{0};  // 1 + slot index once published
  uint64_t message_bytes = 0;    // size of the whole message
  uint32_t fragment_bytes = 0;   // payload bytes in this slot (inline_data)
  SlotKind kind = SlotKind::inline_data;
  CallStamp stamp;  // the call that sends the message
  // The payload of a message of at most kSmallBytes; larger fragments follow
  // the header. 8-byte aligned, so any element type reduces from here. A
  // cross_memory slot holds the address of the sender's buffer here instead.
  alignas(8) std::byte small[kSmallBytes] = {};
};
static_assert(sizeof(SlotHeader) == kCacheLine);

// A CallStamp in three atomic words (shared-memory fields that another
// process reads while this one may write them). Release stores and acquire
// loads, so that a seqlock around them needs no fence (plain moves on x86).
inline void store_stamp(std::atomic<uint64_t> (&words)[3], const CallStamp& stamp) {
  uint64_t v[3];
  std::memcpy(v, &stamp, sizeof v);
  for (int i = 0; i < 3; ++i) words[i].store(v[i], std::memory_order_release);
}
inline CallStamp load_stamp(const std::atomic<uint64_t> (&words)[3]) {
  uint64_t v[3];
  for (int i = 0; i < 3; ++i) v[i] = words[i].load(std::memory_order_acquire);
  CallStamp stamp;
  std::memcpy(&stamp, v, sizeof v);
  return stamp;
}

// Geometry shared by every segment of a group.
struct Layout {
  int size = 0;
  size_t slots = 0;
  size_t slot_bytes = 0;

  size_t slot_stride() const { return kCacheLine + slot_bytes; }
  size_t fifo_control_offset(int sender) const {
    return sizeof(SegmentHeader) + static_cast<size_t>(sender) * sizeof(FifoControl);
  }
  // Slot area of sender S in the segment of `owner` (S != owner).
  size_t slot_area_offset(int owner, int sender) const {
    const size_t index = static_cast<size_t>(sender < owner ? sender : sender - 1);
    return fifo_control_offset(size) + index * slots * slot_stride();
  }
  size_t total_bytes() const {
    return fifo_control_offset(size) + static_cast<size_t>(size - 1) * slots * slot_stride();
  }
};

// One mapped POSIX shared-memory object. The creating side also owns the
// name: it is unlinked by unlink() or, at the latest, on destruction.
class Segment {
 public:
  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // Creates `name` (which must not exist), sizes it to `bytes` with its pages
  // reserved (so a full /dev/shm is an Error now, not a SIGBUS later) and maps it.
  static Segment create(const std::string& name, size_t bytes);
  // Maps an existing object, which must be exactly `bytes` long.
  static Segment attach(const std::string& name, size_t bytes);

  std::byte* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }
  // Removes the name (the mapping stays valid); idempotent.
  void unlink();

 private:
  void release();

  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool owns_name_ = false;
};

// Sleeps while *word == expected, at most `timeout`. Returns on a wake, on a
// changed value, on a signal or on the timeout; the caller re-checks.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout);
// Wakes every sleeper of `word` (across processes).
void futex_wake(std::atomic<uint32_t>& word);

// A pidfd for `pid` (invalid Fd when the kernel lacks pidfd_open).
Fd open_pidfd(pid_t pid);
// True when the process behind `pidfd` (or, without a pidfd, `pid`) has exited.
bool process_exited(const Fd& pidfd, pid_t pid);

}  // namespace chorus::shm
