// Leader-based two-level AllReduce (hier_leader), for small messages: each
// host's first rank reduces its host's vectors, the leaders AllReduce across
// hosts, each leader hands the sum back inside its host. It is the two-level
// AllReduce of hier.cc with one slice: the owner of the one slice on each host
// is its local rank 0.
//
//   1. inside each host: every other rank sends its vector to the leader
//      (direct, one message each), which reduces them into its Output;
//   2. the H leaders AllReduce the vector (hier.h: group_allreduce; recursive
//      doubling below kHierRingMinBytes or for two hosts, else ring);
//   3. inside each host: the leader sends the sum to every other rank.
//
//   2 hosts x 3 ranks:   1. r1, r2 -> r0     r4, r5 -> r3
//                        2. r0 <-> r3        (across the network)
//                        3. r0 -> r1, r2     r3 -> r4, r5
//
// Bytes: a non-leader sends and receives M; a leader receives (K-1) M and
// sends (K-1) M inside its host, and log2 H M each way across (doubling).
// Cost, H hosts of K ranks, H a power of two, recursive doubling:
//   2 (K-1) (alpha_i + M/beta_i) + (K-1) M gamma
//   + log2 H (alpha_e + M/beta_e + M gamma)
// Three message latencies in all where H = 2 (a flat recursive doubling
// across N ranks pays log2 N network latencies). Closed form in this file
// only (two link classes; the simulator gives its time).
//
// Constraints: as hier_two_level.
#include "algorithms/hier.h"

namespace chorus {
namespace {

Program build_hier_leader_allreduce(const CollectiveSpec& spec) {
  return build_two_level_allreduce(spec, 1);
}

}  // namespace

extern const Algorithm kHierLeaderAllreduce{
    Collective::allreduce,
    "hier_leader",
    "reduce to each host's leader, AllReduce among leaders, broadcast in each host",
    build_hier_leader_allreduce,
    hier_support,
    {},
    "two or more hosts, one with two or more ranks (any sizes)"};

}  // namespace chorus
