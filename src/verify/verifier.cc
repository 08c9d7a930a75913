// The symbolic verifier; see verifier.h for what it proves. The structure:
// structural checks per rank, then the shared matching, then the race sweep
// per rank and layout, then one event-driven run of all ranks per layout that
// moves symbolic content (verify/symbolic_memory.h) instead of data.
#include "verify/verifier.h"

#include "core/check.h"
#include "verify/race_check.h"
#include "verify/rank_set.h"
#include "verify/symbolic_memory.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <memory>
#include <unordered_set>

namespace chorus {

std::string_view to_string(VerifyErrorKind kind) {
  switch (kind) {
    case VerifyErrorKind::unsupported_mix: return "unsupported_mix";
    case VerifyErrorKind::build_failed: return "build_failed";
    case VerifyErrorKind::program_count: return "program_count";
    case VerifyErrorKind::buffer_size: return "buffer_size";
    case VerifyErrorKind::bad_op_kind: return "bad_op_kind";
    case VerifyErrorKind::region_out_of_bounds: return "region_out_of_bounds";
    case VerifyErrorKind::region_count_mismatch: return "region_count_mismatch";
    case VerifyErrorKind::self_dependency: return "self_dependency";
    case VerifyErrorKind::forward_dependency: return "forward_dependency";
    case VerifyErrorKind::missing_dependency: return "missing_dependency";
    case VerifyErrorKind::dependency_cycle: return "dependency_cycle";
    case VerifyErrorKind::input_written: return "input_written";
    case VerifyErrorKind::forbidden_access: return "forbidden_access";
    case VerifyErrorKind::bad_peer: return "bad_peer";
    case VerifyErrorKind::unmatched_send: return "unmatched_send";
    case VerifyErrorKind::unmatched_receive: return "unmatched_receive";
    case VerifyErrorKind::count_mismatch: return "count_mismatch";
    case VerifyErrorKind::overlapping_operands: return "overlapping_operands";
    case VerifyErrorKind::race: return "race";
    case VerifyErrorKind::deadlock: return "deadlock";
    case VerifyErrorKind::double_contribution: return "double_contribution";
    case VerifyErrorKind::misaligned_reduce: return "misaligned_reduce";
    case VerifyErrorKind::wrong_result: return "wrong_result";
    case VerifyErrorKind::barrier_incomplete: return "barrier_incomplete";
    case VerifyErrorKind::bad_spec: return "bad_spec";
  }
  return "invalid";
}

namespace {

using SetId = RankSetPool::Id;
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// Thrown inside the verifier only, to unwind to verify_programs() with the
// first problem found; never leaves this file.
struct Failure {
  VerifyError error;
};

class Verifier {
  // The memory of every rank under one layout.
  struct World {
    bool in_place = false;
    std::vector<Layout> layouts;
    std::vector<std::unique_ptr<SymbolicMemory>> memory;
    std::optional<OpRef> poison;  // first op that reduced undefined data
  };
 public:
  Verifier(const CollectiveSpec& spec, std::span<const Program> programs, std::string_view name,
           VerifyResult& result)
      : spec_(spec), programs_(programs), name_(name), result_(result), pool_(spec.nranks) {}

  void run() {
    if (static_cast<int>(programs_.size()) != spec_.nranks)
      fail(VerifyErrorKind::program_count, -1, kNoOp,
           str_cat("got ", programs_.size(), " programs for ", spec_.nranks, " ranks"));
    result_.ranks.assign(programs_.size(), RankStats{});
    for (int r = 0; r < spec_.nranks; ++r) check_structure(r);
    match();
    build_graph();
    const bool has_in_place = in_place_exists();
    result_.in_place_checked = has_in_place;
    check_races(false);
    if (has_in_place) check_races(true);
    simulate(has_in_place);
  }

 private:
  // ---- messages -----------------------------------------------------------

  std::string context() const {
    std::string s = str_cat(to_string(spec_.collective), "(", name_, ") N=", spec_.nranks,
                            " count=", spec_.count);
    if (spec_.collective == Collective::broadcast || spec_.collective == Collective::reduce)
      s += str_cat(" root=", spec_.root);
    if (!layout_name_.empty()) s += str_cat(" ", layout_name_);
    return s;
  }

  const Op& op_at(int r, OpIndex i) const { return programs_[static_cast<size_t>(r)].ops[i]; }

  [[noreturn]] void fail(VerifyErrorKind kind, int rank, OpIndex op, const std::string& what) {
    std::string where;
    if (rank >= 0 && op != kNoOp && op < programs_[static_cast<size_t>(rank)].ops.size())
      where = str_cat("rank ", rank, " op ", op, " (", describe(op_at(rank, op)), "): ");
    else if (rank >= 0)
      where = str_cat("rank ", rank, ": ");
    throw Failure{VerifyError{kind, rank, op, std::string(layout_name_),
                              str_cat(context(), ": ", where, what)}};
  }

  CollectiveSpec rank_spec(int r) const {
    CollectiveSpec s = spec_;
    s.rank = r;
    return s;
  }

  // ---- 1. structure -------------------------------------------------------

  void check_region(int r, OpIndex i, const Region& region, const Program& p, const char* role) {
    size_t size = 0;
    switch (region.buffer) {
      case BufferKind::input: size = p.input_count; break;
      case BufferKind::output: size = p.output_count; break;
      case BufferKind::scratch: size = p.scratch_count; break;
      default:
        fail(VerifyErrorKind::region_out_of_bounds, r, i,
             str_cat(role, " names buffer ", static_cast<int>(region.buffer),
                     ", which does not exist"));
    }
    if (region.offset > size || region.count > size - region.offset)
      fail(VerifyErrorKind::region_out_of_bounds, r, i,
           str_cat(role, " ", describe(region), " reaches past the end of ",
                   to_string(region.buffer), ", which holds ", size, " elements"));
  }

  void check_structure(int r) {
    const Program& p = programs_[static_cast<size_t>(r)];
    const BufferCounts want = buffer_counts(rank_spec(r));
    if (p.input_count != want.input || p.output_count != want.output)
      fail(VerifyErrorKind::buffer_size, r, kNoOp,
           str_cat("program declares input ", p.input_count, " and output ", p.output_count,
                   " elements, the collective has input ", want.input, " and output ",
                   want.output));
    if (p.ops.size() >= kNone)
      fail(VerifyErrorKind::program_count, r, kNoOp, str_cat("too many ops: ", p.ops.size()));
    const bool root = r == spec_.root;
    RankStats& st = result_.ranks[static_cast<size_t>(r)];
    st.ops = p.ops.size();
    std::vector<uint32_t> steps;
    bool forward = false;
    for (size_t k = 0; k < p.ops.size(); ++k) {
      const auto i = static_cast<OpIndex>(k);
      const Op& o = p.ops[k];
      if (static_cast<int>(o.kind) >= kOpKindCount)
        fail(VerifyErrorKind::bad_op_kind, r, kNoOp,
             str_cat("op ", k, " has kind ", static_cast<int>(o.kind), ", not an OpKind"));
      if (reads_src(o.kind)) check_region(r, i, o.src, p, "source");
      if (writes_dst(o.kind)) check_region(r, i, o.dst, p, "destination");
      if ((o.kind == OpKind::recv_reduce || o.kind == OpKind::copy || o.kind == OpKind::reduce) &&
          o.src.count != o.dst.count)
        fail(VerifyErrorKind::region_count_mismatch, r, i,
             str_cat("source has ", o.src.count, " elements but destination ", o.dst.count));
      for (OpIndex d : o.deps) {
        if (d == i) fail(VerifyErrorKind::self_dependency, r, i, "the op depends on itself");
        if (d >= p.ops.size())
          fail(VerifyErrorKind::missing_dependency, r, i,
               str_cat("depends on op ", d, " but the program has only ", p.ops.size(), " ops"));
        if (d > i) forward = true;
      }
      if (writes_dst(o.kind) && o.dst.buffer == BufferKind::input && o.dst.count > 0)
        fail(VerifyErrorKind::input_written, r, i, "writes the Input buffer, which is read-only");
      if (spec_.collective == Collective::broadcast && !root && reads_src(o.kind) &&
          o.src.buffer == BufferKind::input && o.src.count > 0)
        fail(VerifyErrorKind::forbidden_access, r, i,
             str_cat("reads Input on a non-root rank of a broadcast (root ", spec_.root,
                     "); that buffer is not part of the call there"));
      if (spec_.collective == Collective::reduce && !root && writes_dst(o.kind) &&
          o.dst.buffer == BufferKind::output && o.dst.count > 0)
        fail(VerifyErrorKind::forbidden_access, r, i,
             str_cat("writes Output on a non-root rank of a reduce (root ", spec_.root,
                     "); that buffer is not part of the call there"));
      if (o.kind == OpKind::send) {
        ++st.messages_sent;
        st.bytes_sent += o.src.count * spec_.elem_size;
      }
      if (is_receive(o.kind)) {
        ++st.messages_received;
        st.bytes_received += o.dst.count * spec_.elem_size;
      }
      if (o.kind == OpKind::recv_reduce || o.kind == OpKind::reduce)
        st.elements_reduced += o.dst.count;
      if (has_peer(o.kind)) steps.push_back(o.step);
    }
    std::sort(steps.begin(), steps.end());
    st.distinct_steps =
        static_cast<size_t>(std::unique(steps.begin(), steps.end()) - steps.begin());
    result_.total_messages += st.messages_sent;
    if (forward) check_cycles(r);
  }

  // Some dep points forward. Either the deps form a cycle (named in full) or
  // the program is merely out of order; both are errors, told apart.
  void check_cycles(int r) {
    const Program& p = programs_[static_cast<size_t>(r)];
    const size_t n = p.ops.size();
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the stack, 2 done
    std::vector<std::pair<OpIndex, size_t>> stack;
    for (size_t s = 0; s < n; ++s) {
      if (color[s]) continue;
      stack.push_back({static_cast<OpIndex>(s), 0});
      color[s] = 1;
      while (!stack.empty()) {
        auto& [v, next] = stack.back();
        const auto& deps = p.ops[v].deps;
        if (next == deps.size()) {
          color[v] = 2;
          stack.pop_back();
          continue;
        }
        const OpIndex w = deps[next++];
        if (color[w] == 1) {
          std::string cycle;
          size_t from = 0;
          while (stack[from].first != w) ++from;
          for (size_t k = from; k < stack.size(); ++k) cycle += str_cat(stack[k].first, " -> ");
          cycle += str_cat(w);
          fail(VerifyErrorKind::dependency_cycle, r, w,
               str_cat("deps form a cycle (op -> dep): ", cycle));
        }
        if (color[w] == 0) {
          color[w] = 1;
          stack.push_back({w, 0});
        }
      }
    }
    for (size_t k = 0; k < n; ++k)
      for (OpIndex d : p.ops[k].deps)
        if (d > k)
          fail(VerifyErrorKind::forward_dependency, r, static_cast<OpIndex>(k),
               str_cat("depends on the later op ", d, "; deps must name earlier ops"));
  }

  // ---- 2. matching --------------------------------------------------------

  void match() {
    MatchResult m = match_programs(programs_);
    if (m.error) {
      VerifyErrorKind kind = VerifyErrorKind::bad_peer;
      switch (m.error->kind) {
        case MatchError::Kind::bad_peer: kind = VerifyErrorKind::bad_peer; break;
        case MatchError::Kind::unmatched_send: kind = VerifyErrorKind::unmatched_send; break;
        case MatchError::Kind::unmatched_receive: kind = VerifyErrorKind::unmatched_receive; break;
        case MatchError::Kind::count_mismatch: kind = VerifyErrorKind::count_mismatch; break;
      }
      fail(kind, m.error->rank, m.error->op, m.error->message);
    }
    matching_ = std::move(m.matching);
  }

  // ---- global op graph ----------------------------------------------------

  void build_graph() {
    const size_t n = programs_.size();
    base_.assign(n + 1, 0);
    for (size_t r = 0; r < n; ++r) base_[r + 1] = base_[r] + programs_[r].ops.size();
    const size_t total = base_[n];
    if (total >= kNone)
      fail(VerifyErrorKind::program_count, -1, kNoOp, str_cat("too many ops in all: ", total));
    rank_of_.resize(total);
    prereq_.assign(total, 0);
    chan_next_.assign(total, kNone);
    partner_.assign(total, kNone);
    std::vector<uint32_t> fanout(total + 1, 0);
    for (size_t r = 0; r < n; ++r) {
      const Program& p = programs_[r];
      for (size_t i = 0; i < p.ops.size(); ++i) {
        const size_t g = base_[r] + i;
        rank_of_[g] = static_cast<uint32_t>(r);
        prereq_[g] = static_cast<uint32_t>(p.ops[i].deps.size());
        for (OpIndex d : p.ops[i].deps) ++fanout[base_[r] + d];
        const OpIndex prev = matching_.channel_prev[r][i];
        if (prev != kNoOp) {
          ++prereq_[g];
          chan_next_[base_[r] + prev] = static_cast<uint32_t>(g);
        }
        const OpRef& q = matching_.partner[r][i];
        if (q.rank >= 0) partner_[g] = static_cast<uint32_t>(base_[static_cast<size_t>(q.rank)] + q.op);
      }
    }
    dep_off_.assign(total + 1, 0);
    for (size_t g = 0; g < total; ++g) dep_off_[g + 1] = dep_off_[g] + fanout[g];
    dependents_.resize(dep_off_[total]);
    std::vector<uint32_t> fill(dep_off_.begin(), dep_off_.end() - 1);
    for (size_t r = 0; r < n; ++r) {
      const Program& p = programs_[r];
      for (size_t i = 0; i < p.ops.size(); ++i)
        for (OpIndex d : p.ops[i].deps)
          dependents_[fill[base_[r] + d]++] = static_cast<uint32_t>(base_[r] + i);
    }
  }

  // ---- layouts ------------------------------------------------------------

  bool in_place_exists() const {
    const CollectiveSpec s = rank_spec(0);
    return in_place_input_offset(s).has_value() || in_place_output_offset(s).has_value();
  }

  Layout layout_for(int r, bool in_place) const {
    const Program& p = programs_[static_cast<size_t>(r)];
    Layout l;
    l.in_place = in_place;
    l.size = p.input_count + p.output_count + p.scratch_count;
    l.base[0] = 0;
    l.base[1] = p.input_count;
    l.base[2] = p.input_count + p.output_count;
    if (in_place) {
      const CollectiveSpec s = rank_spec(r);
      if (auto off = in_place_input_offset(s)) {
        CHORUS_CHECK(*off + p.input_count <= p.output_count);
        l.base[0] = l.base[1] + *off;
      } else if (auto out_off = in_place_output_offset(s)) {
        CHORUS_CHECK(*out_off + p.output_count <= p.input_count);
        l.base[1] = l.base[0] + *out_off;
      }
    }
    return l;
  }

  void set_layout_name(bool in_place) { layout_name_ = in_place ? "in_place" : "out_of_place"; }

  // ---- 3. races -----------------------------------------------------------

  void check_races(bool in_place) {
    set_layout_name(in_place);
    for (int r = 0; r < spec_.nranks; ++r) {
      const Layout l = layout_for(r, in_place);
      if (auto f = find_race(programs_[static_cast<size_t>(r)], l))
        fail(f->kind == RaceFinding::Kind::race ? VerifyErrorKind::race
                                                : VerifyErrorKind::overlapping_operands,
             r, kNoOp, f->message);
    }
    layout_name_ = {};
  }

  // ---- 4 + 5. the symbolic run -------------------------------------------

  // Content divided by N (the average) carries kAveraged on its set id; rank
  // set ids are far below it.
  static constexpr RankSetPool::Id kAveraged = 1u << 30;
  static bool averaged(RankSetPool::Id set) {
    return set != RankSetPool::kUndefined && (set & kAveraged) != 0;
  }

  std::string content(const Segment& s, size_t k) const {
    if (s.set == RankSetPool::kUndefined) return "nothing defined";
    if (averaged(s.set))
      return "the average of " + content(Segment{s.count, s.delta, s.set & ~kAveraged}, k);
    const int64_t idx = static_cast<int64_t>(k) + s.delta;
    if (pool_.size(s.set) == 1)
      return str_cat("element ", idx, " of rank ", pool_.ranges(s.set)[0].lo, "'s input");
    return str_cat("element ", idx, " reduced over ranks ", pool_.describe(s.set));
  }

  // out = a (+) b elementwise. `dst` names the destination in errors.
  void combine(int r, OpIndex op, const Region& dst, const Segments& a, const Segments& b,
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
                       dst.offset + k, "], which holds ", content(sa, k),
                       ": an average is final"));
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

  // Applies op i of rank r (a copy or reduce) to every layout's memory.
  void apply_local(int r, OpIndex i) {
    const Op& o = op_at(r, i);
    if (o.dst.count == 0) return;
    for (World& w : worlds_) {
      enter(w);
      apply_local(w, r, i, o);
    }
    leave();
  }

  void apply_local(World& w, int r, OpIndex i, const Op& o) {
    const Layout& l = w.layouts[static_cast<size_t>(r)];
    SymbolicMemory& m = *w.memory[static_cast<size_t>(r)];
    if (o.kind == OpKind::copy) {
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
  void apply_message(int sender, OpIndex si, int receiver, OpIndex ri) {
    const Op& so = op_at(sender, si);
    const Op& ro = op_at(receiver, ri);
    if (so.src.count == 0) return;
    for (World& w : worlds_) {
      enter(w);
      apply_message(w, sender, so, receiver, ri, ro);
    }
    leave();
  }

  void apply_message(World& w, int sender, const Op& so, int receiver, OpIndex ri, const Op& ro) {
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

  void init_world(World& w, bool in_place) {
    w.in_place = in_place;
    for (int r = 0; r < spec_.nranks; ++r) {
      w.layouts.push_back(layout_for(r, in_place));
      const Layout& l = w.layouts.back();
      auto m = std::make_unique<SymbolicMemory>(l.size);
      const Program& p = programs_[static_cast<size_t>(r)];
      // A broadcast's Input means nothing off the root.
      const bool defined = spec_.collective != Collective::broadcast || r == spec_.root;
      if (defined && p.input_count > 0)
        m->write(l.base[0], Segments{{p.input_count, 0, pool_.singleton(r)}});
      w.memory.push_back(std::move(m));
    }
  }

  void enter(World& w) {
    world_ = &w;
    layout_name_ = w.in_place ? "in_place" : "out_of_place";
  }
  void leave() {
    world_ = nullptr;
    layout_name_ = {};
  }

  // Runs every rank to completion (or deadlock) under rendezvous sends, moving
  // symbolic content when `data`. With `eager`, a send completes as soon as it
  // starts (unbounded buffering); used only to tell what kind of deadlock a
  // rendezvous deadlock is.
  size_t run_events(bool data, bool eager, bool timing) {
    const size_t total = base_.back();
    waiting_ = prereq_;
    state_.assign(total, 0);
    if (timing) {
      t_start_.assign(total, 0);
      t_done_.assign(total, 0);
    }
    const bool barrier = timing && spec_.collective == Collective::barrier;
    if (barrier) {
      know_start_.assign(total, 0);
      know_end_.assign(total, 0);
    }
    size_t done = 0;
    std::vector<uint32_t> ready;
    for (size_t g = total; g-- > 0;)
      if (waiting_[g] == 0) ready.push_back(static_cast<uint32_t>(g));
    auto complete = [&](uint32_t g, uint32_t t) {
      state_[g] = 2;
      ++done;
      if (timing) t_done_[g] = t;
      for (uint32_t k = dep_off_[g]; k < dep_off_[g + 1]; ++k)
        if (--waiting_[dependents_[k]] == 0) ready.push_back(dependents_[k]);
    };
    while (!ready.empty()) {
      const uint32_t g = ready.back();
      ready.pop_back();
      const int r = static_cast<int>(rank_of_[g]);
      const auto i = static_cast<OpIndex>(g - base_[static_cast<size_t>(r)]);
      const Op& o = op_at(r, i);
      uint32_t t = 0;
      if (timing) {
        for (OpIndex d : o.deps) t = std::max(t, t_done_[base_[static_cast<size_t>(r)] + d]);
        const OpIndex cp = matching_.channel_prev[static_cast<size_t>(r)][i];
        if (cp != kNoOp) t = std::max(t, t_start_[base_[static_cast<size_t>(r)] + cp]);
        t_start_[g] = t;
      }
      if (barrier) {
        SetId k = pool_.singleton(r);
        for (OpIndex d : o.deps) k = pool_.unite(k, know_end_[base_[static_cast<size_t>(r)] + d]);
        const OpIndex cp = matching_.channel_prev[static_cast<size_t>(r)][i];
        if (cp != kNoOp) k = pool_.unite(k, know_start_[base_[static_cast<size_t>(r)] + cp]);
        know_start_[g] = k;
        know_end_[g] = k;
      }
      state_[g] = 1;
      if (chan_next_[g] != kNone && --waiting_[chan_next_[g]] == 0) ready.push_back(chan_next_[g]);
      if (!has_peer(o.kind)) {
        if (data) apply_local(r, i);
        complete(g, t);
        continue;
      }
      const uint32_t p = partner_[g];
      if (eager) {
        // The send leaves at once; a receive completes once its send started.
        if (o.kind == OpKind::send) {
          complete(g, t);
          if (state_[p] == 1) complete(p, t);
        } else if (state_[p] != 0) {
          complete(g, t);
        }
        continue;
      }
      if (state_[p] != 1) continue;  // the partner has not started yet
      const uint32_t tt = timing ? std::max(t, t_start_[p]) + 1 : 0;
      const bool g_sends = o.kind == OpKind::send;
      const uint32_t s = g_sends ? g : p;
      const uint32_t q = g_sends ? p : g;
      if (data) {
        const int sr = static_cast<int>(rank_of_[s]);
        const int qr = static_cast<int>(rank_of_[q]);
        apply_message(sr, static_cast<OpIndex>(s - base_[static_cast<size_t>(sr)]), qr,
                      static_cast<OpIndex>(q - base_[static_cast<size_t>(qr)]));
      }
      if (barrier) know_end_[q] = pool_.unite(know_end_[q], know_start_[s]);
      complete(g, tt);
      complete(p, tt);
    }
    return done;
  }

  // Explains a deadlock by following what the first stuck op waits for.
  [[noreturn]] void report_deadlock(size_t done) {
    const size_t total = base_.back();
    uint32_t g = 0;
    while (g < total && state_[g] == 2) ++g;
    const int r0 = static_cast<int>(rank_of_[g]);
    const OpIndex i0 = static_cast<OpIndex>(g - base_[static_cast<size_t>(r0)]);
    std::string chain;
    std::unordered_set<uint32_t> seen;
    uint32_t cur = g;
    for (int hop = 0; hop < 12 && seen.insert(cur).second; ++hop) {
      const int r = static_cast<int>(rank_of_[cur]);
      const auto i = static_cast<OpIndex>(cur - base_[static_cast<size_t>(r)]);
      const Op& o = op_at(r, i);
      std::string who = str_cat("rank ", r, " op ", i, " (", to_string(o.kind),
                                has_peer(o.kind) ? str_cat(" peer=", o.peer) : std::string(), ")");
      uint32_t next = kNone;
      std::string why;
      if (state_[cur] == 1) {
        next = partner_[cur];
        why = "has started and waits for its partner to start";
      } else {
        for (OpIndex d : o.deps)
          if (state_[base_[static_cast<size_t>(r)] + d] != 2) {
            next = static_cast<uint32_t>(base_[static_cast<size_t>(r)] + d);
            why = str_cat("waits for dep op ", d, " to complete");
            break;
          }
        const OpIndex cp = matching_.channel_prev[static_cast<size_t>(r)][i];
        if (next == kNone && cp != kNoOp && state_[base_[static_cast<size_t>(r)] + cp] == 0) {
          next = static_cast<uint32_t>(base_[static_cast<size_t>(r)] + cp);
          why = str_cat("waits for its channel predecessor op ", cp, " to start");
        }
      }
      chain += str_cat(chain.empty() ? "" : "; ", who, " ", why);
      if (next == kNone) break;
      cur = next;
    }
    const size_t stuck = total - done;
    // Tell whether unbounded buffering would have saved it.
    const size_t eager_done = run_events(false, true, false);
    leave();  // a deadlock does not depend on the layout
    const std::string kind = eager_done == total
                                 ? "deadlock under rendezvous sends (it completes only with "
                                   "unbounded buffering)"
                                 : "deadlock even with unbounded buffering";
    fail(VerifyErrorKind::deadlock, r0, i0,
         str_cat(kind, ": ", stuck, " of ", total, " ops never complete; ", chain));
  }

  // One run of all ranks that moves the symbolic content of every layout at
  // once: the order of events does not depend on the layout.
  void simulate(bool with_in_place) {
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

  void record_timing() {
    for (int r = 0; r < spec_.nranks; ++r) {
      uint32_t t = 0;
      for (size_t g = base_[static_cast<size_t>(r)]; g < base_[static_cast<size_t>(r) + 1]; ++g)
        t = std::max(t, t_done_[g]);
      result_.ranks[static_cast<size_t>(r)].critical_path = t;
      result_.critical_path = std::max<size_t>(result_.critical_path, t);
    }
  }

  // What Output of rank r must hold; nullopt where Output is not part of the call.
  std::optional<Segments> expected(int r) const {
    std::optional<Segments> want = unaveraged_expected(r);
    const bool reduces = spec_.collective == Collective::allreduce ||
                         spec_.collective == Collective::reduce_scatter ||
                         spec_.collective == Collective::reduce;
    if (want && spec_.average && reduces)
      for (Segment& seg : *want) seg.set |= kAveraged;
    return want;
  }
  std::optional<Segments> unaveraged_expected(int r) const {
    const size_t c = spec_.count;
    const size_t n = static_cast<size_t>(spec_.nranks);
    const auto ur = static_cast<size_t>(r);
    Segments s;
    switch (spec_.collective) {
      case Collective::allreduce: s.push_back({c, 0, pool_.all()}); break;
      case Collective::reduce_scatter:
        s.push_back({c, static_cast<int64_t>(ur * c), pool_.all()});
        break;
      case Collective::broadcast: s.push_back({c, 0, pool_.singleton(spec_.root)}); break;
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
      case Collective::barrier: return std::nullopt;
    }
    return s;
  }

  void check_output(const World& w, int r) {
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
          hint = str_cat(" (rank ", w.poison->rank, " op ", w.poison->op,
                         " reduced undefined data)");
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

  void check_barrier() {
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

  const CollectiveSpec& spec_;
  std::span<const Program> programs_;
  std::string_view name_;
  VerifyResult& result_;
  RankSetPool pool_;
  std::string_view layout_name_;
  Matching matching_;

  std::vector<size_t> base_;
  std::vector<uint32_t> rank_of_, prereq_, chan_next_, partner_, dep_off_, dependents_;
  std::vector<uint32_t> waiting_, t_start_, t_done_;
  std::vector<uint8_t> state_;
  std::vector<SetId> know_start_, know_end_;

  std::vector<World> worlds_;
  World* world_ = nullptr;  // the one being updated, for messages
  Segments seg_a_, seg_b_, seg_c_;
};

}  // namespace

VerifyResult verify_programs(const CollectiveSpec& spec, std::span<const Program> programs,
                             std::string_view algorithm) {
  VerifyResult result;
  std::string bad;
  if (spec.nranks < 1)
    bad = str_cat("nranks must be >= 1, got ", spec.nranks);
  else if (spec.root < 0 || spec.root >= spec.nranks)
    bad = str_cat("root ", spec.root, " outside [0, ", spec.nranks, ")");
  if (!bad.empty()) {
    result.error = VerifyError{VerifyErrorKind::bad_spec, -1, kNoOp, "",
                               str_cat(to_string(spec.collective), "(", algorithm, ") N=",
                                       spec.nranks, " count=", spec.count, ": ", bad)};
    return result;
  }
  try {
    Verifier(spec, programs, algorithm, result).run();
  } catch (Failure& f) {
    result.error = std::move(f.error);
  }
  return result;
}

}  // namespace chorus
