#include "schedule/matching.h"

#include "core/check.h"

namespace chorus {

MatchResult match_programs(std::span<const Program> programs) {
  const int n = static_cast<int>(programs.size());
  const auto un = static_cast<size_t>(n);
  MatchResult result;
  Matching& m = result.matching;
  m.partner.resize(un);
  m.channel_prev.resize(un);
  // Per rank, per peer: the ops of each direction in program order.
  std::vector<std::vector<std::vector<OpIndex>>> sends(un), recvs(un);
  for (int r = 0; r < n; ++r) {
    const Program& p = programs[static_cast<size_t>(r)];
    m.partner[static_cast<size_t>(r)].assign(p.ops.size(), OpRef{});
    m.channel_prev[static_cast<size_t>(r)].assign(p.ops.size(), kNoOp);
    sends[static_cast<size_t>(r)].resize(un);
    recvs[static_cast<size_t>(r)].resize(un);
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
      auto& chan = (o.kind == OpKind::send ? sends : recvs)[static_cast<size_t>(r)]
                                                          [static_cast<size_t>(o.peer)];
      if (!chan.empty()) m.channel_prev[static_cast<size_t>(r)][i] = chan.back();
      chan.push_back(static_cast<OpIndex>(i));
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const auto& s = sends[static_cast<size_t>(a)][static_cast<size_t>(b)];
      const auto& rv = recvs[static_cast<size_t>(b)][static_cast<size_t>(a)];
      const size_t k = std::min(s.size(), rv.size());
      for (size_t j = 0; j < k; ++j) {
        const Op& so = programs[static_cast<size_t>(a)].ops[s[j]];
        const Op& ro = programs[static_cast<size_t>(b)].ops[rv[j]];
        if (so.src.count != ro.dst.count) {
          result.error = MatchError{
              MatchError::Kind::count_mismatch, a, s[j], b,
              str_cat("send #", j, " from rank ", a, " to rank ", b, " (op ", s[j], ") carries ",
                      so.src.count, " elements but the matching receive at rank ", b, " (op ",
                      rv[j], ") expects ", ro.dst.count)};
          return result;
        }
        m.partner[static_cast<size_t>(a)][s[j]] = {b, rv[j]};
        m.partner[static_cast<size_t>(b)][rv[j]] = {a, s[j]};
      }
      if (s.size() > k) {
        result.error = MatchError{MatchError::Kind::unmatched_send, a, s[k], b,
                                  str_cat("send #", k, " from rank ", a, " to rank ", b, " (op ",
                                          s[k], ") has no matching receive: rank ", b,
                                          " posts only ", rv.size(), " receives from rank ", a)};
        return result;
      }
      if (rv.size() > k) {
        result.error = MatchError{MatchError::Kind::unmatched_receive, b, rv[k], a,
                                  str_cat("receive #", k, " at rank ", b, " from rank ", a,
                                          " (op ", rv[k], ") has no matching send: rank ", a,
                                          " posts only ", s.size(), " sends to rank ", b)};
        return result;
      }
    }
  }
  return result;
}

}  // namespace chorus
