// The verifier's first step: each rank's Program alone is well formed
// (buffer sizes, op kinds, regions inside their buffers, deps naming earlier
// ops and no cycle, Input never written, the root rules), and, for one-sided
// Programs, its ops name peers and flags in range, its gets read what peers
// may read (staged where the call's buffers are not in windows), and every get
// depends on a wait for its peer. See verifier_impl.h.
#include "core/check.h"
#include "verify/verifier_impl.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace chorus::verify_internal {

void Verifier::check_region(int r, OpIndex i, const Region& region, const Program& p,
                            const char* role) {
  size_t size = 0;
  switch (region.buffer) {
    case BufferKind::input:
      size = p.input_count;
      break;
    case BufferKind::output:
      size = p.output_count;
      break;
    case BufferKind::scratch:
      size = p.scratch_count;
      break;
    case BufferKind::window:
      size = p.window_count;
      break;
    default:
      fail(VerifyErrorKind::region_out_of_bounds, r, i,
           str_cat(role, " names buffer ", static_cast<int>(region.buffer),
                   ", which does not exist"));
  }
  if (region.offset > size || region.count > size - region.offset)
    fail(VerifyErrorKind::region_out_of_bounds, r, i,
         str_cat(role, " ", describe(region), " reaches past the end of ", to_string(region.buffer),
                 ", which holds ", size, " elements"));
}

// What one-sided ops and window regions need of the op alone: a call whose
// ranks share windows, a peer, a flag in range.
void Verifier::check_one_sided(int r, OpIndex i, const Op& o) {
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
void Verifier::check_stamp_checks(int r) {
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
           str_cat("reads rank ", o.peer, "'s memory without depending on a wait for rank ", o.peer,
                   ": nothing compares rank ", o.peer,
                   "'s call stamp with this rank's before the read"));
  }
}

// Where a Program stages its shared input or output must lie in its window.
void Verifier::check_staging(int r, size_t at, size_t count, const char* what) {
  const Program& p = programs_[static_cast<size_t>(r)];
  if (at == SIZE_MAX) return;
  if (at > p.window_count || count > p.window_count - at)
    fail(VerifyErrorKind::region_out_of_bounds, r, kNoOp,
         str_cat("stages its shared ", what, " at window[", at, ",+", count,
                 "), past the end of its staging window, which holds ", p.window_count,
                 " elements"));
}

void Verifier::check_structure(int r) {
  const Program& p = programs_[static_cast<size_t>(r)];
  const BufferCounts want = buffer_counts(rank_spec(r));
  if (p.input_count != want.input || p.output_count != want.output)
    fail(VerifyErrorKind::buffer_size, r, kNoOp,
         str_cat("program declares input ", p.input_count, " and output ", p.output_count,
                 " elements, the collective has input ", want.input, " and output ", want.output));
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
    const CollectiveTraits& t = traits(spec_.collective);
    if (t.input_on_root_only && !root && reads_src(o.kind) && o.src.buffer == BufferKind::input &&
        o.src.count > 0)
      fail(VerifyErrorKind::forbidden_access, r, i,
           str_cat("reads Input on a non-root rank of a ", to_string(spec_.collective), " (root ",
                   spec_.root, "); that buffer is not part of the call there"));
    if (t.output_on_root_only && !root && writes_dst(o.kind) &&
        o.dst.buffer == BufferKind::output && o.dst.count > 0)
      fail(VerifyErrorKind::forbidden_access, r, i,
           str_cat("writes Output on a non-root rank of a ", to_string(spec_.collective), " (root ",
                   spec_.root, "); that buffer is not part of the call there"));
    count_op(st, o, steps);
  }
  if (!spec_.window_buffers) {
    check_staging(r, p.window_input, p.input_count, "input");
    check_staging(r, p.window_output, p.output_count, "output");
  }
  finish_rank_stats(st, steps);
  if (forward) check_cycles(r);
}

// Some dep points forward. Either the deps form a cycle (named in full) or
// the program is merely out of order; both are errors, told apart.
void Verifier::check_cycles(int r) {
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
void Verifier::check_remote_regions(int r) {
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
      case BufferKind::input:
        size = pq.input_count;
        break;
      case BufferKind::output:
        size = pq.output_count;
        break;
      case BufferKind::window:
        size = pq.window_count;
        break;
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
    if (off_root &&
        ((at.buffer == BufferKind::input && traits(spec_.collective).input_on_root_only) ||
         (at.buffer == BufferKind::output && traits(spec_.collective).output_on_root_only)))
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
Region Verifier::remote_region(const Op& o) const {
  const Region& at = o.remote;
  if (at.buffer == BufferKind::window || spec_.window_buffers) return at;
  const Program& pq = programs_[static_cast<size_t>(o.peer)];
  const size_t staged = at.buffer == BufferKind::input ? pq.window_input : pq.window_output;
  return {BufferKind::window, staged + at.offset, at.count};
}

// "rank 2's input[0,+4)", with where the peer staged it.
std::string Verifier::remote_name(const Op& o) const {
  const Region at = remote_region(o);
  std::string s = str_cat("rank ", o.peer, "'s ", describe(o.remote));
  if (!(at == o.remote)) s += str_cat(" (staged at ", describe(at), ")");
  return s;
}

}  // namespace chorus::verify_internal
