// Pure rank arithmetic shared by the algorithms: ring neighbours, powers of two,
// the non-power-of-two fold, binomial trees. No I/O, no state.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace chorus {

// (r + k) mod n for any integer k, n >= 1.
int ring_add(int r, long long k, int n);

// Largest power of two <= n (n >= 1).
int floor_pow2(int n);
// ceil(log2 n) for n >= 1 (0 for n == 1).
int ceil_log2(long long n);
// floor(log2 n) for n >= 1.
int floor_log2(long long n);
bool is_pow2(long long n);

// The fold that reduces N ranks to a power-of-two core of P = floor_pow2(N):
// r = N - P extra ranks. Ranks 2i and 2i+1 for i < r pair up; the even one
// (2i) is the extra and hands its data to its odd partner (2i+1), which joins
// the core. Ranks >= 2r join the core as they are. Core ranks are numbered
// 0..P-1 in rank order.
//   N = 6, P = 4, r = 2:  ranks 0 1 2 3 4 5
//                         extra: 0, 2     core: 1->0, 3->1, 4->2, 5->3
struct Fold {
  int nranks = 1;
  int core = 1;   // P
  int extra = 0;  // r
  // Core index of a rank, or -1 for an extra rank.
  int core_index(int rank) const;
  // Rank that holds core index c.
  int core_rank(int c) const;
  bool is_extra(int rank) const { return core_index(rank) < 0; }
  // An extra rank's partner in the core, and a core rank's extra (or -1).
  int partner(int rank) const;
};
Fold make_fold(int nranks);

// Binomial tree rooted at `root` over n ranks, on ranks relative to the root
// (v = (rank - root) mod n). A rank's parent clears its lowest set bit of v;
// its children are v + 2^k for 2^k below that bit, while v + 2^k < n.
//        0
//      / | \        n = 8: 0 -> {1, 2, 4}, 2 -> {3}, 4 -> {5, 6}, 6 -> {7}
//     1  2  4
//        |  | \.
//        3  5  6
//              |
//              7
struct BinomialNode {
  int parent = -1;            // -1 at the root
  std::vector<int> children;  // largest subtree first (receive order of Reduce)
};
BinomialNode binomial_node(int rank, int root, int n);

// The hosts of a call (CollectiveSpec::host_of): which ranks share one, and
// each rank's place on its host. Hosts are numbered from 0 in order of their
// first rank, whatever numbers host_of uses.
//   host_of = {0, 0, 0, 1}:  ranks = {{0, 1, 2}, {3}}, widest = 3
//   slice owners (widest = 3 slices): host 0: s -> rank s; host 1: rank 3
struct HostGroups {
  std::vector<std::vector<int>> ranks;  // ranks[h]: host h's ranks, ascending
  std::vector<int> host;                // host[r]
  std::vector<int> local;               // local[r]: r's index among its host's ranks
  int widest = 0;                       // the most ranks on one host
  int host_count() const { return static_cast<int>(ranks.size()); }
  int size_of(int h) const { return static_cast<int>(ranks[static_cast<size_t>(h)].size()); }
  // The local index on host h that answers for part s of `parts` (s in
  // [0, parts)): floor(s * L_h / parts), so that a host of L_h ranks spreads
  // the parts evenly, each rank a contiguous run of them.
  int part_owner(int h, int s, int parts) const;
  // The first part and the number of parts that local index i of host h
  // answers for, out of `parts`.
  int first_part(int h, int i, int parts) const;
  int part_count(int h, int i, int parts) const;
  // Rank q's stand-in on host h: q itself on its own host, elsewhere the rank
  // of h that owns part local[q] of widest.
  int proxy(int h, int q) const;
};
// host_of[r] for every rank (any non-negative numbers; equal numbers share a
// host). Throws Error(invalid_argument) for a negative number.
HostGroups host_groups(std::span<const int> host_of);
// host_of for hosts of `per_host` consecutive ranks (the last one holds what
// is left): consecutive_hosts(7, 3) = {0, 0, 0, 1, 1, 1, 2}.
std::vector<int> consecutive_hosts(int nranks, int per_host);
// host_of for hosts of the given sizes, in order: {3, 1} -> {0, 0, 0, 1}.
std::vector<int> hosts_of_sizes(std::span<const int> sizes);

}  // namespace chorus

namespace chorus {

// First rank whose block core index c answers for after the fold, with
// c == f.core giving N: core c < r holds the blocks of ranks 2c (its extra)
// and 2c + 1 (itself), core c >= r the block of rank c + r. So the blocks of
// core indices [lo, hi) are the rank blocks [fold_block_begin(lo),
// fold_block_begin(hi)), contiguous and in rank order.
//   N = 6, P = 4, r = 2:  core 0 -> ranks [0,2)  core 1 -> [2,4)
//                         core 2 -> [4,5)        core 3 -> [5,6)
int fold_block_begin(const Fold& f, int c);

// Number of ranks in the binomial subtree of relative rank v (v = (rank - root)
// mod n, see binomial_node): relative ranks [v, v + size) with size the lowest
// set bit of v, cut at n; the root's subtree is all n ranks.
int binomial_subtree_size(int v, int n);

// Binary trees for the double binary tree (two complementary trees).
//
// Tree 0 is the in-order binary tree over positions p = rank + 1 in 1..n. A
// position p whose lowest set bit is L = 2^h sits at height h: odd positions
// are leaves, the root is the largest power of two <= n. The children of p
// are p - L/2 and p + L/2; when p + L/2 is past n the right child is p + L/4,
// p + L/8, ... (the first one that exists), so that the right edge of the
// tree shrinks instead of losing ranks. The parent of p flips the bit above
// L: p + L when bit 2L of p is clear, p - L when it is set; when p + L is past
// n the parent is p - L instead (the node whose cut right edge led to p).
//
//   n = 7, tree 0 (rank = position - 1):
//              4
//           /     \    (positions)
//          2       6
//         / \     / \.
//        1   3   5   7
//   n = 6: 4 -> {2, 6}, 6 -> {5} (its right child 7 is past n)
//
// Every non-root node's height is below its parent's, so the tree has at
// most floor(log2 n) + 1 levels. Interior nodes are the even positions, the
// odd ranks; leaves are the odd positions, the even ranks.
//
// Tree 1 is tree 0 shifted by one rank: rank x of tree 1 plays the part of
// rank x - 1 (mod n) of tree 0, so its interior nodes are the ranks x with
// x - 1 (mod n) odd: for even n the even ranks, for odd n the even ranks
// 2..n-1. No rank is interior in both trees: a rank interior in one is a leaf
// in the other (for odd n, rank 0 is a leaf in both).
//
//   n = 8:  tree 0 root rank 7      tree 1 root rank 0
//           interior 1 3 5 7        interior 0 2 4 6
//           leaves   0 2 4 6        leaves   1 3 5 7
struct TreeNode {
  int parent = -1;            // -1 at the root
  std::vector<int> children;  // at most two, left (lower position) first
  int height = 0;             // 0 at a leaf; strictly below the parent's height
};
// Node of `rank` in tree 0 (the in-order tree) over n ranks.
TreeNode inorder_tree_node(int rank, int n);
// Node of `rank` in tree `tree` (0 or 1) of the double binary tree.
TreeNode double_tree_node(int tree, int rank, int n);
// Root rank of tree `tree` of the double binary tree.
int double_tree_root(int tree, int n);

}  // namespace chorus
