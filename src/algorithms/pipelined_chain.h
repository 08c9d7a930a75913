// Pipelined chain Broadcast and Reduce: the vector in segments along the
// chain root -> root+1 -> ... -> root+N-1 (Reduce: the other way). See
// pipelined_chain.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support pipelined_chain_supports(const CollectiveSpec& spec);
Program pipelined_chain_broadcast(const CollectiveSpec& spec);
Program pipelined_chain_reduce(const CollectiveSpec& spec);

}  // namespace chorus
