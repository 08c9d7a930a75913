// The simulator's event queue (simulator.cc): events of one time in buckets,
// the buckets in a 4-ary min-heap. Its own header so that the run, which is
// long already, reads apart from the data structure that orders it.
#pragma once

#include "schedule/matching.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::sim_internal {

// No bucket (and, in simulator.cc, no op).
inline constexpr uint32_t kNone = kNoGlobalOp;

enum class EventKind : uint32_t { op_done, next_hop };

struct Event {
  double t;
  EventKind kind;
  uint32_t id;  // global op id (op_done) or message id (next_hop)
};

// The event queue: earliest time first, equal times in creation order.
//
// Events of one time wait in a bucket, a plain array read front to back, so
// that the many events of one instant (all ranks finishing a step together)
// cost an append and a read each, and the run can look ahead at the ops of the
// events to come. A 4-ary min-heap orders the buckets by (time, creation
// number). A push goes to the newest bucket of its time, found through a small
// direct-mapped cache of recent times; when the cache has lost it, a new
// bucket of the same time is opened. Every event of an older bucket of a time
// was created before every event of a newer one, so ordering buckets of equal
// times by creation serves events in exactly the order of (time, creation).
// Pushes are never earlier than the event being served, so a bucket that has
// been read to its end receives nothing more and is reused.
class EventQueue {
 public:
  struct Item {
    EventKind kind;
    uint32_t id;
  };

  EventQueue() { cache_.fill({0, kNone}); }

  bool empty() const { return pos_ == current().size() && heap_.empty(); }

  void push(double t, EventKind kind, uint32_t id) {
    const uint64_t bits = std::bit_cast<uint64_t>(t);
    Slot& slot = cache_[slot_of(bits)];
    if (slot.bucket == kNone || slot.bits != bits) {
      uint32_t b;
      if (free_.empty()) {
        b = static_cast<uint32_t>(buckets_.size());
        buckets_.emplace_back();
      } else {
        b = free_.back();
        free_.pop_back();
      }
      heap_push({t, opened_++, b});
      slot = {bits, b};
    }
    buckets_[slot.bucket].push_back({kind, id});
  }

  // The next event; the queue must not be empty.
  Event pop() {
    while (pos_ == current().size()) {
      if (cur_ != kNone) release(cur_);
      cur_ = heap_.front().bucket;
      cur_t_ = heap_.front().t;
      heap_pop();
      pos_ = 0;
    }
    const Item& item = current()[pos_++];
    return {cur_t_, item.kind, item.id};
  }

  // The event k places after the one last popped, when it is already in the
  // current bucket; nullptr otherwise.
  const Item* ahead(size_t k) const {
    const size_t i = pos_ + k - 1;
    return i < current().size() ? &current()[i] : nullptr;
  }

 private:
  struct Entry {
    double t;
    uint64_t opened;  // creation number of the bucket
    uint32_t bucket;
    bool operator<(const Entry& o) const { return t != o.t ? t < o.t : opened < o.opened; }
  };
  struct Slot {
    uint64_t bits;    // the time, as bits
    uint32_t bucket;  // its newest bucket, or kNone
  };
  static constexpr size_t kSlots = 64;

  static size_t slot_of(uint64_t bits) { return (bits * 0x9E3779B97F4A7C15ULL) >> 58; }
  const std::vector<Item>& current() const { return cur_ == kNone ? none_ : buckets_[cur_]; }

  void release(uint32_t b) {
    Slot& slot = cache_[slot_of(std::bit_cast<uint64_t>(cur_t_))];
    if (slot.bucket == b) slot.bucket = kNone;
    buckets_[b].clear();
    free_.push_back(b);
  }

  // 4-ary heap: half the levels of a binary heap, and a node's four children
  // share one or two cache lines.
  void heap_push(const Entry& e) {
    size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!(e < heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void heap_pop() {
    const Entry last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return;
    size_t i = 0;
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = std::min(first + 4, n);
      for (size_t c = first + 1; c < end; ++c)
        if (heap_[c] < heap_[best]) best = c;
      if (!(heap_[best] < last)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
  }

  std::vector<std::vector<Item>> buckets_;
  std::vector<uint32_t> free_;
  std::vector<Entry> heap_;
  std::array<Slot, kSlots> cache_;
  uint64_t opened_ = 0;
  uint32_t cur_ = kNone;  // the bucket being read
  double cur_t_ = 0;
  size_t pos_ = 0;
  std::vector<Item> none_;
};

}  // namespace chorus::sim_internal
