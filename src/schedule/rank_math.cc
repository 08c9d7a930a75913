#include "schedule/rank_math.h"

#include "core/check.h"

#include <bit>

namespace chorus {

int ring_add(int r, long long k, int n) {
  long long v = (static_cast<long long>(r) + k) % n;
  if (v < 0) v += n;
  return static_cast<int>(v);
}

bool is_pow2(long long n) { return n > 0 && (n & (n - 1)) == 0; }

int floor_log2(long long n) {
  CHORUS_CHECK(n >= 1);
  return 63 - std::countl_zero(static_cast<unsigned long long>(n));
}

int ceil_log2(long long n) {
  CHORUS_CHECK(n >= 1);
  return n == 1 ? 0 : floor_log2(n - 1) + 1;
}

int floor_pow2(int n) { return 1 << floor_log2(n); }

Fold make_fold(int nranks) {
  CHORUS_CHECK(nranks >= 1);
  Fold f;
  f.nranks = nranks;
  f.core = floor_pow2(nranks);
  f.extra = nranks - f.core;
  return f;
}

int Fold::core_index(int rank) const {
  if (rank < 2 * extra) return (rank % 2 == 0) ? -1 : rank / 2;
  return rank - extra;
}

int Fold::core_rank(int c) const { return c < extra ? 2 * c + 1 : c + extra; }

int Fold::partner(int rank) const {
  if (rank >= 2 * extra) return -1;
  return rank % 2 == 0 ? rank + 1 : rank - 1;
}

BinomialNode binomial_node(int rank, int root, int n) {
  CHORUS_CHECK(n >= 1 && rank >= 0 && rank < n && root >= 0 && root < n);
  BinomialNode node;
  const int v = ring_add(rank, -root, n);
  // Lowest set bit of v bounds the subtree; the root's subtree spans all ranks.
  int limit;
  if (v == 0) {
    limit = 1 << ceil_log2(n);
  } else {
    limit = v & -v;
    node.parent = ring_add(v - limit, root, n);
  }
  for (int k = limit >> 1; k >= 1; k >>= 1)
    if (v + k < n) node.children.push_back(ring_add(v + k, root, n));
  return node;
}

}  // namespace chorus
