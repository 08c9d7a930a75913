#include "schedule/rank_math.h"

#include "core/check.h"
#include "core/first_seen.h"

#include <algorithm>
#include <bit>

namespace chorus {

int ring_add(int r, long long k, int n) {
  long long v = (static_cast<long long>(r) + k) % n;
  if (v < 0) v += n;
  return static_cast<int>(v);
}

bool is_pow2(long long n) {
  return n > 0 && (n & (n - 1)) == 0;
}

int floor_log2(long long n) {
  CHORUS_CHECK(n >= 1);
  return 63 - std::countl_zero(static_cast<unsigned long long>(n));
}

int ceil_log2(long long n) {
  CHORUS_CHECK(n >= 1);
  return n == 1 ? 0 : floor_log2(n - 1) + 1;
}

int floor_pow2(int n) {
  return 1 << floor_log2(n);
}

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

int Fold::core_rank(int c) const {
  return c < extra ? 2 * c + 1 : c + extra;
}

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

namespace chorus {

int fold_block_begin(const Fold& f, int c) {
  CHORUS_CHECK(c >= 0 && c <= f.core);
  return c < f.extra ? 2 * c : c + f.extra;
}

int binomial_subtree_size(int v, int n) {
  CHORUS_CHECK(n >= 1 && v >= 0 && v < n);
  if (v == 0) return n;
  return std::min(v & -v, n - v);
}

namespace {

// Tree 0 on 1-based positions (see rank_math.h): parent, children, height.
TreeNode inorder_position_node(int p, int n) {
  TreeNode node;
  const int low = p & -p;
  node.height = std::countr_zero(static_cast<unsigned>(p));
  if (low != floor_pow2(n)) {
    // Flip the bit above `low`: the parent is the nearer node one level up.
    int up = (p & (low << 1)) ? p - low : p + low;
    // Past the end: p hangs off the cut right edge of p - low.
    if (up > n) up = p - low;
    node.parent = up;
  }
  if (low > 1) {
    node.children.push_back(p - low / 2);  // the left subtree is always complete
    int off = low / 2;
    while (off >= 1 && p + off > n) off /= 2;
    if (off >= 1) node.children.push_back(p + off);
  }
  return node;
}

}  // namespace

TreeNode inorder_tree_node(int rank, int n) {
  CHORUS_CHECK(n >= 1 && rank >= 0 && rank < n);
  TreeNode node = inorder_position_node(rank + 1, n);
  // Positions back to ranks.
  if (node.parent > 0) node.parent -= 1;
  for (int& c : node.children) c -= 1;
  return node;
}

TreeNode double_tree_node(int tree, int rank, int n) {
  CHORUS_CHECK(tree == 0 || tree == 1);
  if (tree == 0) return inorder_tree_node(rank, n);
  // Tree 1: rank x plays rank x - 1 of tree 0; relabel the answer by +1.
  TreeNode node = inorder_tree_node(ring_add(rank, -1, n), n);
  if (node.parent >= 0) node.parent = ring_add(node.parent, 1, n);
  for (int& c : node.children) c = ring_add(c, 1, n);
  return node;
}

int double_tree_root(int tree, int n) {
  CHORUS_CHECK(tree == 0 || tree == 1);
  const int root0 = floor_pow2(n) - 1;
  return tree == 0 ? root0 : ring_add(root0, 1, n);
}

}  // namespace chorus

namespace chorus {

HostGroups host_groups(std::span<const int> host_of) {
  HostGroups g;
  for (size_t r = 0; r < host_of.size(); ++r)
    if (host_of[r] < 0)
      fail(ErrorCode::invalid_argument, "host of rank ", r, " is negative: ", host_of[r]);
  g.host = number_by_first_seen(host_of);
  g.local.resize(host_of.size());
  for (size_t r = 0; r < host_of.size(); ++r) {
    const auto h = static_cast<size_t>(g.host[r]);
    if (h == g.ranks.size()) g.ranks.emplace_back();
    g.local[r] = static_cast<int>(g.ranks[h].size());
    g.ranks[h].push_back(static_cast<int>(r));
    g.widest = std::max(g.widest, static_cast<int>(g.ranks[h].size()));
  }
  return g;
}

std::vector<int> consecutive_hosts(int nranks, int per_host) {
  CHORUS_CHECK(nranks >= 0 && per_host >= 1);
  std::vector<int> out(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) out[static_cast<size_t>(r)] = r / per_host;
  return out;
}

std::vector<int> hosts_of_sizes(std::span<const int> sizes) {
  std::vector<int> out;
  for (size_t h = 0; h < sizes.size(); ++h) {
    CHORUS_CHECK(sizes[h] >= 1);
    out.insert(out.end(), static_cast<size_t>(sizes[h]), static_cast<int>(h));
  }
  return out;
}

int HostGroups::part_owner(int h, int s, int parts) const {
  CHORUS_CHECK(parts >= 1 && s >= 0 && s < parts);
  return static_cast<int>(static_cast<long long>(s) * size_of(h) / parts);
}

int HostGroups::first_part(int h, int i, int parts) const {
  // The smallest s with floor(s * L / parts) >= i: ceil(i * parts / L).
  const long long l = size_of(h);
  return static_cast<int>((static_cast<long long>(i) * parts + l - 1) / l);
}

int HostGroups::part_count(int h, int i, int parts) const {
  return first_part(h, i + 1, parts) - first_part(h, i, parts);
}

int HostGroups::proxy(int h, int q) const {
  if (host[static_cast<size_t>(q)] == h) return q;
  return ranks[static_cast<size_t>(h)]
              [static_cast<size_t>(part_owner(h, local[static_cast<size_t>(q)], widest))];
}

}  // namespace chorus
