// Pure rank arithmetic shared by the algorithms: ring neighbours, powers of two,
// the non-power-of-two fold, binomial trees. No I/O, no state.
#pragma once

#include <cstddef>
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
  int core = 1;    // P
  int extra = 0;   // r
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

}  // namespace chorus
