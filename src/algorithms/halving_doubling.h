// Recursive halving and doubling: Rabenseifner's AllReduce (halving
// ReduceScatter + doubling AllGather) and the recursive-halving
// ReduceScatter, both with the non-power-of-two fold. See halving_doubling.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support halving_doubling_supports(const CollectiveSpec& spec);
Program halving_doubling_allreduce(const CollectiveSpec& spec);
Program recursive_halving_reduce_scatter(const CollectiveSpec& spec);

}  // namespace chorus
