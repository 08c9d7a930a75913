// The verifier's symbolic run: memory holds, instead of data, which input
// element of which set of ranks each element carries (verify/symbolic_memory.h,
// verify/rank_set.h); every op and message of the event run moves or reduces
// that content in both layouts at once, a reduction that counts a rank twice
// or combines two different elements is named where it happens, and at the
// end every Output must hold what the collective defines (the Barrier: every
// rank has heard from every rank). See verifier_impl.h.
#include "core/check.h"
#include "verify/verifier_impl.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::verify_internal {

std::string Verifier::content(const Segment& s, size_t k) const {
  if (s.set == RankSetPool::kUndefined) return "nothing defined";
  if (averaged(s.set))
    return "the average of " + content(Segment{s.count, s.delta, s.set & ~kAveraged}, k);
  const int64_t idx = static_cast<int64_t>(k) + s.delta;
  if (pool_.size(s.set) == 1)
    return str_cat("element ", idx, " of rank ", pool_.ranges(s.set)[0].lo, "'s input");
  return str_cat("element ", idx, " reduced over ranks ", pool_.describe(s.set));
}

// out = a (+) b elementwise. `dst` names the destination in errors.
void Verifier::combine(int r, OpIndex op, const Region& dst, const Segments& a, const Segments& b,
                       Segments& out) {
  out.clear();
  size_t ia = 0, ib = 0, ua = 0, ub = 0, k = 0;  // u*: elements of the current segment used
  while (ia < a.size() && ib < b.size()) {
    const Segment& sa = a[ia];
    const Segment& sb = b[ib];
    const size_t len = std::min(sa.count - ua, sb.count - ub);
    Segment res{len, sa.delta, RankSetPool::kUndefined};
    if (sa.set == RankSetPool::kUndefined || sb.set == RankSetPool::kUndefined) {
      res.delta = 0;
      if (!world_->poison) world_->poison = OpRef{r, op};
    } else {
      if (averaged(sa.set) || averaged(sb.set))
        fail(VerifyErrorKind::wrong_result, r, op,
             str_cat("reduces ", content(sb, k), " into ", to_string(dst.buffer), "[",
                     dst.offset + k, "], which holds ", content(sa, k), ": an average is final"));
      if (sa.delta != sb.delta)
        fail(VerifyErrorKind::misaligned_reduce, r, op,
             str_cat("reduces ", content(sb, k), " into ", to_string(dst.buffer), "[",
                     dst.offset + k, "], which holds ", content(sa, k)));
      auto u = pool_.unite_disjoint(sa.set, sb.set);
      if (!u)
        fail(VerifyErrorKind::double_contribution, r, op,
             str_cat("counts rank ", pool_.first_common(sa.set, sb.set),
                     "'s contribution twice: ", to_string(dst.buffer), "[", dst.offset + k,
                     "] holds ", content(sa, k), " and receives ", content(sb, k)));
      res.set = *u;
    }
    if (!out.empty() && out.back().same_content(res))
      out.back().count += len;
    else
      out.push_back(res);
    k += len;
    ua += len;
    ub += len;
    if (ua == sa.count) ++ia, ua = 0;
    if (ub == sb.count) ++ib, ub = 0;
  }
}

// Applies op i of rank r (a local op or a get) to every layout's memory.
void Verifier::apply_local(int r, OpIndex i) {
  const Op& o = op_at(r, i);
  // A signal or a wait moves no data, whatever its unused regions say.
  if (!writes_dst(o.kind) || o.dst.count == 0) return;
  for (World& w : worlds_) {
    enter(w);
    apply_local(w, r, i, o);
  }
  leave();
}

void Verifier::apply_local(World& w, int r, OpIndex i, const Op& o) {
  const Layout& l = w.layouts[static_cast<size_t>(r)];
  SymbolicMemory& m = *w.memory[static_cast<size_t>(r)];
  if (reads_remote(o.kind)) {
    // The peer's memory as it is now: the checks of the gets proved that
    // every write of it is ordered with the read.
    const auto q = static_cast<size_t>(o.peer);
    w.memory[q]->read(w.layouts[q].address(remote_region(o)), o.remote.count, seg_b_);
    if (o.kind == OpKind::get) {
      m.write(l.address(o.dst), seg_b_);
    } else {
      m.read(l.address(o.src), o.src.count, seg_a_);
      combine(r, i, o.dst, seg_a_, seg_b_, seg_c_);
      m.write(l.address(o.dst), seg_c_);
    }
  } else if (o.kind == OpKind::copy) {
    if (is_noop_copy(o, l)) return;
    m.read(l.address(o.src), o.src.count, seg_a_);
    m.write(l.address(o.dst), seg_a_);
  } else if (o.kind == OpKind::divide) {
    m.read(l.address(o.dst), o.dst.count, seg_a_);
    size_t k = 0;
    for (Segment& seg : seg_a_) {
      if (averaged(seg.set))
        fail(VerifyErrorKind::wrong_result, r, i,
             str_cat("divides ", to_string(o.dst.buffer), "[", o.dst.offset + k, "], which holds ",
                     content(seg, k), ", a second time"));
      if (o.divisor != static_cast<uint32_t>(spec_.nranks))
        fail(VerifyErrorKind::wrong_result, r, i,
             str_cat("divides by ", o.divisor, ", not by N = ", spec_.nranks));
      if (seg.set != RankSetPool::kUndefined) seg.set |= kAveraged;
      k += seg.count;
    }
    m.write(l.address(o.dst), seg_a_);
  } else {
    m.read(l.address(o.dst), o.dst.count, seg_a_);
    m.read(l.address(o.src), o.src.count, seg_b_);
    combine(r, i, o.dst, seg_a_, seg_b_, seg_c_);
    m.write(l.address(o.dst), seg_c_);
  }
}

// Moves a matched message in every layout's memory.
void Verifier::apply_message(int sender, OpIndex si, int receiver, OpIndex ri) {
  const Op& so = op_at(sender, si);
  const Op& ro = op_at(receiver, ri);
  if (so.src.count == 0) return;
  for (World& w : worlds_) {
    enter(w);
    apply_message(w, sender, so, receiver, ri, ro);
  }
  leave();
}

void Verifier::apply_message(World& w, int sender, const Op& so, int receiver, OpIndex ri,
                             const Op& ro) {
  const Layout& ls = w.layouts[static_cast<size_t>(sender)];
  const Layout& lr = w.layouts[static_cast<size_t>(receiver)];
  SymbolicMemory& mr = *w.memory[static_cast<size_t>(receiver)];
  w.memory[static_cast<size_t>(sender)]->read(ls.address(so.src), so.src.count, seg_b_);
  if (ro.kind == OpKind::recv) {
    mr.write(lr.address(ro.dst), seg_b_);
  } else {
    mr.read(lr.address(ro.src), ro.src.count, seg_a_);
    combine(receiver, ri, ro.dst, seg_a_, seg_b_, seg_c_);
    mr.write(lr.address(ro.dst), seg_c_);
  }
}

void Verifier::init_world(World& w, bool in_place) {
  w.in_place = in_place;
  for (int r = 0; r < spec_.nranks; ++r) {
    w.layouts.push_back(layout_for(r, in_place));
    const Layout& l = w.layouts.back();
    auto m = std::make_unique<SymbolicMemory>(l.size);
    const Program& p = programs_[static_cast<size_t>(r)];
    // A broadcast's Input means nothing off the root.
    const bool defined = uses_input(spec_.collective, r, spec_.root);
    if (defined && p.input_count > 0)
      m->write(l.base[0], Segments{{p.input_count, 0, pool_.singleton(r)}});
    w.memory.push_back(std::move(m));
  }
}

void Verifier::enter(World& w) {
  world_ = &w;
  layout_name_ = w.in_place ? "in_place" : "out_of_place";
}
void Verifier::leave() {
  world_ = nullptr;
  layout_name_ = {};
}

// Runs every rank to completion (or deadlock) under rendezvous sends, moving
// symbolic content when `data`. With `eager`, a send completes as soon as it
// starts (unbounded buffering); used only to tell what kind of deadlock a

void Verifier::simulate(bool with_in_place) {
  worlds_.resize(with_in_place ? 2 : 1);
  for (size_t k = 0; k < worlds_.size(); ++k) init_world(worlds_[k], k == 1);
  const size_t done = run_events(true, false, true);
  if (done != base_.back()) report_deadlock(done);
  record_timing();
  for (World& w : worlds_) {
    enter(w);
    for (int r = 0; r < spec_.nranks; ++r) check_output(w, r);
    leave();
  }
  if (spec_.collective == Collective::barrier) check_barrier();
}

// What Output of rank r must hold; nullopt where Output is not part of the call.
std::optional<Segments> Verifier::expected(int r) const {
  std::optional<Segments> want = unaveraged_expected(r);
  if (want && spec_.average && reduces(spec_.collective))
    for (Segment& seg : *want) seg.set |= kAveraged;
  return want;
}
std::optional<Segments> Verifier::unaveraged_expected(int r) const {
  const size_t c = spec_.count;
  const size_t n = static_cast<size_t>(spec_.nranks);
  const auto ur = static_cast<size_t>(r);
  Segments s;
  switch (spec_.collective) {
    case Collective::allreduce:
      s.push_back({c, 0, pool_.all()});
      break;
    case Collective::reduce_scatter:
      s.push_back({c, static_cast<int64_t>(ur * c), pool_.all()});
      break;
    case Collective::broadcast:
      s.push_back({c, 0, pool_.singleton(spec_.root)});
      break;
    case Collective::reduce:
      if (r != spec_.root) return std::nullopt;
      s.push_back({c, 0, pool_.all()});
      break;
    case Collective::allgather:
      // Block j of Output is rank j's input: element j*c + t is input t.
      for (size_t j = 0; j < n; ++j)
        s.push_back({c, -static_cast<int64_t>(j * c), pool_.singleton(static_cast<int>(j))});
      break;
    case Collective::alltoall:
      // Block j of rank r's Output is block r of rank j's Input.
      for (size_t j = 0; j < n; ++j)
        s.push_back({c, static_cast<int64_t>(ur * c) - static_cast<int64_t>(j * c),
                     pool_.singleton(static_cast<int>(j))});
      break;
    case Collective::gather:
      // On the root, as allgather's: block j of Output is rank j's Input.
      if (r != spec_.root) return std::nullopt;
      for (size_t j = 0; j < n; ++j)
        s.push_back({c, -static_cast<int64_t>(j * c), pool_.singleton(static_cast<int>(j))});
      break;
    case Collective::scatter:
      // Rank r's Output is block r of the root's Input.
      s.push_back({c, static_cast<int64_t>(ur * c), pool_.singleton(spec_.root)});
      break;
    case Collective::barrier:
      return std::nullopt;
  }
  return s;
}

void Verifier::check_output(const World& w, int r) {
  const auto want = expected(r);
  if (!want) return;
  const Program& p = programs_[static_cast<size_t>(r)];
  const Layout& l = w.layouts[static_cast<size_t>(r)];
  w.memory[static_cast<size_t>(r)]->read(l.base[1], p.output_count, seg_a_);
  const Segments& have = seg_a_;
  size_t ia = 0, ib = 0, ua = 0, ub = 0, k = 0;
  while (ia < have.size() && ib < want->size()) {
    const Segment& sa = have[ia];
    const Segment& sb = (*want)[ib];
    if (sb.count == 0) {
      ++ib;
      continue;
    }
    if (!sa.same_content(sb)) {
      std::string hint;
      if (sa.set == RankSetPool::kUndefined && w.poison)
        hint = str_cat(" (rank ", w.poison->rank, " op ", w.poison->op, " reduced undefined data)");
      else if (sa.set != RankSetPool::kUndefined && sa.delta == sb.delta &&
               averaged(sa.set) == averaged(sb.set) &&
               pool_.first_missing(sb.set & ~kAveraged, sa.set & ~kAveraged) >= 0)
        hint = str_cat(" (rank ", pool_.first_missing(sb.set & ~kAveraged, sa.set & ~kAveraged),
                       "'s contribution is missing)");
      fail(VerifyErrorKind::wrong_result, r, kNoOp,
           str_cat("output[", k, "] holds ", content(sa, k), " but must hold ", content(sb, k),
                   hint));
    }
    const size_t len = std::min(sa.count - ua, sb.count - ub);
    k += len;
    ua += len;
    ub += len;
    if (ua == sa.count) ++ia, ua = 0;
    if (ub == sb.count) ++ib, ub = 0;
  }
}

void Verifier::check_barrier() {
  for (int r = 0; r < spec_.nranks; ++r) {
    SetId k = pool_.singleton(r);
    for (size_t g = base_[static_cast<size_t>(r)]; g < base_[static_cast<size_t>(r) + 1]; ++g)
      k = pool_.unite(k, know_end_[g]);
    const int missing = pool_.first_missing(pool_.all(), k);
    if (missing >= 0)
      fail(VerifyErrorKind::barrier_incomplete, r, kNoOp,
           str_cat("can complete the barrier before rank ", missing,
                   " has started it: the rank has heard only from ranks ", pool_.describe(k)));
  }
}

}  // namespace chorus::verify_internal
