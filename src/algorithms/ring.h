// Ring algorithms: AllReduce (ReduceScatter + AllGather), AllGather and
// ReduceScatter on the ring 0 -> 1 -> ... -> N-1 -> 0. See ring.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support ring_supports(const CollectiveSpec& spec);
Program ring_allreduce(const CollectiveSpec& spec);
Program ring_allgather(const CollectiveSpec& spec);
Program ring_reduce_scatter(const CollectiveSpec& spec);

}  // namespace chorus
