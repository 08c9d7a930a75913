// Recursive doubling: AllReduce exchanging the whole vector in log2 N steps
// (small messages; non-power-of-two N through the fold) and AllGather
// doubling the gathered window each step (power-of-two N only). See
// recursive_doubling.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support recursive_doubling_allreduce_supports(const CollectiveSpec& spec);
Program recursive_doubling_allreduce(const CollectiveSpec& spec);
Support recursive_doubling_allgather_supports(const CollectiveSpec& spec);
Program recursive_doubling_allgather(const CollectiveSpec& spec);

}  // namespace chorus
