// Two-level ReduceScatter (hier_two_level): each host first sums, inside the
// host, the blocks bound for every rank; each host's sum of a block then
// crosses the network once, to the block's rank.
//
// H hosts, host h with L_h ranks, P = the widest L_h. Block q's proxy on host
// h is q itself on q's own host, elsewhere the local rank floor(local(q)
// L_h / P) of h (rank_math.h: HostGroups::proxy).
//   1. inside each host: every rank sends each local rank the blocks it is
//      proxy for (runs of consecutive ranks as one message), in turn (step t:
//      to local i + t, from local i - t); the proxy reduces them, its own
//      block into its Output, the others into scratch;
//   2. across hosts: every proxy sends each host sum to the block's rank,
//      which reduces the H-1 that arrive into its Output.
//
//   2 hosts x 2 ranks (blocks a b | c d of each input):
//     1. r0 -b,d-> r1, r1 -a,c-> r0   (r0 sums a, c; r1 sums b, d)
//        r2 -d,b-> r3, r3 -c,a-> r2   (r2 sums c, a; r3 sums d, b)
//     2. r0 -c-> r2, r2 -a-> r0, r1 -d-> r3, r3 -b-> r1
//
// Bytes (recv_count c, M = N c): inside the host a rank sends (L_h-1)/L_h M
// for hosts of equal size; across hosts each block of a host's sum leaves it
// once, so the host's link carries (H-1)/H M each way.
// Cost, H hosts of K ranks (the host's K ranks share its link):
//   (K-1) (alpha_i + M/(K beta_i) + M/K gamma)
//   + (H-1) alpha_e + (H-1)/H M/beta_e + (H-1) c gamma
// Closed form in this file only (two link classes; the simulator gives its
// time).
//
// Constraints: as hier_two_level AllReduce (hier_allreduce.cc).
#include "algorithms/hier.h"

#include <optional>

namespace chorus {
namespace {

using B = ProgramBuilder;

Program build_hier_reduce_scatter(const CollectiveSpec& spec) {
  const HierPlace place = hier_place(spec);
  const HostGroups& g = place.hosts;
  const int n = spec.nranks, r = spec.rank;
  const int h = place.host, i = place.index, l = place.size, hosts = g.host_count();
  const std::vector<int>& local = place.local();
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  auto in = [&](int first, int end) {
    return B::input(static_cast<size_t>(first) * c, static_cast<size_t>(end - first) * c);
  };
  const Region own_out = B::output(0, c);
  // The blocks of other hosts' ranks that local rank j is proxy for, as runs
  // of consecutive ranks [first, end).
  auto proxied_runs = [&](int j) {
    const int me = local[static_cast<size_t>(j)];
    std::vector<std::pair<int, int>> runs;
    for (int q = 0; q < n; ++q) {
      if (g.host[static_cast<size_t>(q)] == h || g.proxy(h, q) != me) continue;
      if (!runs.empty() && runs.back().second == q)
        ++runs.back().second;
      else
        runs.emplace_back(q, q + 1);
    }
    return runs;
  };
  const std::vector<std::pair<int, int>> mine = proxied_runs(i);
  // Where this rank sums the blocks it is proxy for: scratch, in rank order.
  size_t held = 0;
  for (auto [first, end] : mine) held += static_cast<size_t>(end - first);
  const size_t base = b.alloc_scratch(l > 1 ? held * c : 0);
  std::vector<size_t> at;  // scratch offset of each run
  for (size_t k = 0, off = base; k < mine.size(); ++k) {
    at.push_back(off);
    off += static_cast<size_t>(mine[k].second - mine[k].first) * c;
  }
  auto partial = [&](size_t k) {
    const auto [first, end] = mine[k];
    return l > 1 ? B::scratch(at[k], static_cast<size_t>(end - first) * c) : in(first, end);
  };

  // 1. Inside the host.
  std::optional<OpIndex> own;  // the last op that wrote the own block
  std::vector<std::optional<OpIndex>> summed(mine.size());
  if (l == 1) own = b.copy(in(r, r + 1), own_out, {}, 0);
  for (int t = 1; t < l; ++t) {
    const auto st = static_cast<uint32_t>(t - 1);
    const int j = (i + t) % l;
    const int to = local[static_cast<size_t>(j)];
    b.send(to, in(to, to + 1), {}, st);
    for (auto [first, end] : proxied_runs(j)) b.send(to, in(first, end), {}, st);
    const int from = local[static_cast<size_t>((i - t + l) % l)];
    own = own ? b.recv_reduce(from, own_out, own_out, {*own}, st)
              : b.recv_reduce(from, in(r, r + 1), own_out, {}, st);
    for (size_t k = 0; k < mine.size(); ++k) {
      const auto [first, end] = mine[k];
      const Region acc = partial(k);
      summed[k] = summed[k] ? b.recv_reduce(from, acc, acc, {*summed[k]}, st)
                            : b.recv_reduce(from, in(first, end), acc, {}, st);
    }
  }

  // 2. Across hosts: each proxied block to its rank, which sums what arrives.
  const auto st = static_cast<uint32_t>(l);
  for (size_t k = 0; k < mine.size(); ++k) {
    const auto [first, end] = mine[k];
    const Region run = partial(k);
    for (int q = first; q < end; ++q) {
      std::vector<OpIndex> deps;
      if (summed[k]) deps.push_back(*summed[k]);
      b.send(q, {run.buffer, run.offset + static_cast<size_t>(q - first) * c, c}, std::move(deps),
             st);
    }
  }
  for (int k = 1; k < hosts; ++k) {
    const int from_host = (h - k + hosts) % hosts;
    own = b.recv_reduce(g.proxy(from_host, r), own_out, own_out, {*own}, st);
  }
  return std::move(b).finish();
}

}  // namespace

extern const Algorithm kHierReduceScatter{
    Collective::reduce_scatter,
    "hier_two_level",
    "sum each block inside each host, then each host's sum once to its rank",
    build_hier_reduce_scatter,
    hier_support,
    {},
    "two or more hosts, one with two or more ranks (any sizes)"};

}  // namespace chorus
