// Binomial-tree Gather and Scatter.
//
// Ranks are numbered relative to the root, v = (rank - root) mod N, and sit
// in the binomial tree of Broadcast and Reduce (rank_math.h: binomial_node).
// The subtree of v holds the relative ranks [v, v + size) (size the lowest
// set bit of v, cut at N), so a subtree's blocks are contiguous in relative
// order. Gather runs the tree upwards: v receives each child's subtree
// blocks, adds its own, and sends its whole subtree's blocks to its parent
// in round countr_zero(v). Scatter runs it downwards: v receives its
// subtree's blocks from its parent in round ceil(log2 N)-1-countr_zero(v),
// keeps its own and forwards each child its subtree's, largest first.
//
// Ranks between the root and the leaves stage their subtree in scratch, in
// relative order; the root reads or writes its buffer in rank order, where a
// subtree that crosses rank N-1 -> 0 is two runs, so every message of a
// subtree is cut there into at most two (both ends cut it the same way).
// Leaves send their Input or receive into their Output directly.
//
//   N = 8, root 0, Gather (blocks held after each round):
//     round 1: 1 -> 0, 3 -> 2, 5 -> 4, 7 -> 6     (one block each)
//     round 2: 2 -> 0, 6 -> 4                       (two blocks: 2-3, 6-7)
//     round 3: 4 -> 0                               (four blocks: 4-7)
//
//   rounds:         ceil(log2 N)
//   bytes per rank: the root receives (N-1)/N M (M = N c elements, the
//                   root's buffer); v sends its subtree, size(v) M/N
//   cost:           N = 2^L: L alpha + (N-1)/N M/beta (either direction):
//                   log2 N latencies instead of the linear one's single one,
//                   but the root talks to log2 N ranks, not N - 1: it wins
//                   where alpha and the root's per-message work dominate.
//
// Constraints: none (any N >= 1, any count >= 0, any root).
#include "algorithms/algorithm.h"

#include "core/check.h"
#include "schedule/rank_math.h"

#include <bit>
#include <utility>
#include <vector>

namespace chorus {
namespace {

using B = ProgramBuilder;

// One node of the tree as this algorithm sees it.
struct Node {
  int n;
  int root;
  int v;     // relative rank
  int size;  // blocks in v's subtree
  BinomialNode links;
  int rounds;

  int absolute(int u) const { return ring_add(u, root, n); }
  int relative(int rank) const { return ring_add(rank, -root, n); }
  uint32_t up_step(int u) const { return static_cast<uint32_t>(std::countr_zero(unsigned(u))); }
  uint32_t down_step(int u) const { return static_cast<uint32_t>(rounds) - 1 - up_step(u); }
};

Node node_of(const CollectiveSpec& spec) {
  const int v = ring_add(spec.rank, -spec.root, spec.nranks);
  return {spec.nranks,
          spec.root,
          v,
          binomial_subtree_size(v, spec.nranks),
          binomial_node(spec.rank, spec.root, spec.nranks),
          ceil_log2(spec.nranks)};
}

// The runs of relative blocks [u, u + size) as messages: one, or two where
// the subtree crosses absolute rank N-1 -> 0 (relative N - root).
std::vector<std::pair<int, int>> runs(const Node& t, int u, int size) {
  const int wrap = t.n - t.root;
  if (t.root == 0 || u + size <= wrap || u >= wrap) return {{u, size}};
  return {{u, wrap - u}, {wrap, u + size - wrap}};
}

// Where this node keeps relative blocks [u, u + blocks) of its subtree: the
// root its buffer of N blocks (`whole`, in rank order), the others scratch
// from `base` in relative order.
struct Staging {
  const Node& t;
  BufferKind whole;
  size_t base;
  size_t c;
  Region at(int u, int blocks) const {
    const size_t count = static_cast<size_t>(blocks) * c;
    if (t.links.parent < 0) return {whole, static_cast<size_t>(t.absolute(u)) * c, count};
    return B::scratch(base + static_cast<size_t>(u - t.v) * c, count);
  }
};

Program build_binomial_gather(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const Node t = node_of(spec);
  const bool is_root = t.links.parent < 0;
  if (!is_root && t.size == 1) {  // a leaf sends its Input as it is
    b.send(t.links.parent, B::input(0, c), {}, t.up_step(t.v));
    return std::move(b).finish();
  }
  const size_t base = is_root ? 0 : b.alloc_scratch(static_cast<size_t>(t.size) * c);
  const Staging stage{t, BufferKind::output, base, c};
  std::vector<OpIndex> have{b.copy(B::input(0, c), stage.at(t.v, 1))};
  for (int child : t.links.children) {
    const int u = t.relative(child);
    for (auto [from, blocks] : runs(t, u, binomial_subtree_size(u, t.n)))
      have.push_back(b.recv(child, stage.at(from, blocks), {}, t.up_step(u)));
  }
  if (!is_root)
    for (auto [from, blocks] : runs(t, t.v, t.size))
      b.send(t.links.parent, stage.at(from, blocks), have, t.up_step(t.v));
  return std::move(b).finish();
}

Program build_binomial_scatter(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const Node t = node_of(spec);
  const bool is_root = t.links.parent < 0;
  if (!is_root && t.size == 1) {  // a leaf receives straight into its Output
    b.recv(t.links.parent, B::output(0, c), {}, t.down_step(t.v));
    return std::move(b).finish();
  }
  const size_t base = is_root ? 0 : b.alloc_scratch(static_cast<size_t>(t.size) * c);
  const Staging stage{t, BufferKind::input, base, c};
  std::vector<OpIndex> have;
  if (!is_root)
    for (auto [from, blocks] : runs(t, t.v, t.size))
      have.push_back(b.recv(t.links.parent, stage.at(from, blocks), {}, t.down_step(t.v)));
  b.copy(stage.at(t.v, 1), B::output(0, c), have);
  for (int child : t.links.children) {
    const int u = t.relative(child);
    for (auto [from, blocks] : runs(t, u, binomial_subtree_size(u, t.n)))
      b.send(child, stage.at(from, blocks), have, t.down_step(u));
  }
  return std::move(b).finish();
}

// N = 2^L, one port: the subtree of level k is complete k alpha +
// (2^k - 1) M/(N beta) after the start, whichever the direction (the
// messages into, or out of, a node queue at its port largest last, or
// largest first); at the root k = L. Other N queue messages of unequal
// sizes and no closed form is claimed: the simulator prices them.
Prediction binomial_time(int n, double m, const CostParams& p) {
  if (!is_pow2(n))
    return Prediction::none(str_cat("binomial gather and scatter have a closed form for ",
                                    "power-of-two N only, not N = ", n));
  return Prediction::time(floor_log2(n) * p.alpha + (n - 1) * (m / n) / p.beta);
}

constexpr ClosedForm kCost[] = {
    {binomial_time, 1, "switch", "log2 N alpha + (N-1)/N M/beta, N a power of two"}};

}  // namespace

extern const Algorithm kBinomialGather{
    Collective::gather,    "binomial", "binomial tree towards the root, subtrees staged",
    build_binomial_gather, nullptr,    kCost,
    "any N, any root"};
extern const Algorithm kBinomialScatter{
    Collective::scatter,    "binomial", "binomial tree from the root, subtrees staged",
    build_binomial_scatter, nullptr,    kCost,
    "any N, any root"};

}  // namespace chorus
