// Broadcast as a binomial scatter from the root followed by a ring
// AllGather (van de Geijn). See scatter_allgather.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support scatter_allgather_supports(const CollectiveSpec& spec);
Program scatter_allgather_broadcast(const CollectiveSpec& spec);

}  // namespace chorus
