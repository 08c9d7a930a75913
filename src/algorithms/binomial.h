// Binomial-tree Broadcast and Reduce. See binomial.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support binomial_supports(const CollectiveSpec& spec);
Program binomial_broadcast(const CollectiveSpec& spec);
Program binomial_reduce(const CollectiveSpec& spec);

}  // namespace chorus
