// Sets of ranks for the symbolic verifier: which ranks' inputs a reduced
// element already contains, or (for the barrier) which ranks' arrivals a rank
// has heard of.
//
// A set is a sorted list of disjoint, non-adjacent half-open rank ranges
// [lo, hi), so the sets the usual schedules build stay tiny: a ring's partial
// sum is one cyclic interval (at most two ranges), a tree's subtree is one or a
// few ranges. Sets are immutable and interned in a pool: equal sets get the same
// id, so symbolic memory can merge neighbouring runs by comparing ids, and a run
// of a million elements carries its set as one 32-bit id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace chorus {

struct RankRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // exclusive
  friend bool operator==(const RankRange&, const RankRange&) = default;
};

class RankSetPool {
 public:
  using Id = uint32_t;
  // Not a set: marks content that holds no defined value.
  static constexpr Id kUndefined = 0xffffffffu;

  // Creates the singletons {0} .. {nranks-1} (ids 0 .. nranks-1) and the set of
  // all ranks.
  explicit RankSetPool(int nranks);

  int nranks() const { return nranks_; }
  Id singleton(int rank) const { return static_cast<Id>(rank); }
  Id all() const { return all_; }
  std::span<const RankRange> ranges(Id id) const;
  size_t size(Id id) const;  // number of ranks in the set

  // The union of two disjoint sets, or nullopt when they share a rank (a
  // contribution would be counted twice).
  std::optional<Id> unite_disjoint(Id a, Id b);
  // The union of any two sets.
  Id unite(Id a, Id b);
  // Smallest rank of a that is not in b, or -1 when a is a subset of b.
  int first_missing(Id a, Id b) const;
  // First rank common to a and b, or -1.
  int first_common(Id a, Id b) const;

  // "{3}", "{0-4,7}", "all 8 ranks".
  std::string describe(Id id) const;

  size_t set_count() const { return offsets_.size() - 1; }

 private:
  Id intern(const std::vector<RankRange>& ranges);
  static uint64_t hash(std::span<const RankRange> ranges);
  void grow_index();

  int nranks_;
  Id all_ = 0;
  std::vector<RankRange> data_;    // ranges of every set, back to back
  std::vector<uint32_t> offsets_;  // set id -> first range; one sentinel at the end
  // Open-addressing hash index of the sets: slot -> id + 1 (0 empty). A
  // std::unordered_map costs a cache miss per node at a million sets.
  std::vector<uint32_t> index_;
  std::vector<uint64_t> hashes_;  // per set id
  // A small direct-mapped cache of recent unions: pipelined schedules reduce
  // the same pair of sets once per segment.
  struct CacheEntry {
    Id a = kUndefined;
    Id b = kUndefined;
    Id result = kUndefined;  // kUndefined: the sets intersect
    bool disjoint_only = false;
  };
  std::vector<CacheEntry> cache_;
  std::vector<RankRange> merged_;  // reused buffer
};

}  // namespace chorus
