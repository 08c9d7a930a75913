// Rank math of the algorithm families: the double binary tree, the fold's
// block ranges and binomial subtrees.
#include "schedule/rank_math.h"

#include <gtest/gtest.h>

#include <vector>

namespace chorus {
namespace {

std::vector<int> rank_counts() {
  std::vector<int> ns;
  for (int n = 1; n <= 64; ++n) ns.push_back(n);
  for (int n : {96, 127, 128, 129, 255, 1000}) ns.push_back(n);
  return ns;
}

// Each tree is a tree: one root, parent and child links agree, at most two
// children, heights fall towards the leaves, every rank hangs off the root
// within floor(log2 N) levels.
TEST(DoubleTree, EachTreeIsAShallowBinaryTree) {
  for (int n : rank_counts())
    for (int t = 0; t < 2; ++t) {
      std::vector<TreeNode> nodes;
      for (int r = 0; r < n; ++r) nodes.push_back(double_tree_node(t, r, n));
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const TreeNode& node = nodes[static_cast<size_t>(r)];
        EXPECT_LE(node.children.size(), 2u) << "n=" << n << " tree " << t << " rank " << r;
        if (node.parent < 0) {
          ++roots;
          EXPECT_EQ(r, double_tree_root(t, n)) << "n=" << n << " tree " << t;
          EXPECT_EQ(node.height, floor_log2(n)) << "n=" << n << " tree " << t;
        } else {
          ASSERT_GE(node.parent, 0);
          ASSERT_LT(node.parent, n);
          const TreeNode& up = nodes[static_cast<size_t>(node.parent)];
          int seen = 0;
          for (int c : up.children) seen += c == r ? 1 : 0;
          EXPECT_EQ(seen, 1) << "n=" << n << " tree " << t << ": rank " << r
                             << " is not a child of its parent " << node.parent;
          EXPECT_LT(node.height, up.height) << "n=" << n << " tree " << t << " rank " << r;
        }
        for (int c : node.children) {
          ASSERT_GE(c, 0);
          ASSERT_LT(c, n);
          EXPECT_EQ(nodes[static_cast<size_t>(c)].parent, r)
              << "n=" << n << " tree " << t << ": child " << c << " of " << r;
        }
        // Walking up ends at the root within floor(log2 n) hops.
        int x = r, hops = 0;
        while (nodes[static_cast<size_t>(x)].parent >= 0 && hops <= n) {
          x = nodes[static_cast<size_t>(x)].parent;
          ++hops;
        }
        EXPECT_EQ(x, double_tree_root(t, n)) << "n=" << n << " tree " << t << " rank " << r;
        EXPECT_LE(hops, floor_log2(n)) << "n=" << n << " tree " << t << " rank " << r;
      }
      EXPECT_EQ(roots, 1) << "n=" << n << " tree " << t;
    }
}

// The point of two trees: a rank interior in one is a leaf in the other. For
// even N the interior sets split the ranks exactly in half; for odd N rank 0
// is the one rank that is a leaf in both.
TEST(DoubleTree, InteriorAndLeafSetsAreComplementary) {
  for (int n : rank_counts()) {
    int interior_somewhere = 0;
    for (int r = 0; r < n; ++r) {
      const bool in0 = !double_tree_node(0, r, n).children.empty();
      const bool in1 = !double_tree_node(1, r, n).children.empty();
      EXPECT_FALSE(in0 && in1) << "n=" << n << ": rank " << r << " is interior in both trees";
      if (in0 || in1) ++interior_somewhere;
      if (n > 1 && n % 2 == 1 && r == 0) {
        EXPECT_FALSE(in0 || in1) << "n=" << n;
      }
    }
    if (n == 1)
      EXPECT_EQ(interior_somewhere, 0);
    else
      EXPECT_EQ(interior_somewhere, n % 2 == 0 ? n : n - 1) << "n=" << n;
  }
}

TEST(DoubleTree, EightRanksAsDrawn) {
  // Tree 0: 7 -> {3}, 3 -> {1, 5}, 1 -> {0, 2}, 5 -> {4, 6}; tree 1 is +1.
  EXPECT_EQ(double_tree_root(0, 8), 7);
  EXPECT_EQ(double_tree_node(0, 7, 8).children, (std::vector<int>{3}));
  EXPECT_EQ(double_tree_node(0, 3, 8).children, (std::vector<int>{1, 5}));
  EXPECT_EQ(double_tree_node(0, 1, 8).children, (std::vector<int>{0, 2}));
  EXPECT_EQ(double_tree_node(0, 5, 8).children, (std::vector<int>{4, 6}));
  EXPECT_EQ(double_tree_node(0, 6, 8).parent, 5);
  EXPECT_EQ(double_tree_root(1, 8), 0);
  EXPECT_EQ(double_tree_node(1, 0, 8).children, (std::vector<int>{4}));
  EXPECT_EQ(double_tree_node(1, 4, 8).children, (std::vector<int>{2, 6}));
  EXPECT_EQ(double_tree_node(1, 7, 8).parent, 6);
  // N = 6: position 6 (rank 5) keeps only its left child, rank 4.
  EXPECT_EQ(double_tree_node(0, 5, 6).children, (std::vector<int>{4}));
}

// The blocks a core index answers for are contiguous, in rank order, cover
// all N blocks, and include the blocks of the ranks it stands for.
TEST(Fold, CoreWindowsCoverTheirRanksBlocks) {
  for (int n : rank_counts()) {
    const Fold f = make_fold(n);
    EXPECT_EQ(fold_block_begin(f, 0), 0);
    EXPECT_EQ(fold_block_begin(f, f.core), n);
    for (int c = 0; c < f.core; ++c) {
      const int lo = fold_block_begin(f, c);
      const int hi = fold_block_begin(f, c + 1);
      const int self = f.core_rank(c);
      EXPECT_TRUE(self >= lo && self < hi) << "n=" << n << " core " << c;
      const int extra = f.partner(self);
      if (extra >= 0) {
        EXPECT_EQ(hi - lo, 2) << "n=" << n << " core " << c;
        EXPECT_TRUE(extra >= lo && extra < hi) << "n=" << n << " core " << c;
      } else {
        EXPECT_EQ(hi - lo, 1) << "n=" << n << " core " << c;
      }
    }
  }
}

// A binomial subtree is the node plus its children's subtrees, as a run of
// relative ranks [v, v + size).
TEST(Binomial, SubtreeSizeMatchesTheChildren) {
  for (int n : rank_counts())
    for (int root : {0, n - 1}) {
      for (int r = 0; r < n; ++r) {
        const int v = ring_add(r, -root, n);
        const BinomialNode node = binomial_node(r, root, n);
        int size = 1;
        int next = v + 1;  // children's runs follow each other, smallest first
        for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) {
          const int cv = ring_add(*it, -root, n);
          EXPECT_EQ(cv, next) << "n=" << n << " root " << root << " rank " << r;
          const int cs = binomial_subtree_size(cv, n);
          size += cs;
          next += cs;
        }
        EXPECT_EQ(binomial_subtree_size(v, n), size)
            << "n=" << n << " root " << root << " rank " << r;
        EXPECT_LE(v + size, n);
      }
    }
}

}  // namespace
}  // namespace chorus
