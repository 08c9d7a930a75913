// The verifier's matching and event run: the shared matching of sends with
// receives (schedule/matching.h) and of signals with waits, the global op
// graph over all ranks, and the event-driven run of all ranks under
// rendezvous sends that the deadlock check, the latency depth and the
// symbolic run share; a deadlock is explained by the chain of what its first
// stuck op waits for. See verifier_impl.h.
#include "core/check.h"
#include "verify/verifier_impl.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace chorus::verify_internal {

// ---- 2. matching ------------------------------------------------------------

void Verifier::match() {
  MatchResult m = match_programs(programs_);
  if (m.error) {
    VerifyErrorKind kind = VerifyErrorKind::bad_peer;
    switch (m.error->kind) {
      case MatchError::Kind::bad_peer:
        kind = VerifyErrorKind::bad_peer;
        break;
      case MatchError::Kind::unmatched_send:
        kind = VerifyErrorKind::unmatched_send;
        break;
      case MatchError::Kind::unmatched_receive:
        kind = VerifyErrorKind::unmatched_receive;
        break;
      case MatchError::Kind::count_mismatch:
        kind = VerifyErrorKind::count_mismatch;
        break;
    }
    fail(kind, m.error->rank, m.error->op, m.error->message);
  }
  matching_ = std::move(m.matching);
}

// Global op ids: rank r's op i is base_[r] + i.
void Verifier::number_ops() {
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

// Signals with waits: a wait meets the one signal of the call from its peer
// with its flag; each signal is waited for once.
void Verifier::match_flags() {
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
             str_cat("raises flag ", o.flag, " at rank ", o.peer, " a second time in the call (op ",
                     local(it->second),
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

// ---- global op graph --------------------------------------------------------

// Edges: deps, and a signal before its wait. The event run counts them all
// as prerequisites; a message is not an edge (its two sides meet instead).
void Verifier::build_graph() {
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
      if (q.rank >= 0)
        partner_[g] = static_cast<uint32_t>(base_[static_cast<size_t>(q.rank)] + q.op);
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
void Verifier::order_ops() {
  if (hb_.order(base_.back(), dep_off_, dependents_)) return;
  const size_t done = run_events(false, false, false);
  CHORUS_CHECK(done < base_.back());  // every edge is a prerequisite
  report_deadlock(done);
}

// ---- 4. the event run and deadlocks -----------------------------------------

size_t Verifier::run_events(bool data, bool eager, bool timing) {
  const size_t total = base_.back();
  waiting_ = prereq_;
  state_.assign(total, OpState::not_started);
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
    state_[g] = OpState::completed;
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
    state_[g] = OpState::started;
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
        if (state_[p] == OpState::started) complete(p, t);
      } else if (state_[p] != OpState::not_started) {
        complete(g, t);
      }
      continue;
    }
    if (state_[p] != OpState::started) continue;  // the partner has not started yet
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
void Verifier::report_deadlock(size_t done) {
  const size_t total = base_.back();
  uint32_t g = 0;
  while (g < total && state_[g] == OpState::completed) ++g;
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
        has_peer(o.kind) || is_one_sided(o.kind) ? str_cat(" peer=", o.peer) : std::string(), ")");
    uint32_t next = kNone;
    std::string why;
    if (state_[cur] == OpState::started) {
      next = partner_[cur];
      why = "has started and waits for its partner to start";
    } else {
      for (OpIndex d : o.deps)
        if (state_[base_[static_cast<size_t>(r)] + d] != OpState::completed) {
          next = static_cast<uint32_t>(base_[static_cast<size_t>(r)] + d);
          why = str_cat("waits for dep op ", d, " to complete");
          break;
        }
      const OpIndex cp = matching_.channel_prev[static_cast<size_t>(r)][i];
      if (next == kNone && cp != kNoOp &&
          state_[base_[static_cast<size_t>(r)] + cp] == OpState::not_started) {
        next = static_cast<uint32_t>(base_[static_cast<size_t>(r)] + cp);
        why = str_cat("waits for its channel predecessor op ", cp, " to start");
      }
      if (next == kNone && !signal_of_.empty() && signal_of_[cur] != kNone &&
          state_[signal_of_[cur]] != OpState::completed) {
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

}  // namespace chorus::verify_internal
