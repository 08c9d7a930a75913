#include "verify/rank_set.h"

#include "core/check.h"

#include <algorithm>

namespace chorus {

namespace {
constexpr size_t kCacheSize = 4096;  // power of two

size_t cache_slot(uint32_t a, uint32_t b, bool disjoint) {
  uint64_t h = (static_cast<uint64_t>(a) << 32 | b) * 0x9e3779b97f4a7c15ull;
  h ^= disjoint ? 0x5bd1e995u : 0u;
  return static_cast<size_t>(h >> 40) & (kCacheSize - 1);
}
}  // namespace

RankSetPool::RankSetPool(int nranks) : nranks_(nranks), cache_(kCacheSize) {
  CHORUS_CHECK(nranks >= 1);
  offsets_.push_back(0);
  for (int r = 0; r < nranks; ++r) {
    const Id id = intern({{static_cast<uint32_t>(r), static_cast<uint32_t>(r) + 1}});
    CHORUS_CHECK_EQ(id, static_cast<Id>(r));
  }
  all_ = intern({{0, static_cast<uint32_t>(nranks)}});
}

std::span<const RankRange> RankSetPool::ranges(Id id) const {
  CHORUS_CHECK(id < set_count());
  return {data_.data() + offsets_[id], data_.data() + offsets_[id + 1]};
}

size_t RankSetPool::size(Id id) const {
  size_t n = 0;
  for (const RankRange& r : ranges(id)) n += r.hi - r.lo;
  return n;
}

uint64_t RankSetPool::hash(std::span<const RankRange> ranges) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const RankRange& r : ranges) {
    h = (h ^ r.lo) * 0x100000001b3ull;
    h = (h ^ r.hi) * 0x100000001b3ull;
  }
  // Final mix, so that the low bits used as the slot depend on every range.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

RankSetPool::Id RankSetPool::intern(const std::vector<RankRange>& ranges) {
  const uint64_t h = hash(ranges);
  if (2 * (set_count() + 1) > index_.size()) grow_index();
  const size_t mask = index_.size() - 1;
  size_t slot = static_cast<size_t>(h) & mask;
  for (; index_[slot] != 0; slot = (slot + 1) & mask) {
    const Id candidate = index_[slot] - 1;
    if (hashes_[candidate] != h) continue;
    const auto existing = this->ranges(candidate);
    if (std::equal(existing.begin(), existing.end(), ranges.begin(), ranges.end()))
      return candidate;
  }
  const auto id = static_cast<Id>(set_count());
  CHORUS_CHECK(id != kUndefined - 1);
  data_.insert(data_.end(), ranges.begin(), ranges.end());
  offsets_.push_back(static_cast<uint32_t>(data_.size()));
  hashes_.push_back(h);
  index_[slot] = id + 1;
  return id;
}

void RankSetPool::grow_index() {
  std::vector<uint32_t> bigger(std::max<size_t>(64, index_.size() * 2), 0);
  const size_t mask = bigger.size() - 1;
  for (Id id = 0; id < hashes_.size(); ++id) {
    size_t slot = static_cast<size_t>(hashes_[id]) & mask;
    while (bigger[slot] != 0) slot = (slot + 1) & mask;
    bigger[slot] = id + 1;
  }
  index_ = std::move(bigger);
}

std::optional<RankSetPool::Id> RankSetPool::unite_disjoint(Id a, Id b) {
  if (a > b) std::swap(a, b);  // union is symmetric: one cache entry per pair
  CacheEntry& slot = cache_[cache_slot(a, b, true)];
  if (slot.a == a && slot.b == b && slot.disjoint_only) {
    if (slot.result == kUndefined) return std::nullopt;
    return slot.result;
  }
  const auto ra = ranges(a);
  const auto rb = ranges(b);
  merged_.clear();
  size_t i = 0, j = 0;
  bool overlap = false;
  // Classic merge of two sorted range lists; touching ranges are fused so that
  // every set has exactly one representation (which interning relies on).
  while (i < ra.size() || j < rb.size()) {
    RankRange next;
    if (j == rb.size() || (i < ra.size() && ra[i].lo < rb[j].lo))
      next = ra[i++];
    else
      next = rb[j++];
    if (!merged_.empty() && next.lo < merged_.back().hi) overlap = true;
    if (!merged_.empty() && next.lo <= merged_.back().hi)
      merged_.back().hi = std::max(merged_.back().hi, next.hi);
    else
      merged_.push_back(next);
  }
  const Id result = overlap ? kUndefined : intern(merged_);
  slot = {a, b, result, true};
  if (overlap) return std::nullopt;
  return result;
}

RankSetPool::Id RankSetPool::unite(Id a, Id b) {
  if (a == b) return a;
  if (a > b) std::swap(a, b);
  CacheEntry& slot = cache_[cache_slot(a, b, false)];
  if (slot.a == a && slot.b == b && !slot.disjoint_only) return slot.result;
  const auto ra = ranges(a);
  const auto rb = ranges(b);
  merged_.clear();
  size_t i = 0, j = 0;
  while (i < ra.size() || j < rb.size()) {
    RankRange next;
    if (j == rb.size() || (i < ra.size() && ra[i].lo < rb[j].lo))
      next = ra[i++];
    else
      next = rb[j++];
    if (!merged_.empty() && next.lo <= merged_.back().hi)
      merged_.back().hi = std::max(merged_.back().hi, next.hi);
    else
      merged_.push_back(next);
  }
  const Id result = intern(merged_);
  slot = {a, b, result, false};
  return result;
}

int RankSetPool::first_missing(Id a, Id b) const {
  const auto rb = ranges(b);
  for (const RankRange& r : ranges(a)) {
    for (uint32_t x = r.lo; x < r.hi;) {
      // Find the range of b at or after x.
      auto it = std::upper_bound(rb.begin(), rb.end(), x,
                                 [](uint32_t v, const RankRange& q) { return v < q.hi; });
      if (it == rb.end() || it->lo > x) return static_cast<int>(x);
      x = it->hi;
    }
  }
  return -1;
}

int RankSetPool::first_common(Id a, Id b) const {
  const auto ra = ranges(a);
  const auto rb = ranges(b);
  size_t i = 0, j = 0;
  while (i < ra.size() && j < rb.size()) {
    const uint32_t lo = std::max(ra[i].lo, rb[j].lo);
    const uint32_t hi = std::min(ra[i].hi, rb[j].hi);
    if (lo < hi) return static_cast<int>(lo);
    if (ra[i].hi < rb[j].hi)
      ++i;
    else
      ++j;
  }
  return -1;
}

std::string RankSetPool::describe(Id id) const {
  if (id == kUndefined) return "undefined";
  if (id == all_ && nranks_ > 1) return str_cat("all ", nranks_, " ranks");
  std::string s = "{";
  bool first = true;
  for (const RankRange& r : ranges(id)) {
    if (!first) s += ",";
    first = false;
    s += r.hi - r.lo == 1 ? str_cat(r.lo) : str_cat(r.lo, "-", r.hi - 1);
  }
  return s + "}";
}

}  // namespace chorus
