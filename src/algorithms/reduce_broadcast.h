// AllReduce as a binomial Reduce to rank 0 followed by a binomial Broadcast
// from rank 0 (the seed's "naive" AllReduce). See reduce_broadcast.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support reduce_broadcast_supports(const CollectiveSpec& spec);
Program reduce_broadcast_allreduce(const CollectiveSpec& spec);

}  // namespace chorus
