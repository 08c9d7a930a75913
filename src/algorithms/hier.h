// What the hierarchical algorithms (hier_*.cc) share: when they serve a call,
// the two-level AllReduce that hier_two_level and hier_leader are two forms
// of, and the flat AllReduce that runs among one rank per host.
//
// Host layout: CollectiveSpec::host_of, grouped by schedule/rank_math.h's
// HostGroups (H hosts, host h with L_h ranks, P = the widest L_h).
#pragma once

#include "algorithms/algorithm.h"
#include "schedule/rank_math.h"

#include <vector>

namespace chorus {

// Several hosts, and several ranks on at least one of them; else the reason.
Support hier_support(const CollectiveSpec& spec);
// The call's hosts (spec.host_of must be set).
HostGroups hier_hosts(const CollectiveSpec& spec);

// spec.rank's place among the call's hosts: its host, its index among that
// host's ranks and their number, and those ranks.
struct HierPlace {
  HostGroups hosts;
  int host = 0;
  int index = 0;
  int size = 0;
  const std::vector<int>& local() const { return hosts.ranks[static_cast<size_t>(host)]; }
};
HierPlace hier_place(const CollectiveSpec& spec);

// The flat AllReduce among `group` (global ranks, this rank at index `me`)
// of `region` of the Output, which holds this rank's contribution once every
// op of `ready` has completed. Ring (ReduceScatter + AllGather) where the
// group has 3 or more ranks and the region at least kHierRingMinBytes, else
// recursive doubling with the non-power-of-two fold (a group of two: one
// exchange). Returns ops after which the region holds the sum.
//   ring:               2(G-1) (alpha + m/(G beta)) + (G-1)/G m gamma
//   recursive doubling: log2 G (alpha + m/beta + m gamma), + 2 alpha +
//                       2 m/beta + m gamma with the fold
inline constexpr size_t kHierRingMinBytes = size_t{64} << 10;
std::vector<OpIndex> group_allreduce(ProgramBuilder& b, const std::vector<int>& group, int me,
                                     Region region, std::vector<OpIndex> ready, size_t elem_size,
                                     uint32_t first_step);

// The two-level AllReduce with the vector cut into `slices` parts (1: the
// leader form; P: one slice per rank of the widest host):
//   1. inside each host, the ranks that own slices (HostGroups::part_owner)
//      receive every local rank's share of them and reduce it (direct);
//   2. per slice, the owners of that slice on every host run
//      group_allreduce on it (consecutive slices with the same owners as one);
//   3. inside each host, every owner sends its reduced slices to the others.
Program build_two_level_allreduce(const CollectiveSpec& spec, int slices);

}  // namespace chorus
