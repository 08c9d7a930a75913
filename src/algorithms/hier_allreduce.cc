// Two-level AllReduce (hier_two_level), the seed's node-level split: a
// ReduceScatter inside each host, one AllReduce per slice across hosts among
// the ranks that own it, an AllGather inside each host. hier.cc builds it
// (build_two_level_allreduce with P slices).
//
// H hosts, host h with L_h ranks, P = the widest L_h. The vector is cut into
// P slices; local rank i of host h owns slices s with floor(s L_h / P) = i
// (all of them on a host of one rank, one each on a host of P):
//   1. inside each host: every rank sends each owner its share of the owner's
//      slices, in turn (step t: to local i + t, from local i - t); the owner
//      reduces them into its Output;
//   2. per slice, the H owners of that slice (one per host, the same local
//      index on hosts of equal size) AllReduce it (hier.h: group_allreduce,
//      ring or recursive doubling by the slice's size and H);
//   3. inside each host: every owner sends its reduced slices to the others.
//
//   2 hosts x 2 ranks, slices a, b:       host 0: r0 owns a, r1 owns b
//     1. r0 -b-> r1, r1 -a-> r0           host 1: r2 owns a, r3 owns b
//     2. r0 <-a-> r2, r1 <-b-> r3         (across the network)
//     3. r0 -a-> r1, r1 -b-> r0, r2 -a-> r3, r3 -b-> r2
//
// Bytes per rank, H hosts of K ranks: (K-1)/K M each way inside the host in
// each of steps 1 and 3; across hosts 2 (H-1)/H M/K per owner, so each host's
// network link carries 2 (H-1)/H M each way, where a flat ring crossing the
// hosts carries about 2 (N-1)/N M per rank.
// Cost (intra-host alpha_i, beta_i; inter-host alpha_e and beta_e for the
// host's link, shared by its K owners; ring inside step 2):
//   2 (K-1) (alpha_i + M/(K beta_i)) + (K-1)/K M gamma
//   + 2 (H-1) (alpha_e + M/(H beta_e)) + (H-1)/(H K) M gamma
// Closed form in this file only: the registry's forms take one link class,
// and this one has two; the simulator gives its time (hier:K, JSON hosts).
//
// Constraints: the call's hosts (CollectiveSpec::host_of) span two or more
// hosts with two or more ranks on at least one; hosts may differ in size.
#include "algorithms/hier.h"

namespace chorus {
namespace {

Program build_hier_two_level_allreduce(const CollectiveSpec& spec) {
  return build_two_level_allreduce(spec, hier_hosts(spec).widest);
}

}  // namespace

extern const Algorithm kHierTwoLevelAllreduce{
    Collective::allreduce,
    "hier_two_level",
    "ReduceScatter in each host, AllReduce per slice across hosts, AllGather in each host",
    build_hier_two_level_allreduce,
    hier_support,
    {},
    "two or more hosts, one with two or more ranks (any sizes)"};

}  // namespace chorus
