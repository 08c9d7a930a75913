// The registry table. Order within a collective is the fallback order: when
// the requested (or tuned) algorithm does not support a case, the first one
// that does is used.
#include "algorithms/algorithm.h"

#include "algorithms/alltoall.h"
#include "algorithms/barrier.h"
#include "algorithms/binomial.h"
#include "algorithms/ring.h"
#include "core/check.h"

#include <array>

namespace chorus {
namespace {

using C = Collective;
const Algorithm kAlgorithms[] = {
    {C::allreduce, "ring", "ReduceScatter + AllGather around the ring", ring_supports,
     ring_allreduce},
    {C::allgather, "ring", "N-1 steps passing blocks around the ring", ring_supports,
     ring_allgather},
    {C::reduce_scatter, "ring", "N-1 steps reducing partial sums around the ring",
     ring_supports, ring_reduce_scatter},
    {C::broadcast, "binomial", "binomial tree from the root", binomial_supports,
     binomial_broadcast},
    {C::reduce, "binomial", "binomial tree towards the root", binomial_supports,
     binomial_reduce},
    {C::barrier, "dissemination", "ceil(log2 N) rounds of empty messages",
     dissemination_supports, dissemination_barrier},
    {C::alltoall, "pairwise", "N-1 steps, one block to rank r+s at step s", alltoall_supports,
     pairwise_alltoall},
    {C::alltoall, "bruck", "ceil(log2 N) steps of packed blocks (small blocks)",
     alltoall_supports, bruck_alltoall},
};

}  // namespace

std::span<const Algorithm> all_algorithms() { return kAlgorithms; }

std::vector<const Algorithm*> algorithms_for(Collective collective) {
  std::vector<const Algorithm*> out;
  for (const Algorithm& a : kAlgorithms)
    if (a.collective == collective) out.push_back(&a);
  return out;
}

const Algorithm* find_algorithm(Collective collective, std::string_view name) {
  for (const Algorithm& a : kAlgorithms)
    if (a.collective == collective && a.name == name) return &a;
  return nullptr;
}

std::string algorithm_names(Collective collective) {
  std::string s;
  for (const Algorithm* a : algorithms_for(collective)) {
    if (!s.empty()) s += ", ";
    s += a->name;
  }
  return s;
}

Support check_common(const CollectiveSpec& spec) {
  if (spec.nranks < 1) return Support::no(str_cat("nranks must be >= 1, got ", spec.nranks));
  if (spec.rank < 0 || spec.rank >= spec.nranks)
    return Support::no(str_cat("rank ", spec.rank, " outside [0, ", spec.nranks, ")"));
  if (spec.root < 0 || spec.root >= spec.nranks)
    return Support::no(str_cat("root ", spec.root, " outside [0, ", spec.nranks, ")"));
  if (spec.elem_size == 0) return Support::no("element size 0");
  return Support::yes();
}

}  // namespace chorus
