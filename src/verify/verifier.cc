// The symbolic verifier; see verifier.h for what it proves. The structure:
// structural checks per rank, then the shared matching (of messages, and of
// signals with waits), then the race sweep per rank and layout, for one-sided
// Programs the happens-before checks of every get (verify/happens_before.h),
// then one event-driven run of all ranks per layout that moves symbolic
// content (verify/symbolic_memory.h) instead of data.
#include "verify/verifier.h"

#include "core/check.h"
#include "verify/happens_before.h"
#include "verify/race_check.h"
#include "verify/rank_set.h"
#include "verify/symbolic_memory.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <memory>
#include <unordered_map>
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
    case VerifyErrorKind::no_windows: return "no_windows";
    case VerifyErrorKind::bad_flag: return "bad_flag";
    case VerifyErrorKind::bad_remote_region: return "bad_remote_region";
    case VerifyErrorKind::remote_not_staged: return "remote_not_staged";
    case VerifyErrorKind::unmatched_wait: return "unmatched_wait";
    case VerifyErrorKind::unmatched_signal: return "unmatched_signal";
    case VerifyErrorKind::duplicate_signal: return "duplicate_signal";
    case VerifyErrorKind::duplicate_wait: return "duplicate_wait";
    case VerifyErrorKind::read_before_signal: return "read_before_signal";
    case VerifyErrorKind::overwrite_before_read: return "overwrite_before_read";
    case VerifyErrorKind::read_after_return: return "read_after_return";
    case VerifyErrorKind::unchecked_read: return "unchecked_read";
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
    for (const Program& p : programs_) one_sided_ = one_sided_ || p.one_sided();
    if (one_sided_)
      for (int r = 0; r < spec_.nranks; ++r) check_remote_regions(r);
    match();
    number_ops();
    if (one_sided_) {
      match_flags();
      for (int r = 0; r < spec_.nranks; ++r) check_stamp_checks(r);
    }
    build_graph();
    if (one_sided_) order_ops();
    const bool has_in_place = in_place_exists();
    result_.in_place_checked = has_in_place;
    check_races(false);
    if (has_in_place) check_races(true);
    if (one_sided_) {
      // A get that does not wait for its data also unorders what the wait
      // ordered at both ranks: report the cause before the races.
      check_remote_reads(has_in_place);
      check_unordered_races();
    }
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

  VerifyError error(VerifyErrorKind kind, int rank, OpIndex op, const std::string& what) const {
    std::string where;
    if (rank >= 0 && op != kNoOp && op < programs_[static_cast<size_t>(rank)].ops.size())
      where = str_cat("rank ", rank, " op ", op, " (", describe(op_at(rank, op)), "): ");
    else if (rank >= 0)
      where = str_cat("rank ", rank, ": ");
    return VerifyError{kind, rank, op, std::string(layout_name_),
                       str_cat(context(), ": ", where, what)};
  }

  [[noreturn]] void fail(VerifyErrorKind kind, int rank, OpIndex op, const std::string& what) {
    throw Failure{error(kind, rank, op, what)};
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
      case BufferKind::window: size = p.window_count; break;
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

  // What one-sided ops and window regions need of the op alone: a call whose
  // ranks share windows, a peer, a flag in range.
  void check_one_sided(int r, OpIndex i, const Op& o) {
    const bool window = (reads_src(o.kind) && o.src.buffer == BufferKind::window) ||
                        (writes_dst(o.kind) && o.dst.buffer == BufferKind::window);
    if (!is_one_sided(o.kind) && !window) return;
    if (!spec_.windows)
      fail(VerifyErrorKind::no_windows, r, i,
           str_cat(is_one_sided(o.kind) ? "is a one-sided op" : "uses the staging window",
                   ", but the ranks of this call share no windows (spec.windows is false)"));
    if (!is_one_sided(o.kind)) return;
    if (o.peer < 0 || o.peer >= spec_.nranks || o.peer == r)
      fail(VerifyErrorKind::bad_peer, r, i,
           o.peer == r ? std::string("names the rank itself as its peer")
                       : str_cat("names peer ", o.peer, ", outside [0, ", spec_.nranks, ")"));
    if ((o.kind == OpKind::signal || o.kind == OpKind::wait) && o.flag >= kMaxFlags)
      fail(VerifyErrorKind::bad_flag, r, i,
           str_cat("uses flag ", o.flag, "; flags are 0 .. ", kMaxFlags - 1));
  }

  // Every get of peer q's memory must depend, in its own Program, on a wait
  // for q: the executor compares q's published call stamp with its own at
  // each wait for q, so a get without one could read a peer that is in
  // another call. A walk back along deps from each get, stopping at the
  // first wait for its peer (usually a direct dep).
  void check_stamp_checks(int r) {
    const Program& p = programs_[static_cast<size_t>(r)];
    std::vector<uint32_t> seen(p.ops.size(), 0);
    std::vector<OpIndex> stack;
    uint32_t epoch = 0;
    for (size_t k = 0; k < p.ops.size(); ++k) {
      const Op& o = p.ops[k];
      if (!reads_remote(o.kind) || o.remote.count == 0) continue;
      ++epoch;
      bool found = false;
      stack.assign(o.deps.begin(), o.deps.end());
      while (!stack.empty() && !found) {
        const OpIndex d = stack.back();
        stack.pop_back();
        if (d >= p.ops.size() || seen[d] == epoch) continue;
        seen[d] = epoch;
        const Op& dep = p.ops[d];
        if (dep.kind == OpKind::wait && dep.peer == o.peer) found = true;
        stack.insert(stack.end(), dep.deps.begin(), dep.deps.end());
      }
      if (!found)
        fail(VerifyErrorKind::unchecked_read, r, static_cast<OpIndex>(k),
             str_cat("reads rank ", o.peer, "'s memory without depending on a wait for rank ",
                     o.peer, ": nothing compares rank ", o.peer,
                     "'s call stamp with this rank's before the read"));
    }
  }

  // Where a Program stages its shared input or output must lie in its window.
  void check_staging(int r, size_t at, size_t count, const char* what) {
    const Program& p = programs_[static_cast<size_t>(r)];
    if (at == SIZE_MAX) return;
    if (at > p.window_count || count > p.window_count - at)
      fail(VerifyErrorKind::region_out_of_bounds, r, kNoOp,
           str_cat("stages its shared ", what, " at window[", at, ",+", count,
                   "), past the end of its staging window, which holds ", p.window_count,
                   " elements"));
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
      check_one_sided(r, i, o);
      if (reads_src(o.kind)) check_region(r, i, o.src, p, "source");
      if (writes_dst(o.kind)) check_region(r, i, o.dst, p, "destination");
      if ((o.kind == OpKind::recv_reduce || o.kind == OpKind::copy || o.kind == OpKind::reduce ||
           o.kind == OpKind::get_reduce) &&
          o.src.count != o.dst.count)
        fail(VerifyErrorKind::region_count_mismatch, r, i,
             str_cat("source has ", o.src.count, " elements but destination ", o.dst.count));
      if (reads_remote(o.kind) && o.remote.count != o.dst.count)
        fail(VerifyErrorKind::region_count_mismatch, r, i,
             str_cat("reads ", o.remote.count, " elements of rank ", o.peer,
                     " but its destination has ", o.dst.count));
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
      if (o.kind == OpKind::recv_reduce || o.kind == OpKind::reduce || o.kind == OpKind::get_reduce)
        st.elements_reduced += o.dst.count;
      if (reads_remote(o.kind)) {
        ++st.gets;
        st.bytes_got += o.remote.count * spec_.elem_size;
      }
      if (o.kind == OpKind::signal) ++st.signals;
      if (has_peer(o.kind) || is_one_sided(o.kind)) steps.push_back(o.step);
    }
    if (!spec_.window_buffers) {
      check_staging(r, p.window_input, p.input_count, "input");
      check_staging(r, p.window_output, p.output_count, "output");
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

  // A get's remote region, at the peer: a buffer peers may read, inside it,
  // and staged where the call's buffers are not in windows.
  void check_remote_regions(int r) {
    const Program& p = programs_[static_cast<size_t>(r)];
    for (size_t k = 0; k < p.ops.size(); ++k) {
      const Op& o = p.ops[k];
      if (!reads_remote(o.kind)) continue;
      const auto i = static_cast<OpIndex>(k);
      const int q = o.peer;
      const Program& pq = programs_[static_cast<size_t>(q)];
      const Region& at = o.remote;
      size_t size = 0;
      switch (at.buffer) {
        case BufferKind::input: size = pq.input_count; break;
        case BufferKind::output: size = pq.output_count; break;
        case BufferKind::window: size = pq.window_count; break;
        default:
          fail(VerifyErrorKind::bad_remote_region, r, i,
               str_cat("reads rank ", q, "'s ", to_string(at.buffer),
                       ", which peers cannot read (only input, output and window are shared)"));
      }
      const char* name = at.buffer == BufferKind::window ? "staging window" : "";
      if (at.offset > size || at.count > size - at.offset)
        fail(VerifyErrorKind::bad_remote_region, r, i,
             str_cat("reads rank ", q, "'s ", describe(at), ", past the end of its ",
                     *name ? name : to_string(at.buffer), ", which holds ", size, " elements"));
      const bool off_root = q != spec_.root && at.count > 0;
      if ((spec_.collective == Collective::broadcast && off_root &&
           at.buffer == BufferKind::input) ||
          (spec_.collective == Collective::reduce && off_root && at.buffer == BufferKind::output))
        fail(VerifyErrorKind::forbidden_access, r, i,
             str_cat("reads rank ", q, "'s ", to_string(at.buffer), ", which is not part of the ",
                     to_string(spec_.collective), " off the root (root ", spec_.root, ")"));
      if (at.buffer == BufferKind::window || spec_.window_buffers) continue;
      const size_t staged = at.buffer == BufferKind::input ? pq.window_input : pq.window_output;
      if (staged == SIZE_MAX)
        fail(VerifyErrorKind::remote_not_staged, r, i,
             str_cat("reads rank ", q, "'s shared ", to_string(at.buffer), ", which rank ", q,
                     "'s Program never stages in its window (window_", to_string(at.buffer),
                     " is unset), and the call's buffers are not in windows"));
    }
  }

  // Where in the peer's memory a get reads: its staging window, or its own
  // input or output (in windows), or where it staged them (checked above).
  Region remote_region(const Op& o) const {
    const Region& at = o.remote;
    if (at.buffer == BufferKind::window || spec_.window_buffers) return at;
    const Program& pq = programs_[static_cast<size_t>(o.peer)];
    const size_t staged = at.buffer == BufferKind::input ? pq.window_input : pq.window_output;
    return {BufferKind::window, staged + at.offset, at.count};
  }

  // "rank 2's input[0,+4)", with where the peer staged it.
  std::string remote_name(const Op& o) const {
    const Region at = remote_region(o);
    std::string s = str_cat("rank ", o.peer, "'s ", describe(o.remote));
    if (!(at == o.remote)) s += str_cat(" (staged at ", describe(at), ")");
    return s;
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

  // Global op ids: rank r's op i is base_[r] + i.
  void number_ops() {
    const size_t n = programs_.size();
    base_.assign(n + 1, 0);
    for (size_t r = 0; r < n; ++r) base_[r + 1] = base_[r] + programs_[r].ops.size();
    const size_t total = base_[n];
    if (total >= kNone)
      fail(VerifyErrorKind::program_count, -1, kNoOp, str_cat("too many ops in all: ", total));
    rank_of_.resize(total);
    for (size_t r = 0; r < n; ++r)
      for (size_t g = base_[r]; g < base_[r + 1]; ++g) rank_of_[g] = static_cast<uint32_t>(r);
  }

  uint32_t global(int r, OpIndex i) const {
    return static_cast<uint32_t>(base_[static_cast<size_t>(r)] + i);
  }
  OpIndex local(uint32_t g) const { return static_cast<OpIndex>(g - base_[rank_of_[g]]); }

  // Signals with waits: a wait meets the one signal of the call from its peer
  // with its flag; each signal is waited for once.
  void match_flags() {
    const size_t total = base_.back();
    signal_of_.assign(total, kNone);
    std::vector<uint32_t> wait_of(total, kNone);
    const auto n = static_cast<uint64_t>(spec_.nranks);
    auto key = [&](int from, int to, uint32_t flag) {
      return (static_cast<uint64_t>(from) * n + static_cast<uint64_t>(to)) * kMaxFlags + flag;
    };
    std::unordered_map<uint64_t, uint32_t> raised;
    for (int r = 0; r < spec_.nranks; ++r) {
      const Program& p = programs_[static_cast<size_t>(r)];
      for (size_t k = 0; k < p.ops.size(); ++k) {
        const Op& o = p.ops[k];
        if (o.kind != OpKind::signal) continue;
        const auto i = static_cast<OpIndex>(k);
        const auto [it, fresh] = raised.emplace(key(r, o.peer, o.flag), global(r, i));
        if (!fresh)
          fail(VerifyErrorKind::duplicate_signal, r, i,
               str_cat("raises flag ", o.flag, " at rank ", o.peer,
                       " a second time in the call (op ", local(it->second),
                       " raised it already); a peer and flag take one signal per call"));
      }
    }
    for (int r = 0; r < spec_.nranks; ++r) {
      const Program& p = programs_[static_cast<size_t>(r)];
      for (size_t k = 0; k < p.ops.size(); ++k) {
        const Op& o = p.ops[k];
        if (o.kind != OpKind::wait) continue;
        const auto i = static_cast<OpIndex>(k);
        const auto it = raised.find(key(o.peer, r, o.flag));
        if (it == raised.end())
          fail(VerifyErrorKind::unmatched_wait, r, i,
               str_cat("waits for flag ", o.flag, " from rank ", o.peer, ", which rank ", o.peer,
                       " never raises at this rank in the call (a missing signal): the wait "
                       "would never complete"));
        const uint32_t sig = it->second;
        if (wait_of[sig] != kNone)
          fail(VerifyErrorKind::duplicate_wait, r, i,
               str_cat("waits for flag ", o.flag, " from rank ", o.peer, " a second time (op ",
                       local(wait_of[sig]), " waits for it already); rank ", o.peer, " op ",
                       local(sig), " raises it once"));
        wait_of[sig] = global(r, i);
        signal_of_[global(r, i)] = sig;
      }
    }
    for (int r = 0; r < spec_.nranks; ++r) {
      const Program& p = programs_[static_cast<size_t>(r)];
      for (size_t k = 0; k < p.ops.size(); ++k) {
        const Op& o = p.ops[k];
        const auto i = static_cast<OpIndex>(k);
        if (o.kind == OpKind::signal && wait_of[global(r, i)] == kNone)
          fail(VerifyErrorKind::unmatched_signal, r, i,
               str_cat("raises flag ", o.flag, " at rank ", o.peer, ", which never waits for it ",
                       "in the call"));
      }
    }
  }

  // ---- global op graph ----------------------------------------------------

  // Edges: deps, and a signal before its wait. The event run counts them all
  // as prerequisites; a message is not an edge (its two sides meet instead).
  void build_graph() {
    const size_t n = programs_.size();
    const size_t total = base_[n];
    prereq_.assign(total, 0);
    chan_next_.assign(total, kNone);
    partner_.assign(total, kNone);
    std::vector<uint32_t> fanout(total + 1, 0);
    for (size_t r = 0; r < n; ++r) {
      const Program& p = programs_[r];
      for (size_t i = 0; i < p.ops.size(); ++i) {
        const size_t g = base_[r] + i;
        prereq_[g] = static_cast<uint32_t>(p.ops[i].deps.size());
        for (OpIndex d : p.ops[i].deps) ++fanout[base_[r] + d];
        if (!signal_of_.empty() && signal_of_[g] != kNone) {
          ++prereq_[g];
          ++fanout[signal_of_[g]];
        }
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
    for (size_t g = 0; g < signal_of_.size(); ++g)
      if (signal_of_[g] != kNone) dependents_[fill[signal_of_[g]]++] = static_cast<uint32_t>(g);
  }

  // The graph's topological order, for happens-before; a cycle (through
  // signals and waits: deps alone point backwards) is a deadlock.
  void order_ops() {
    if (hb_.order(base_.back(), dep_off_, dependents_)) return;
    const size_t done = run_events(false, false, false);
    CHORUS_CHECK(done < base_.back());  // every edge is a prerequisite
    report_deadlock(done);
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
    l.size = p.input_count + p.output_count + p.scratch_count + p.window_count;
    l.base[0] = 0;
    l.base[1] = p.input_count;
    l.base[2] = p.input_count + p.output_count;
    l.base[3] = p.input_count + p.output_count + p.scratch_count;
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

  // One-sided Programs: pairs that deps do not order are kept for
  // check_unordered_races, which asks whether other ranks order them.
  void check_races(bool in_place) {
    set_layout_name(in_place);
    for (int r = 0; r < spec_.nranks; ++r) {
      const Layout l = layout_for(r, in_place);
      if (auto f =
              find_race(programs_[static_cast<size_t>(r)], l, one_sided_ ? &unordered_ : nullptr))
        fail(f->kind == RaceFinding::Kind::race ? VerifyErrorKind::race
                                                : VerifyErrorKind::overlapping_operands,
             r, kNoOp, f->message);
      unordered_where_.resize(unordered_.size(), {r, in_place});
    }
    layout_name_ = {};
  }

  void check_unordered_races() {
    std::vector<size_t> asked;
    for (size_t k = 0; k < unordered_.size(); ++k) {
      const int r = unordered_where_[k].first;
      asked.push_back(
          hb_.ask(hb_.add_op(global(r, unordered_[k].first)), global(r, unordered_[k].second)));
    }
    hb_.answer();
    for (size_t k = 0; k < unordered_.size(); ++k) {
      if (hb_.before(asked[k]) || hb_.after(asked[k])) continue;
      set_layout_name(unordered_where_[k].second);
      fail(VerifyErrorKind::race, unordered_where_[k].first, kNoOp, unordered_[k].message);
    }
    unordered_.clear();
    unordered_where_.clear();
  }

  // ---- one-sided: the gets against their peers' writes ---------------------

  // For every get of a peer q's memory (happens-before over deps and signal
  // -> wait edges): some op of q before it (q has entered the call), each
  // write of q to that memory before or after it, and some op of q after it
  // (q's call has not returned). Of the problems found, a read before its
  // data is reported first, then an overwrite, then a read after the return.
  void check_remote_reads(bool with_in_place) {
    struct Read {
      int reader;
      OpIndex op;
      Region at;         // where, at the peer
      size_t entry = 0;  // question: the peer before it / after it
    };
    struct Pair {
      size_t read;
      OpIndex write;  // an op of the peer that writes what the read reads
      bool in_place;
      size_t question;
    };
    std::vector<Read> reads;
    std::vector<uint32_t> rank_item(programs_.size(), kNone);
    std::vector<uint32_t> op_item(base_.back(), kNone);
    for (int r = 0; r < spec_.nranks; ++r) {
      const Program& p = programs_[static_cast<size_t>(r)];
      for (size_t k = 0; k < p.ops.size(); ++k) {
        const Op& o = p.ops[k];
        if (!reads_remote(o.kind) || o.remote.count == 0) continue;
        const auto q = static_cast<size_t>(o.peer);
        if (rank_item[q] == kNone)
          rank_item[q] =
              hb_.add_range(static_cast<uint32_t>(base_[q]), static_cast<uint32_t>(base_[q + 1]));
        const auto i = static_cast<OpIndex>(k);
        reads.push_back({r, i, remote_region(o), hb_.ask(rank_item[q], global(r, i))});
      }
    }
    if (reads.empty()) return;
    std::vector<Pair> pairs;
    for (int layout = 0; layout < (with_in_place ? 2 : 1); ++layout) {
      const bool in_place = layout == 1;
      // Per peer, what its ops write: [address, end) and the op.
      struct Write {
        size_t address;
        size_t end;
        OpIndex op;
      };
      std::vector<std::vector<Write>> writes(programs_.size());
      std::vector<uint8_t> listed(programs_.size(), 0);
      for (size_t k = 0; k < reads.size(); ++k) {
        const Read& rd = reads[k];
        const int q = op_at(rd.reader, rd.op).peer;
        const auto uq = static_cast<size_t>(q);
        const Layout lq = layout_for(q, in_place);
        if (!listed[uq]) {
          listed[uq] = 1;
          const Program& pq = programs_[uq];
          for (size_t j = 0; j < pq.ops.size(); ++j) {
            const Op& w = pq.ops[j];
            if (!writes_dst(w.kind) || w.dst.count == 0 || is_noop_copy(w, lq)) continue;
            writes[uq].push_back(
                {lq.address(w.dst), lq.address(w.dst) + w.dst.count, static_cast<OpIndex>(j)});
          }
        }
        const size_t a = lq.address(rd.at);
        const size_t e = a + rd.at.count;
        for (const Write& w : writes[uq]) {
          if (w.end <= a || e <= w.address) continue;
          const uint32_t g = global(q, w.op);
          if (op_item[g] == kNone) op_item[g] = hb_.add_op(g);
          pairs.push_back({k, w.op, in_place, hb_.ask(op_item[g], global(rd.reader, rd.op))});
        }
      }
    }
    hb_.answer();

    // The first problem of each kind, in order of reads.
    std::optional<VerifyError> early, overwrite, late;
    auto record = [&](std::optional<VerifyError>& slot, VerifyErrorKind kind, int rank,
                      OpIndex op, const char* layout, const std::string& what) {
      if (slot) return;
      layout_name_ = layout;
      slot = error(kind, rank, op, what);
      layout_name_ = {};
    };
    for (const Read& rd : reads) {
      if (hb_.before(rd.entry)) continue;
      const Op& o = op_at(rd.reader, rd.op);
      record(early, VerifyErrorKind::read_before_signal, rd.reader, rd.op, "",
             str_cat("reads ", remote_name(o), ", but no op of rank ", o.peer,
                     " happens before the read: it waits for no signal of rank ", o.peer,
                     ", which may not have entered the call, nor written what the read reads"));
    }
    // The latest op (in program order) of the peer that happens before a read:
    // a write the read is not ordered with that comes before it in the peer's
    // program was meant to be read (the signal does not cover it, or the read
    // does not wait for it); one after it overwrites what the read reads.
    std::unordered_map<size_t, int64_t> latest;
    auto latest_before = [&](size_t k) {
      auto it = latest.find(k);
      if (it != latest.end()) return it->second;
      const Read& rd = reads[k];
      const auto q = static_cast<uint32_t>(op_at(rd.reader, rd.op).peer);
      int64_t m = -1;
      for (uint32_t g : hb_.ancestors(global(rd.reader, rd.op)))
        if (rank_of_[g] == q) m = std::max<int64_t>(m, local(g));
      return latest[k] = m;
    };
    for (const Pair& pr : pairs) {
      if (hb_.before(pr.question) || hb_.after(pr.question)) continue;
      const Read& rd = reads[pr.read];
      const Op& o = op_at(rd.reader, rd.op);
      const int q = o.peer;
      const char* layout = pr.in_place ? "in_place" : "out_of_place";
      const std::string write = str_cat("op ", pr.write, " (", describe(op_at(q, pr.write)), ")");
      if (static_cast<int64_t>(pr.write) < latest_before(pr.read))
        record(early, VerifyErrorKind::read_before_signal, rd.reader, rd.op, layout,
               str_cat("reads ", remote_name(o), " while rank ", q, "'s ", write,
                       " may still write it: the write is not ordered before the read (the read",
                       " waits for no signal that rank ", q, " raises after the write)"));
      else
        record(overwrite, VerifyErrorKind::overwrite_before_read, q, pr.write, layout,
               str_cat("overwrites this rank's ", describe(rd.at), ", which rank ", rd.reader,
                       "'s op ", rd.op, " (", describe(o), ") reads, without waiting for that",
                       " read (for a signal that rank ", rd.reader, " raises after it)"));
    }
    for (const Read& rd : reads) {
      if (hb_.after(rd.entry)) continue;
      const Op& o = op_at(rd.reader, rd.op);
      record(late, VerifyErrorKind::read_after_return, rd.reader, rd.op, "",
             str_cat("reads ", remote_name(o), ", but no op of rank ", o.peer,
                     " happens after the read: rank ", o.peer,
                     "'s call may return while it runs, and then its buffers are the "
                     "caller's again and its staging window the next call's"));
    }
    for (std::optional<VerifyError>* e : {&early, &overwrite, &late})
      if (*e) throw Failure{std::move(**e)};
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

  // Applies op i of rank r (a local op or a get) to every layout's memory.
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
        if (!signal_of_.empty() && signal_of_[g] != kNone)
          t = std::max(t, t_done_[signal_of_[g]] + 1);  // the signal arrives
        t_start_[g] = t;
      }
      if (barrier) {
        SetId k = pool_.singleton(r);
        for (OpIndex d : o.deps) k = pool_.unite(k, know_end_[base_[static_cast<size_t>(r)] + d]);
        const OpIndex cp = matching_.channel_prev[static_cast<size_t>(r)][i];
        if (cp != kNoOp) k = pool_.unite(k, know_start_[base_[static_cast<size_t>(r)] + cp]);
        if (!signal_of_.empty() && signal_of_[g] != kNone)
          k = pool_.unite(k, know_end_[signal_of_[g]]);
        know_start_[g] = k;
        know_end_[g] = k;
      }
      state_[g] = 1;
      if (chan_next_[g] != kNone && --waiting_[chan_next_[g]] == 0) ready.push_back(chan_next_[g]);
      if (!has_peer(o.kind)) {
        if (data) apply_local(r, i);
        complete(g, timing && reads_remote(o.kind) ? t + 1 : t);  // a get is a transfer
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
      std::string who = str_cat(
          "rank ", r, " op ", i, " (", to_string(o.kind),
          has_peer(o.kind) || is_one_sided(o.kind) ? str_cat(" peer=", o.peer) : std::string(),
          ")");
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
        if (next == kNone && !signal_of_.empty() && signal_of_[cur] != kNone &&
            state_[signal_of_[cur]] != 2) {
          next = signal_of_[cur];
          why = str_cat("waits for flag ", o.flag, ", which rank ", o.peer, " raises in op ",
                        local(next));
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
  bool one_sided_ = false;  // some Program has one-sided ops

  std::vector<size_t> base_;
  std::vector<uint32_t> rank_of_, prereq_, chan_next_, partner_, dep_off_, dependents_;
  std::vector<uint32_t> waiting_, t_start_, t_done_;
  std::vector<uint8_t> state_;
  std::vector<SetId> know_start_, know_end_;
  // One-sided: a wait's signal (kNone for other ops; empty without one-sided
  // ops), happens-before, and the race sweep's pairs that deps do not order.
  std::vector<uint32_t> signal_of_;
  HappensBefore hb_;
  std::vector<RaceFinding> unordered_;
  std::vector<std::pair<int, bool>> unordered_where_;  // rank, in place

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
