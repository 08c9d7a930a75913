#include "verify/symbolic_memory.h"

#include "core/check.h"

#include <iterator>

namespace chorus {

SymbolicMemory::SymbolicMemory(size_t size) : size_(size) {
  if (size > 0) runs_.emplace(0, Run{size, 0, RankSetPool::kUndefined});
}

SymbolicMemory::Map::iterator SymbolicMemory::locate(size_t address) const {
  constexpr int kWalk = 3;
  for (int f = 0; f < kFingers; ++f) {
    if (!finger_valid_[f]) continue;
    auto it = fingers_[f];
    for (int step = 0; step <= kWalk; ++step) {
      if (address < it->first) {
        if (it == runs_.begin()) break;
        --it;
      } else if (address >= it->second.end) {
        ++it;
        if (it == runs_.end()) break;
      } else {
        fingers_[f] = it;
        return it;
      }
    }
  }
  auto it = std::prev(runs_.upper_bound(address));
  fingers_[next_finger_] = it;
  finger_valid_[next_finger_] = true;
  next_finger_ = (next_finger_ + 1) % kFingers;
  return it;
}

void SymbolicMemory::drop_fingers(size_t from, size_t to) {
  for (int f = 0; f < kFingers; ++f)
    if (finger_valid_[f] && fingers_[f]->first >= from && fingers_[f]->first < to)
      finger_valid_[f] = false;
}

SymbolicMemory::Map::iterator SymbolicMemory::split(size_t address) {
  if (address >= size_) return runs_.end();
  auto it = locate(address);
  if (it->first == address) return it;
  Run tail = it->second;
  it->second.end = address;
  return runs_.emplace_hint(std::next(it), address, tail);
}

void SymbolicMemory::read(size_t address, size_t count, Segments& out) const {
  out.clear();
  if (count == 0) return;
  CHORUS_CHECK(address + count <= size_);
  auto it = locate(address);
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
  // std::map iterators stay valid across inserts: `first` survives split(end).
  drop_fingers(address, end);
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
        drop_fingers(at, at + 1);
        runs_.erase(hint);
        hint = prev;
      }
    }
    at += s.count;
    hint = std::next(hint);
  }
  // The last written run: merge it with the run after the window when the
  // content continues, and keep it as a finger, as the schedule most likely
  // looks there next.
  auto written = std::prev(hint);
  if (hint != runs_.end() && written->second.set == hint->second.set &&
      written->second.delta == hint->second.delta) {
    written->second.end = hint->second.end;
    drop_fingers(hint->first, hint->first + 1);
    runs_.erase(hint);
  }
  fingers_[next_finger_] = written;
  finger_valid_[next_finger_] = true;
  next_finger_ = (next_finger_ + 1) % kFingers;
}

}  // namespace chorus
