// AllToAll: pairwise exchange (N-1 steps, for large blocks) and Bruck (ceil(log2 N)
// steps, for small blocks). See alltoall.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support alltoall_supports(const CollectiveSpec& spec);
Program pairwise_alltoall(const CollectiveSpec& spec);
Program bruck_alltoall(const CollectiveSpec& spec);

}  // namespace chorus
