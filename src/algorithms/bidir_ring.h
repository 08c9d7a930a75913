// Bidirectional (2-port) ring algorithms: AllReduce, AllGather and
// ReduceScatter with every rank sending to both ring neighbours in each step.
// See bidir_ring.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support bidir_ring_supports(const CollectiveSpec& spec);
Program bidir_ring_allreduce(const CollectiveSpec& spec);
Program bidir_ring_allgather(const CollectiveSpec& spec);
Program bidir_ring_reduce_scatter(const CollectiveSpec& spec);

}  // namespace chorus
