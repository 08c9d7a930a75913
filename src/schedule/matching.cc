#include "schedule/matching.h"

#include "core/check.h"

#include <algorithm>

namespace chorus {

namespace {

// How many channels ahead the meeting of channels prefetches.
constexpr size_t kLookahead = 8;

// A channel a -> b seen from one side: its first and last ops and their
// element counts, and how many ops it has. Ops between are reached through
// channel_prev.
struct Channel {
  int a;  // sender
  int b;  // receiver
  uint32_t head;
  uint32_t tail;
  uint32_t len;
  size_t head_count;
  size_t tail_count;
  bool before(const Channel& o) const { return a != o.a ? a < o.a : b < o.b; }
  bool same(const Channel& o) const { return a == o.a && b == o.b; }
};

// The send and receive sides of one channel: meets the k-th send with the
// k-th receive, or returns the channel's first problem (a count mismatch at
// the smallest k, then a send without a receive, then a receive without a
// send).
std::optional<MatchError> meet(std::span<const Program> programs, FlatMatching& m,
                               const Channel& sends, const Channel* recvs) {
  const uint32_t nr = recvs != nullptr ? recvs->len : 0;
  const int a = sends.a;
  const int b = sends.b;
  const uint32_t ns = sends.len;
  const uint32_t k = std::min(ns, nr);
  const uint32_t base_a = m.base[static_cast<size_t>(a)];
  const uint32_t base_b = m.base[static_cast<size_t>(b)];
  if (ns == nr && ns <= 2) {
    // One or two ops each way, the common case at many ranks: the ops and
    // their counts came with the channels, and no op need be read again.
    m.partner[sends.head] = recvs->head;
    m.partner[recvs->head] = sends.head;
    m.partner[sends.tail] = recvs->tail;
    m.partner[recvs->tail] = sends.tail;
    auto check = [&](uint32_t j, uint32_t s, size_t sc, uint32_t r,
                     size_t rc) -> std::optional<MatchError> {
      if (sc == rc) return std::nullopt;
      const OpIndex si = s - base_a;
      const OpIndex ri = r - base_b;
      return MatchError{
          MatchError::Kind::count_mismatch, a, si, b,
          str_cat("send #", j, " from rank ", a, " to rank ", b, " (op ", si, ") carries ", sc,
                  " elements but the matching receive at rank ", b, " (op ", ri, ") expects ", rc)};
    };
    if (auto e = check(0, sends.head, sends.head_count, recvs->head, recvs->head_count)) return e;
    return check(ns - 1, sends.tail, sends.tail_count, recvs->tail, recvs->tail_count);
  }
  // Walk back from the tails past the ops the other side has no match for;
  // the last one passed is the first unmatched.
  uint32_t s = sends.tail;
  uint32_t extra_send = kNoGlobalOp;
  for (uint32_t x = k; x < ns; ++x) {
    extra_send = s;
    s = m.channel_prev[s];
  }
  uint32_t r = recvs != nullptr ? recvs->tail : kNoGlobalOp;
  uint32_t extra_recv = kNoGlobalOp;
  for (uint32_t x = k; x < nr; ++x) {
    extra_recv = r;
    r = m.channel_prev[r];
  }
  std::optional<MatchError> mismatch;
  const auto& ops_a = programs[static_cast<size_t>(a)].ops;
  const auto& ops_b = programs[static_cast<size_t>(b)].ops;
  for (uint32_t j = k; j-- > 0;) {
    const OpIndex si = s - base_a;
    const OpIndex ri = r - base_b;
    const size_t sc = ops_a[si].src.count;
    const size_t rc = ops_b[ri].dst.count;
    if (sc != rc)  // the last one found is the first in order
      mismatch = MatchError{
          MatchError::Kind::count_mismatch, a, si, b,
          str_cat("send #", j, " from rank ", a, " to rank ", b, " (op ", si, ") carries ", sc,
                  " elements but the matching receive at rank ", b, " (op ", ri, ") expects ", rc)};
    m.partner[s] = r;
    m.partner[r] = s;
    if (j > 0) {
      s = m.channel_prev[s];
      r = m.channel_prev[r];
    }
  }
  if (mismatch) return mismatch;
  if (ns > k) {
    const OpIndex si = extra_send - base_a;
    return MatchError{MatchError::Kind::unmatched_send, a, si, b,
                      str_cat("send #", k, " from rank ", a, " to rank ", b, " (op ", si,
                              ") has no matching receive: rank ", b, " posts only ", nr,
                              " receives from rank ", a)};
  }
  if (nr > k) {
    const OpIndex ri = extra_recv - base_b;
    return MatchError{
        MatchError::Kind::unmatched_receive, b, ri, a,
        str_cat("receive #", k, " at rank ", b, " from rank ", a, " (op ", ri,
                ") has no matching send: rank ", a, " posts only ", ns, " sends to rank ", b)};
  }
  return std::nullopt;
}

}  // namespace

FlatMatchResult match_programs_flat(std::span<const Program> programs) {
  const int n = static_cast<int>(programs.size());
  const auto un = static_cast<size_t>(n);
  FlatMatchResult result;
  FlatMatching& m = result.matching;
  m.base.resize(un + 1);
  size_t total = 0;
  for (size_t r = 0; r < un; ++r) {
    m.base[r] = static_cast<uint32_t>(total);
    total += programs[r].ops.size();
    if (total >= kNoGlobalOp)
      fail(ErrorCode::invalid_argument, "matching: more than 2^32 - 1 ops in all");
  }
  m.base[un] = static_cast<uint32_t>(total);
  m.partner.assign(total, kNoGlobalOp);
  m.channel_prev.assign(total, kNoGlobalOp);

  // One pass over each rank's ops links every channel in program order; a
  // channel's first and last ops and length wait in first/last/len, indexed
  // by direction (0 send, 1 receive) and peer, until the rank's ops are done.
  std::vector<uint32_t> last[2] = {std::vector<uint32_t>(un, kNoGlobalOp),
                                   std::vector<uint32_t>(un, kNoGlobalOp)};
  std::vector<uint32_t> first[2] = {std::vector<uint32_t>(un), std::vector<uint32_t>(un)};
  std::vector<uint32_t> len[2] = {std::vector<uint32_t>(un, 0), std::vector<uint32_t>(un, 0)};
  std::vector<int> peers[2];
  std::vector<Channel> send_chans;  // by (sender, receiver): ranks in order, peers sorted
  std::vector<Channel> recv_chans;  // by receiver
  std::vector<uint32_t> per_sender(un + 1, 0);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    const auto& ops = programs[ur].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      if (!has_peer(o.kind)) continue;
      if (o.peer < 0 || o.peer >= n || o.peer == r) {
        result.error = MatchError{MatchError::Kind::bad_peer, r, static_cast<OpIndex>(i), o.peer,
                                  str_cat("rank ", r, " op ", i, " (", describe(o), ") names peer ",
                                          o.peer, " outside [0, ", n, ") or itself")};
        return result;
      }
      const int d = o.kind == OpKind::send ? 0 : 1;
      const auto up = static_cast<size_t>(o.peer);
      const auto g = static_cast<uint32_t>(m.base[ur] + i);
      m.channel_prev[g] = last[d][up];
      if (last[d][up] == kNoGlobalOp) {
        peers[d].push_back(o.peer);
        first[d][up] = g;
      }
      last[d][up] = g;
      ++len[d][up];
    }
    std::sort(peers[0].begin(), peers[0].end());
    for (int d = 0; d < 2; ++d) {
      for (int p : peers[d]) {
        const auto up = static_cast<size_t>(p);
        const uint32_t head = first[d][up];
        const uint32_t tail = last[d][up];
        const Channel c{d == 0 ? r : p,
                        d == 0 ? p : r,
                        head,
                        tail,
                        len[d][up],
                        op_count(ops[head - m.base[ur]]),
                        op_count(ops[tail - m.base[ur]])};
        if (d == 0) {
          send_chans.push_back(c);
        } else {
          recv_chans.push_back(c);
          ++per_sender[up + 1];
        }
        last[d][up] = kNoGlobalOp;
        len[d][up] = 0;
      }
      peers[d].clear();
    }
  }
  // Receive sides by sender, stably: then they too are sorted by (sender,
  // receiver).
  for (size_t a = 0; a < un; ++a) per_sender[a + 1] += per_sender[a];
  std::vector<Channel> recv_sorted(recv_chans.size());
  for (const Channel& c : recv_chans) recv_sorted[per_sender[static_cast<size_t>(c.a)]++] = c;
  recv_chans = {};

  // Every channel a -> b is met from the sender's side, in order of (a, b);
  // receives with no sender at all are caught afterwards, in order of ranks
  // and ops.
  bool orphans = false;
  size_t j = 0;
  for (const Channel& sc : send_chans) {
    // The receive ends of the channels a few ahead are spread over all ranks:
    // start loading them now.
    if (j + 2 * kLookahead < recv_sorted.size())
      __builtin_prefetch(&programs[static_cast<size_t>(recv_sorted[j + 2 * kLookahead].b)]);
    if (j + kLookahead < recv_sorted.size()) {
      const Channel& c = recv_sorted[j + kLookahead];
      const auto ub = static_cast<size_t>(c.b);
      __builtin_prefetch(&programs[ub].ops[c.tail - m.base[ub]].dst.count);
      __builtin_prefetch(&m.partner[c.tail]);
      __builtin_prefetch(&m.channel_prev[c.tail]);
    }
    while (j < recv_sorted.size() && recv_sorted[j].before(sc)) {
      orphans = true;
      ++j;
    }
    const Channel* rc = nullptr;
    if (j < recv_sorted.size() && recv_sorted[j].same(sc)) rc = &recv_sorted[j++];
    if (auto e = meet(programs, m, sc, rc)) {
      result.error = std::move(e);
      return result;
    }
  }
  if (j < recv_sorted.size()) orphans = true;
  if (!orphans) return result;
  for (int b = 0; b < n; ++b) {
    const auto& ops = programs[static_cast<size_t>(b)].ops;
    const uint32_t base_b = m.base[static_cast<size_t>(b)];
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!is_receive(ops[i].kind) || m.partner[base_b + i] != kNoGlobalOp) continue;
      const int a = ops[i].peer;
      result.error =
          MatchError{MatchError::Kind::unmatched_receive, b, static_cast<OpIndex>(i), a,
                     str_cat("receive at rank ", b, " from rank ", a, " (op ", i,
                             ") has no matching send: rank ", a, " posts no sends to rank ", b)};
      return result;
    }
  }
  return result;
}

MatchResult match_programs(std::span<const Program> programs) {
  FlatMatchResult flat = match_programs_flat(programs);
  MatchResult result;
  result.error = std::move(flat.error);
  const FlatMatching& f = flat.matching;
  Matching& m = result.matching;
  const size_t n = programs.size();
  m.partner.resize(n);
  m.channel_prev.resize(n);
  for (size_t r = 0; r < n; ++r) {
    const auto& ops = programs[r].ops;
    const uint32_t b = f.base[r];
    m.partner[r].assign(ops.size(), OpRef{});
    m.channel_prev[r].assign(ops.size(), kNoOp);
    for (size_t i = 0; i < ops.size(); ++i) {
      const uint32_t cp = f.channel_prev[b + i];
      if (cp != kNoGlobalOp) m.channel_prev[r][i] = cp - b;
      const uint32_t p = f.partner[b + i];
      if (p != kNoGlobalOp) {
        const int peer = ops[i].peer;  // a matched op's partner is on its peer
        m.partner[r][i] = {peer, p - f.base[static_cast<size_t>(peer)]};
      }
    }
  }
  return result;
}

}  // namespace chorus
