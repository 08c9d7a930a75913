// Symbolic memory of one rank for the verifier: what every element of the
// rank's buffers holds, without holding any data.
//
// An element holds either nothing defined, or "element i of the inputs of the
// ranks in set S" (reduced together): for AllGather, Broadcast and AllToAll S
// is one rank, so the content is the element's provenance; for the reductions S
// is the set of contributions. Memory is kept as an interval map of runs: a run
// [start, end) shares one set, and its element indices advance with the
// address (index = address + delta), so a block that moves around a ring stays
// one run however large it is. Neighbouring runs with equal content merge.
#pragma once

#include "verify/rank_set.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace chorus {

// A piece of content `count` elements long, as read from or written to a
// region: element k (0-based within the region) is input element k + delta of
// the ranks in `set`.
struct Segment {
  size_t count = 0;
  int64_t delta = 0;
  RankSetPool::Id set = RankSetPool::kUndefined;
  bool same_content(const Segment& o) const { return set == o.set && delta == o.delta; }
};
using Segments = std::vector<Segment>;

class SymbolicMemory {
 public:
  // `size` elements, all undefined.
  explicit SymbolicMemory(size_t size);
  // Fingers point into the map: a copy would point into the original.
  SymbolicMemory(const SymbolicMemory&) = delete;
  SymbolicMemory& operator=(const SymbolicMemory&) = delete;

  size_t size() const { return size_; }
  // Content of [address, address + count), appended to `out` (which is cleared).
  void read(size_t address, size_t count, Segments& out) const;
  // Overwrites [address, address + sum of counts) with `segments`.
  void write(size_t address, const Segments& segments);
  // Number of runs, for tests and statistics.
  size_t run_count() const { return runs_.size(); }

 private:
  struct Run {
    size_t end = 0;
    int64_t delta = 0;  // element index = address + delta
    RankSetPool::Id set = RankSetPool::kUndefined;
  };
  using Map = std::map<size_t, Run>;  // keyed by start address
  // The run holding `address` (< size). Schedules touch memory next to what
  // they touched last (the ring's chunk r-s, then r-s-1), so the search starts
  // from the last runs found and walks a few neighbours before falling back to
  // a lookup from the root, which at a thousand ranks is a cache miss per level.
  Map::iterator locate(size_t address) const;
  // Makes `address` the start of a run and returns that run (or end()).
  Map::iterator split(size_t address);
  // Forgets fingers into [from, to) before those runs are erased.
  void drop_fingers(size_t from, size_t to);

  size_t size_;
  mutable Map runs_;
  static constexpr int kFingers = 2;
  mutable Map::iterator fingers_[kFingers];
  mutable bool finger_valid_[kFingers] = {false, false};
  mutable int next_finger_ = 0;
};

}  // namespace chorus
