// Dissemination barrier. See barrier.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support dissemination_supports(const CollectiveSpec& spec);
Program dissemination_barrier(const CollectiveSpec& spec);

}  // namespace chorus
