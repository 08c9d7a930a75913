// Double binary tree AllReduce: two complementary binary trees, each reducing
// and broadcasting half of the vector in pipelined segments. See
// double_binary_tree.cc.
#pragma once

#include "algorithms/algorithm.h"

namespace chorus {

Support double_binary_tree_supports(const CollectiveSpec& spec);
Program double_binary_tree_allreduce(const CollectiveSpec& spec);

}  // namespace chorus
