// Bruck's AllGather: ceil(log2 N) steps for any N. See bruck.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support bruck_allgather_supports(const CollectiveSpec& spec);
Program bruck_allgather(const CollectiveSpec& spec);

}  // namespace chorus
