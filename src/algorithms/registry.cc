// The registry table. Order within a collective is the fallback order: when
// the requested (or tuned) algorithm does not support a case, the first one
// that does is used.
#include "algorithms/algorithm.h"

#include "algorithms/alltoall.h"
#include "algorithms/barrier.h"
#include "algorithms/bidir_ring.h"
#include "algorithms/binomial.h"
#include "algorithms/bruck.h"
#include "algorithms/double_binary_tree.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/pipelined_chain.h"
#include "algorithms/recursive_doubling.h"
#include "algorithms/reduce_broadcast.h"
#include "algorithms/ring.h"
#include "algorithms/scatter_allgather.h"
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
    // Bidirectional ring (2-port): both neighbours every step.
    {C::allreduce, "bidir_ring", "ReduceScatter + AllGather, chunks going both ways round",
     bidir_ring_supports, bidir_ring_allreduce},
    {C::allgather, "bidir_ring", "floor(N/2) steps passing blocks both ways round the ring",
     bidir_ring_supports, bidir_ring_allgather},
    {C::reduce_scatter, "bidir_ring", "floor(N/2) steps, partial sums meeting from both sides",
     bidir_ring_supports, bidir_ring_reduce_scatter},
    // Recursive halving / doubling, with the non-power-of-two fold.
    {C::allreduce, "halving_doubling", "Rabenseifner: recursive halving + recursive doubling",
     halving_doubling_supports, halving_doubling_allreduce},
    {C::reduce_scatter, "recursive_halving", "log2 N steps halving the data held",
     halving_doubling_supports, recursive_halving_reduce_scatter},
    {C::allreduce, "recursive_doubling", "log2 N steps exchanging the whole vector",
     recursive_doubling_allreduce_supports, recursive_doubling_allreduce},
    {C::allgather, "recursive_doubling", "log2 N steps doubling the blocks held (N = 2^k)",
     recursive_doubling_allgather_supports, recursive_doubling_allgather},
    {C::allgather, "bruck", "ceil(log2 N) steps for any N, rotated gather",
     bruck_allgather_supports, bruck_allgather},
    // Trees and chains.
    {C::allreduce, "double_binary_tree", "two complementary trees, pipelined halves",
     double_binary_tree_supports, double_binary_tree_allreduce},
    {C::allreduce, "reduce_broadcast", "binomial Reduce to rank 0 + binomial Broadcast",
     reduce_broadcast_supports, reduce_broadcast_allreduce},
    {C::broadcast, "pipelined_chain", "segments down the chain from the root",
     pipelined_chain_supports, pipelined_chain_broadcast},
    {C::reduce, "pipelined_chain", "segments folded along the chain to the root",
     pipelined_chain_supports, pipelined_chain_reduce},
    {C::broadcast, "scatter_allgather", "binomial scatter + ring AllGather",
     scatter_allgather_supports, scatter_allgather_broadcast},
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
