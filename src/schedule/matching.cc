#include "schedule/matching.h"

#include "core/check.h"

#include <algorithm>

namespace chorus {

namespace {

// One rank's ops of one direction, sorted by (peer, program order): a sparse
// view that stays small at tens of thousands of ranks.
struct ChannelOps {
  std::vector<std::pair<int, OpIndex>> ops;
  std::span<const std::pair<int, OpIndex>> with(int peer) const {
    auto lo = std::lower_bound(ops.begin(), ops.end(), std::pair<int, OpIndex>{peer, 0});
    auto hi = std::lower_bound(lo, ops.end(), std::pair<int, OpIndex>{peer + 1, 0});
    return {lo, hi};
  }
};

}  // namespace

MatchResult match_programs(std::span<const Program> programs) {
  const int n = static_cast<int>(programs.size());
  const auto un = static_cast<size_t>(n);
  MatchResult result;
  Matching& m = result.matching;
  m.partner.resize(un);
  m.channel_prev.resize(un);
  std::vector<ChannelOps> sends(un), recvs(un);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    const Program& p = programs[ur];
    m.partner[ur].assign(p.ops.size(), OpRef{});
    m.channel_prev[ur].assign(p.ops.size(), kNoOp);
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const Op& o = p.ops[i];
      if (!has_peer(o.kind)) continue;
      if (o.peer < 0 || o.peer >= n || o.peer == r) {
        result.error = MatchError{MatchError::Kind::bad_peer, r, static_cast<OpIndex>(i), o.peer,
                                  str_cat("rank ", r, " op ", i, " (", describe(o),
                                          ") names peer ", o.peer, " outside [0, ", n,
                                          ") or itself")};
        return result;
      }
      (o.kind == OpKind::send ? sends : recvs)[ur].ops.emplace_back(o.peer,
                                                                   static_cast<OpIndex>(i));
    }
    // Ops were appended in program order, so a stable sort by peer keeps each
    // channel in program order.
    for (ChannelOps* c : {&sends[ur], &recvs[ur]}) {
      std::stable_sort(c->ops.begin(), c->ops.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      for (size_t j = 1; j < c->ops.size(); ++j)
        if (c->ops[j].first == c->ops[j - 1].first)
          m.channel_prev[ur][c->ops[j].second] = c->ops[j - 1].second;
    }
  }
  // Every channel a -> b is visited from the sender's side, then receives with
  // no sender at all are caught from the receiver's side.
  for (int a = 0; a < n; ++a) {
    const auto& ops = sends[static_cast<size_t>(a)].ops;
    for (size_t lo = 0; lo < ops.size();) {
      const int b = ops[lo].first;
      size_t hi = lo;
      while (hi < ops.size() && ops[hi].first == b) ++hi;
      const auto rv = recvs[static_cast<size_t>(b)].with(a);
      const size_t ns = hi - lo;
      const size_t k = std::min(ns, rv.size());
      for (size_t j = 0; j < k; ++j) {
        const OpIndex si = ops[lo + j].second;
        const OpIndex ri = rv[j].second;
        const Op& so = programs[static_cast<size_t>(a)].ops[si];
        const Op& ro = programs[static_cast<size_t>(b)].ops[ri];
        if (so.src.count != ro.dst.count) {
          result.error = MatchError{
              MatchError::Kind::count_mismatch, a, si, b,
              str_cat("send #", j, " from rank ", a, " to rank ", b, " (op ", si, ") carries ",
                      so.src.count, " elements but the matching receive at rank ", b, " (op ",
                      ri, ") expects ", ro.dst.count)};
          return result;
        }
        m.partner[static_cast<size_t>(a)][si] = {b, ri};
        m.partner[static_cast<size_t>(b)][ri] = {a, si};
      }
      if (ns > k) {
        const OpIndex si = ops[lo + k].second;
        result.error = MatchError{MatchError::Kind::unmatched_send, a, si, b,
                                  str_cat("send #", k, " from rank ", a, " to rank ", b, " (op ",
                                          si, ") has no matching receive: rank ", b,
                                          " posts only ", rv.size(), " receives from rank ", a)};
        return result;
      }
      if (rv.size() > k) {
        const OpIndex ri = rv[k].second;
        result.error = MatchError{MatchError::Kind::unmatched_receive, b, ri, a,
                                  str_cat("receive #", k, " at rank ", b, " from rank ", a,
                                          " (op ", ri, ") has no matching send: rank ", a,
                                          " posts only ", ns, " sends to rank ", b)};
        return result;
      }
      lo = hi;
    }
  }
  for (int b = 0; b < n; ++b) {
    const Program& p = programs[static_cast<size_t>(b)];
    for (size_t i = 0; i < p.ops.size(); ++i) {
      if (!is_receive(p.ops[i].kind) || m.partner[static_cast<size_t>(b)][i].rank >= 0) continue;
      const int a = p.ops[i].peer;
      result.error = MatchError{MatchError::Kind::unmatched_receive, b, static_cast<OpIndex>(i), a,
                                str_cat("receive at rank ", b, " from rank ", a, " (op ", i,
                                        ") has no matching send: rank ", a,
                                        " posts no sends to rank ", b)};
      return result;
    }
  }
  return result;
}

}  // namespace chorus
