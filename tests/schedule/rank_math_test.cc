#include "schedule/rank_math.h"

#include <gtest/gtest.h>

#include <set>

namespace chorus {
namespace {

TEST(RankMath, RingAddWrapsBothWays) {
  EXPECT_EQ(ring_add(0, -1, 5), 4);
  EXPECT_EQ(ring_add(4, 1, 5), 0);
  EXPECT_EQ(ring_add(2, -12, 5), 0);
  EXPECT_EQ(ring_add(0, 0, 1), 0);
}

TEST(RankMath, Logs) {
  EXPECT_EQ(ceil_log2(1), 0);
  EXPECT_EQ(ceil_log2(2), 1);
  EXPECT_EQ(ceil_log2(5), 3);
  EXPECT_EQ(ceil_log2(8), 3);
  EXPECT_EQ(floor_log2(9), 3);
  EXPECT_EQ(floor_pow2(1000), 512);
  EXPECT_TRUE(is_pow2(64));
  EXPECT_FALSE(is_pow2(96));
}

TEST(RankMath, FoldPairsExtrasWithCoreRanks) {
  for (int n = 1; n <= 70; ++n) {
    const Fold f = make_fold(n);
    EXPECT_EQ(f.core + f.extra, n);
    EXPECT_TRUE(is_pow2(f.core));
    std::set<int> seen;
    for (int r = 0; r < n; ++r) {
      const int c = f.core_index(r);
      if (c < 0) {
        EXPECT_FALSE(f.is_extra(f.partner(r))) << "n=" << n << " r=" << r;
        EXPECT_EQ(f.partner(f.partner(r)), r);
      } else {
        EXPECT_EQ(f.core_rank(c), r);
        seen.insert(c);
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), f.core) << "n=" << n;
  }
}

// Every non-root rank has exactly one parent, parents list it as a child, and
// following parents reaches the root in at most ceil(log2 N) hops.
TEST(RankMath, BinomialTreeIsATreeRootedAtRoot) {
  for (int n = 1; n <= 40; ++n)
    for (int root : {0, n / 2, n - 1}) {
      int edges = 0;
      for (int r = 0; r < n; ++r) {
        const BinomialNode node = binomial_node(r, root, n);
        edges += static_cast<int>(node.children.size());
        for (int c : node.children) EXPECT_EQ(binomial_node(c, root, n).parent, r);
        int hops = 0;
        for (int v = r; v != root; v = binomial_node(v, root, n).parent) ++hops;
        EXPECT_LE(hops, ceil_log2(n));
        EXPECT_EQ(node.parent < 0, r == root);
      }
      EXPECT_EQ(edges, n - 1) << "n=" << n << " root=" << root;
    }
}

TEST(RankMath, BinomialChildrenLargestSubtreeFirst) {
  const BinomialNode root = binomial_node(0, 0, 8);
  EXPECT_EQ(root.children, (std::vector<int>{4, 2, 1}));
  EXPECT_EQ(binomial_node(4, 0, 8).children, (std::vector<int>{6, 5}));
  EXPECT_EQ(binomial_node(6, 0, 8).parent, 4);
  EXPECT_EQ(binomial_node(3, 2, 4).children, (std::vector<int>{}));  // v = 1
}

}  // namespace
}  // namespace chorus
