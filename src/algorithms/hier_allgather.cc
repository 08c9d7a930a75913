// Two-level AllGather (hier_two_level): every block crosses into each other
// host once, to one rank there (its proxy), and then spreads inside the host.
//
// H hosts, host h with L_h ranks, P = the widest L_h. Rank q's proxy on
// another host h is the local rank floor(local(q) L_h / P) of h
// (rank_math.h: HostGroups::proxy): the same local index on hosts of equal
// size.
//   1. across hosts: every rank sends its block to its proxy on each other
//      host (H-1 messages, hosts in turn from its own);
//   2. inside each host: every rank sends what it holds (its own block and
//      the blocks it is proxy for, runs of consecutive ranks as one message)
//      to every other local rank, in turn (step t: to local i + t, from
//      local i - t).
//
//   2 hosts x 2 ranks (blocks A B | C D):
//     1. r0 -A-> r2, r1 -B-> r3, r2 -C-> r0, r3 -D-> r1
//     2. r0 -A,C-> r1, r1 -B,D-> r0, r2 -C,A-> r3, r3 -D,B-> r2
//
// Bytes (send_count c, M = N c): a rank sends its block H-1 times across
// hosts, so each host's link carries (H-1)/H M each way when hosts are of
// equal size (every block enters every other host once: the least it can);
// inside the host a rank sends H c to each of its K-1 neighbours.
// Cost, H hosts of K ranks (the H-1 sends of step 1 leave one by one; the
// host's K ranks share its link):
//   (H-1) alpha_e + (H-1)/H M/beta_e + (K-1) (alpha_i + H c/beta_i)
// Closed form in this file only (two link classes; the simulator gives its
// time).
//
// Constraints: as hier_two_level AllReduce (hier_allreduce.cc).
#include "algorithms/hier.h"

#include "core/check.h"

namespace chorus {
namespace {

using B = ProgramBuilder;

// Runs of consecutive ranks among `ranks` (ascending): [first, end) each.
std::vector<std::pair<int, int>> runs_of(const std::vector<int>& ranks) {
  std::vector<std::pair<int, int>> out;
  for (int q : ranks) {
    if (!out.empty() && out.back().second == q)
      ++out.back().second;
    else
      out.emplace_back(q, q + 1);
  }
  return out;
}

Program build_hier_allgather(const CollectiveSpec& spec) {
  const HierPlace place = hier_place(spec);
  const HostGroups& g = place.hosts;
  const int n = spec.nranks, r = spec.rank;
  const int h = place.host, i = place.index, l = place.size, hosts = g.host_count();
  const std::vector<int>& local = place.local();
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  auto out = [&](int first, int end) {
    return B::output(static_cast<size_t>(first) * c, static_cast<size_t>(end - first) * c);
  };
  // What local rank j holds after step 1: its own block, and those of the
  // ranks of other hosts it is proxy for, ascending.
  auto held_by = [&](int j) {
    const int me = local[static_cast<size_t>(j)];
    std::vector<int> held;
    for (int q = 0; q < n; ++q)
      if (q == me || (g.host[static_cast<size_t>(q)] != h && g.proxy(h, q) == me))
        held.push_back(q);
    return held;
  };
  // ready[q]: the op after which block q is in this rank's Output.
  std::vector<OpIndex> ready(static_cast<size_t>(n));
  ready[static_cast<size_t>(r)] = b.copy(B::input(0, c), out(r, r + 1), {}, 0);
  // 1. Across hosts.
  for (int k = 1; k < hosts; ++k) {
    const int to = (h + k) % hosts;
    b.send(g.proxy(to, r), B::input(0, c), {}, 0);
  }
  for (int q : held_by(i))
    if (q != r) ready[static_cast<size_t>(q)] = b.recv(q, out(q, q + 1), {}, 0);
  // 2. Inside the host.
  const std::vector<std::pair<int, int>> mine = runs_of(held_by(i));
  for (int t = 1; t < l; ++t) {
    const auto st = static_cast<uint32_t>(t);
    const int to = local[static_cast<size_t>((i + t) % l)];
    for (auto [first, end] : mine) {
      std::vector<OpIndex> deps;
      for (int q = first; q < end; ++q) deps.push_back(ready[static_cast<size_t>(q)]);
      b.send(to, out(first, end), std::move(deps), st);
    }
    const int from = (i - t + l) % l;
    for (auto [first, end] : runs_of(held_by(from)))
      b.recv(local[static_cast<size_t>(from)], out(first, end), {}, st);
  }
  return std::move(b).finish();
}

}  // namespace

extern const Algorithm kHierAllgather{Collective::allgather,
                                      "hier_two_level",
                                      "each block once into every other host, then around the host",
                                      build_hier_allgather,
                                      hier_support,
                                      {},
                                      "two or more hosts, one with two or more ranks (any sizes)"};

}  // namespace chorus
