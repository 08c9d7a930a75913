// Two-level Broadcast (hier_two_level): the data crosses the network once
// per host, to one rank there (its entry), and then spreads inside the host.
//
// H hosts; the root's host enters at the root, every other host at its first
// rank.
//   1. across hosts: a binomial tree over the H entries, rooted at the root's
//      host (rank_math.h: binomial_node over host numbers): ceil(log2 H)
//      rounds, each entry receiving M once;
//   2. inside each host: the entry sends M to each other local rank, in rank
//      order.
//
//   3 hosts x 2 ranks, root 0:   1. r0 -> r2, then r0 -> r4   (binomial)
//                                2. r0 -> r1, r2 -> r3, r4 -> r5
//
// Bytes: each host's link carries M in (one entry receives it once) and at
// most ceil(log2 H) M out (the binomial tree's sends); inside the host the
// entry sends (L_h - 1) M.
// Cost, H hosts of K ranks, H = 2^k (the entry's sends inside the host wait
// for its sends across):
//   log2 H (alpha_e + M/beta_e) + (K-1) (alpha_i + M/beta_i)
// Closed form in this file only (two link classes; the simulator gives its
// time).
//
// Constraints: as hier_two_level AllReduce (hier_allreduce.cc); any root.
#include "algorithms/hier.h"

namespace chorus {
namespace {

using B = ProgramBuilder;

Program build_hier_broadcast(const CollectiveSpec& spec) {
  const HierPlace place = hier_place(spec);
  const HostGroups& g = place.hosts;
  const int r = spec.rank, h = place.host, hosts = g.host_count();
  const int root_host = g.host[static_cast<size_t>(spec.root)];
  const std::vector<int>& local = place.local();
  auto entry = [&](int host) {
    return host == root_host ? spec.root : g.ranks[static_cast<size_t>(host)][0];
  };
  const size_t count = spec.count;
  const Region out = B::output(0, count);
  ProgramBuilder b(buffer_counts(spec));
  OpIndex have = 0;  // the op after which the Output holds the data
  if (r == spec.root) {
    have = b.copy(B::input(0, count), out, {}, 0);
  } else if (r == entry(h)) {
    const BinomialNode node = binomial_node(h, root_host, hosts);
    have = b.recv(entry(node.parent), out, {}, 0);
  } else {
    b.recv(entry(h), out, {}, 1);
    return std::move(b).finish();
  }
  // 1. Across hosts, then 2. inside the host.
  for (int child : binomial_node(h, root_host, hosts).children)
    b.send(entry(child), out, {have}, 0);
  for (int q : local)
    if (q != r) b.send(q, out, {have}, 1);
  return std::move(b).finish();
}

}  // namespace

extern const Algorithm kHierBroadcast{
    Collective::broadcast,
    "hier_two_level",
    "a binomial tree across hosts, then from each host's entry to its ranks",
    build_hier_broadcast,
    hier_support,
    {},
    "two or more hosts, one with two or more ranks (any sizes); any root"};

}  // namespace chorus
