#include "verify/race_check.h"

#include "core/check.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <vector>

namespace chorus {

bool is_noop_copy(const Op& op, const Layout& layout) {
  return op.kind == OpKind::copy && op.src.count == op.dst.count &&
         layout.address(op.src) == layout.address(op.dst);
}

namespace {

struct Access {
  size_t address = 0;
  size_t count = 0;
  bool write = false;
  const Region* region = nullptr;  // for messages
};

bool overlaps(size_t a, size_t na, size_t b, size_t nb) {
  return a < b + nb && b < a + na;
}

// "output[5]": the element of `region` at `address`.
std::string element_name(const Region& region, const Layout& layout, size_t address) {
  return str_cat(to_string(region.buffer), "[", region.offset + (address - layout.address(region)),
                 "]");
}

class Sweep {
 public:
  Sweep(const Program& program, const Layout& layout, std::vector<RaceFinding>* unordered)
      : program_(program),
        layout_(layout),
        unordered_(unordered),
        stamp_(program.ops.size(), 0),
        dep_mark_(program.ops.size(), 0) {
    if (layout.size > 0) runs_.emplace(0, Run{layout.size, kNoOp, {}});
  }

  std::optional<RaceFinding> run() {
    for (size_t j = 0; j < program_.ops.size(); ++j) {
      const auto op = static_cast<OpIndex>(j);
      collect(op);
      if (auto f = check_operands(op)) return f;
      conflicts_.clear();
      for (const Access& a : accesses_) gather(a);
      if (auto f = check_order(op)) return f;
      for (const Access& a : accesses_)
        if (!a.write) mark_read(a, op);
      for (const Access& a : accesses_)
        if (a.write) mark_write(a, op);
    }
    return std::nullopt;
  }

 private:
  struct Run {
    size_t end = 0;
    OpIndex writer = kNoOp;
    std::vector<OpIndex> readers;  // since the last write
  };
  using Map = std::map<size_t, Run>;
  struct Conflict {
    OpIndex op;
    size_t address;
  };

  void collect(OpIndex j) {
    accesses_.clear();
    const Op& o = program_.ops[j];
    auto add = [&](const Region& r, bool write) {
      if (r.count > 0) accesses_.push_back({layout_.address(r), r.count, write, &r});
    };
    switch (o.kind) {
      case OpKind::send:
        add(o.src, false);
        break;
      case OpKind::recv:
        add(o.dst, true);
        break;
      case OpKind::recv_reduce:
        add(o.src, false);
        add(o.dst, true);
        break;
      case OpKind::copy:
        if (!is_noop_copy(o, layout_)) {
          add(o.src, false);
          add(o.dst, true);
        }
        break;
      case OpKind::reduce:
        add(o.src, false);
        add(o.dst, false);
        add(o.dst, true);
        break;
      case OpKind::divide:
        add(o.dst, false);
        add(o.dst, true);
        break;
      case OpKind::get:
        add(o.dst, true);
        break;
      case OpKind::get_reduce:
        add(o.src, false);
        add(o.dst, true);
        break;
      case OpKind::signal:
      case OpKind::wait:
        break;
    }
  }

  // An op whose source and destination partly overlap has no defined result
  // (it would depend on the order the elements are processed in). The same
  // memory exactly is fine: recv_reduce in place, or a copy onto itself.
  std::optional<RaceFinding> check_operands(OpIndex j) const {
    const Op& o = program_.ops[j];
    if (o.kind == OpKind::send || o.kind == OpKind::recv) return std::nullopt;
    if (o.src.count == 0 || o.dst.count == 0) return std::nullopt;
    const size_t s = layout_.address(o.src);
    const size_t d = layout_.address(o.dst);
    if (s == d && o.src.count == o.dst.count) return std::nullopt;
    if (!overlaps(s, o.src.count, d, o.dst.count)) return std::nullopt;
    const size_t at = std::max(s, d);
    return RaceFinding{
        RaceFinding::Kind::overlapping_operands, j, j, at,
        str_cat("op ", j, " (", describe(o), ") has source and destination that partly overlap at ",
                element_name(o.dst, layout_, at))};
  }

  // The run holding `address`, searched from the last one found: one rank's
  // ops mostly touch memory next to what the previous op touched.
  Map::iterator locate(size_t address) {
    if (finger_valid_) {
      auto it = finger_;
      for (int step = 0; step < 4; ++step) {
        if (address < it->first) {
          if (it == runs_.begin()) break;
          --it;
        } else if (address >= it->second.end) {
          if (++it == runs_.end()) break;
        } else {
          return finger_ = it;
        }
      }
    }
    finger_valid_ = true;
    return finger_ = std::prev(runs_.upper_bound(address));
  }

  Map::iterator split(size_t address) {
    if (address >= layout_.size) return runs_.end();
    auto it = locate(address);
    if (it->first == address) return it;
    Run tail = it->second;
    it->second.end = address;
    return runs_.emplace_hint(std::next(it), address, std::move(tail));
  }

  void gather(const Access& a) {
    auto it = locate(a.address);
    const size_t end = a.address + a.count;
    for (; it != runs_.end() && it->first < end; ++it) {
      const size_t at = std::max(it->first, a.address);
      // A write must follow the readers since the last write, and a read the
      // last writer. Each of those readers was itself checked to follow the
      // last writer, so a write that follows them follows the writer too: only
      // when nobody has read since is the writer asked about directly.
      if (a.write && !it->second.readers.empty()) {
        for (OpIndex r : it->second.readers) conflicts_.push_back({r, at});
      } else if (it->second.writer != kNoOp) {
        conflicts_.push_back({it->second.writer, at});
      }
    }
  }

  // Every conflicting op must be an ancestor of j through deps.
  std::optional<RaceFinding> check_order(OpIndex j) {
    const Op& o = program_.ops[j];
    if (conflicts_.empty()) return std::nullopt;
    // Direct deps first: most hazards are ordered by an explicit dep. Marking
    // them keeps this linear when an op depends on many others (a send after
    // a whole step of packing copies).
    ++generation_;
    for (OpIndex d : o.deps) dep_mark_[d] = generation_;
    pending_.clear();
    OpIndex lowest = j;
    for (const Conflict& c : conflicts_) {
      if (c.op == j || dep_mark_[c.op] == generation_) continue;
      dep_mark_[c.op] = generation_;  // each op once
      pending_.push_back(c);
      lowest = std::min(lowest, c.op);
    }
    if (pending_.empty()) return std::nullopt;
    // Mark the ancestors of j down to `lowest`: no path from an older op can
    // reach one of them, as deps only point backwards.
    stack_.assign(o.deps.begin(), o.deps.end());
    while (!stack_.empty()) {
      const OpIndex d = stack_.back();
      stack_.pop_back();
      if (d < lowest || stamp_[d] == generation_) continue;
      stamp_[d] = generation_;
      for (OpIndex e : program_.ops[d].deps)
        if (e >= lowest && stamp_[e] != generation_) stack_.push_back(e);
    }
    for (const Conflict& c : pending_) {
      if (stamp_[c.op] == generation_) continue;
      const Op& other = program_.ops[c.op];
      const bool j_writes = writes_at(j, c.address);
      const bool other_writes = writes_at(c.op, c.address);
      const Region& jr = region_at(j, c.address);
      RaceFinding f{
          RaceFinding::Kind::race, c.op, j, c.address,
          str_cat("op ", c.op, " (", describe(other), ") and op ", j, " (", describe(o),
                  ") are not ordered ", unordered_ ? "by deps or through other ranks" : "by deps",
                  ", yet ", other_writes ? "the first writes" : "the first reads", " and ",
                  j_writes ? "the second writes" : "the second reads", " ",
                  element_name(jr, layout_, c.address))};
      if (unordered_ == nullptr) return f;
      unordered_->push_back(std::move(f));
    }
    return std::nullopt;
  }

  bool writes_at(OpIndex i, size_t address) const {
    const Op& o = program_.ops[i];
    if (o.kind == OpKind::send) return false;
    return overlaps(layout_.address(o.dst), o.dst.count, address, 1);
  }
  const Region& region_at(OpIndex i, size_t address) const {
    const Op& o = program_.ops[i];
    if (o.kind != OpKind::send && overlaps(layout_.address(o.dst), o.dst.count, address, 1))
      return o.dst;
    return o.src;
  }

  void mark_read(const Access& a, OpIndex j) {
    auto it = split(a.address);
    auto stop = split(a.address + a.count);
    for (; it != stop; ++it)
      if (it->second.readers.empty() || it->second.readers.back() != j)
        it->second.readers.push_back(j);
  }

  void mark_write(const Access& a, OpIndex j) {
    auto first = split(a.address);
    auto stop = split(a.address + a.count);
    finger_valid_ = false;  // it may point into the erased runs
    auto hint = runs_.erase(first, stop);
    auto fresh = runs_.emplace_hint(hint, a.address, Run{a.address + a.count, j, {}});
    // Merge with the previous run when it is the same writer with no readers:
    // keeps the map small when an op writes in pieces.
    if (fresh != runs_.begin()) {
      auto prev = std::prev(fresh);
      if (prev->second.writer == j && prev->second.readers.empty()) {
        prev->second.end = fresh->second.end;
        runs_.erase(fresh);
        fresh = prev;
      }
    }
    finger_ = fresh;
    finger_valid_ = true;
  }

  const Program& program_;
  const Layout& layout_;
  std::vector<RaceFinding>* unordered_;
  Map runs_;
  Map::iterator finger_;
  bool finger_valid_ = false;
  std::vector<Access> accesses_;
  std::vector<Conflict> conflicts_;
  std::vector<Conflict> pending_;
  std::vector<uint32_t> stamp_;     // ancestors found by the walk back
  std::vector<uint32_t> dep_mark_;  // direct deps and conflicts already seen
  uint32_t generation_ = 0;
  std::vector<OpIndex> stack_;
};

}  // namespace

std::optional<RaceFinding> find_race(const Program& program, const Layout& layout,
                                     std::vector<RaceFinding>* unordered) {
  return Sweep(program, layout, unordered).run();
}

}  // namespace chorus
