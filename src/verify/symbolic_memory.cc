#include "verify/symbolic_memory.h"

#include "core/check.h"

#include <iterator>

namespace chorus {

SymbolicMemory::SymbolicMemory(size_t size) : size_(size) {
  if (size > 0) runs_.emplace(0, Run{size, 0, RankSetPool::kUndefined});
}

SymbolicMemory::Map::iterator SymbolicMemory::split(size_t address) {
  if (address >= size_) return runs_.end();
  auto it = std::prev(runs_.upper_bound(address));
  if (it->first == address) return it;
  Run tail = it->second;
  it->second.end = address;
  return runs_.emplace_hint(std::next(it), address, tail);
}

void SymbolicMemory::read(size_t address, size_t count, Segments& out) const {
  out.clear();
  if (count == 0) return;
  CHORUS_CHECK(address + count <= size_);
  auto it = std::prev(runs_.upper_bound(address));
  const size_t end = address + count;
  for (size_t at = address; at < end; ++it) {
    const size_t stop = std::min(end, it->second.end);
    // Region-relative delta: element k of the region sits at address + k.
    Segment seg{stop - at,
                it->second.set == RankSetPool::kUndefined
                    ? 0
                    : it->second.delta + static_cast<int64_t>(address),
                it->second.set};
    if (!out.empty() && out.back().same_content(seg))
      out.back().count += seg.count;
    else
      out.push_back(seg);
    at = stop;
  }
}

void SymbolicMemory::write(size_t address, const Segments& segments) {
  size_t count = 0;
  for (const Segment& s : segments) count += s.count;
  if (count == 0) return;
  CHORUS_CHECK(address + count <= size_);
  const size_t end = address + count;
  auto first = split(address);
  auto last = split(end);
  // split(end) may have rebalanced nothing that invalidates `first`: std::map
  // iterators stay valid across inserts.
  auto hint = runs_.erase(first, last);
  size_t at = address;
  for (const Segment& s : segments) {
    if (s.count == 0) continue;
    const int64_t delta =
        s.set == RankSetPool::kUndefined ? 0 : s.delta - static_cast<int64_t>(address);
    hint = runs_.emplace_hint(hint, at, Run{at + s.count, delta, s.set});
    // Merge with the previous run when the content continues.
    if (hint != runs_.begin()) {
      auto prev = std::prev(hint);
      if (prev->second.end == at && prev->second.set == s.set && prev->second.delta == delta) {
        prev->second.end = at + s.count;
        runs_.erase(hint);
        hint = prev;
      }
    }
    at += s.count;
    hint = std::next(hint);
  }
  // And the run after the written window.
  if (hint != runs_.end() && hint != runs_.begin()) {
    auto prev = std::prev(hint);
    if (prev->second.set == hint->second.set && prev->second.delta == hint->second.delta) {
      prev->second.end = hint->second.end;
      runs_.erase(hint);
    }
  }
}

}  // namespace chorus
