// The verifier's race checks: where each rank's buffers sit under the out of
// place and the in-place layout, the race sweep of every rank and layout
// (verify/race_check.h), and for one-sided Programs the pairs the sweep could
// not order by deps, asked again through happens-before across ranks, and
// every get of a peer's memory against that peer's writes of it (entered,
// written before, not overwritten before, read before the peer returns). See
// verifier_impl.h.
#include "core/check.h"
#include "verify/verifier_impl.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace chorus::verify_internal {

// ---- layouts ----------------------------------------------------------------

bool Verifier::in_place_exists() const {
  const CollectiveSpec s = rank_spec(0);
  return in_place_input_offset(s).has_value() || in_place_output_offset(s).has_value();
}

Layout Verifier::layout_for(int r, bool in_place) const {
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

// ---- 3. races ---------------------------------------------------------------

// One-sided Programs: pairs that deps do not order are kept for
// check_unordered_races, which asks whether other ranks order them.
void Verifier::check_races(bool in_place) {
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

void Verifier::check_unordered_races() {
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

// ---- one-sided: the gets against their peers' writes ------------------------

// For every get of a peer q's memory (happens-before over deps and signal
// -> wait edges): some op of q before it (q has entered the call), each
// write of q to that memory before or after it, and some op of q after it
// (q's call has not returned). Of the problems found, a read before its
// data is reported first, then an overwrite, then a read after the return.
void Verifier::check_remote_reads(bool with_in_place) {
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
  auto record = [&](std::optional<VerifyError>& slot, VerifyErrorKind kind, int rank, OpIndex op,
                    const char* layout, const std::string& what) {
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

}  // namespace chorus::verify_internal
