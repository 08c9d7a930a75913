// Binomial-tree Broadcast and Reduce, and AllReduce as Reduce + Broadcast.
//
// Ranks are numbered relative to the root, v = (rank - root) mod N. Broadcast
// runs ceil(log2 N) rounds with distance d = 2^(ceil(log2 N)-1) down to 1: in
// each, every rank v < d that holds the data sends it to v + d (when that is a
// rank). Reduce runs the same tree upwards, each rank folding its children's
// partial results into its own, smallest subtree first (those finish
// earliest), before passing the sum to its parent (rank_math.h:
// binomial_node). The message between v and its parent moves in round
// countr_zero(v) going up and in round ceil(log2 N)-1-countr_zero(v) coming
// down; ops carry those rounds as their steps.
//
//   N = 8, root 0, Broadcast:
//     round 1: 0 -> 4
//     round 2: 0 -> 2, 4 -> 6
//     round 3: 0 -> 1, 2 -> 3, 4 -> 5, 6 -> 7
//
//   Broadcast: ceil(log2 N) rounds; the root sends ceil(log2 N) M, a leaf
//              nothing. Cost on a switch, with d ports: T(N) below;
//              N = 2^L, d = 1: L (alpha + M/beta).
//   Reduce:    ceil(log2 N) rounds; a non-root sends M. N = 2^L:
//              L (alpha + M/beta + gamma M).
//   AllReduce (reduce_broadcast): Reduce to rank 0, then Broadcast from it,
//              partial sums kept in the Output; 2 ceil(log2 N) rounds, the
//              root sends and receives ceil(log2 N) M, a leaf M each way.
//              N = 2^L: L (2 alpha + 2 M/beta + M gamma) -- the seed's
//              "naive" row: bandwidth log2 N times the ring's.
//
// Reduce on a non-root rank accumulates into scratch: its output buffer is not
// part of the call (NCCL writes recv on the root only). Broadcast never reads
// the input of a non-root rank.
//
// Constraints: none (any N >= 1, any count >= 0, any root).
#include "algorithms/algorithm.h"

#include "core/check.h"
#include "schedule/rank_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>

namespace chorus {
namespace {

using B = ProgramBuilder;

struct Tree {
  BinomialNode node;
  int root;
  int n;
  int rounds;
  int level(int rank) const {  // countr_zero of the rank relative to the root
    return std::countr_zero(static_cast<unsigned>(ring_add(rank, -root, n)));
  }
};

Tree tree_of(int rank, int root, int n) {
  return {binomial_node(rank, root, n), root, n, ceil_log2(n)};
}

// Folds the children's partial sums into `acc`, smallest subtree first, the
// first fold adding `in`; then (off the root) sends the sum up. Returns the
// ops after which `acc` (or `in`, for a leaf) holds this subtree's sum.
struct ReducePhase {
  std::vector<OpIndex> folded;
  Region sum;                 // where this subtree's sum is
  std::optional<OpIndex> up;  // the send to the parent
};
ReducePhase reduce_phase(ProgramBuilder& b, const Tree& t, int rank, Region in, Region acc) {
  ReducePhase out{{}, in, std::nullopt};
  for (auto it = t.node.children.rbegin(); it != t.node.children.rend(); ++it) {
    out.folded = {
        b.recv_reduce(*it, out.sum, acc, out.folded, static_cast<uint32_t>(t.level(*it)))};
    out.sum = acc;
  }
  if (t.node.parent >= 0)
    out.up = b.send(t.node.parent, out.sum, out.folded, static_cast<uint32_t>(t.level(rank)));
  return out;
}

// Receives `buf` from the parent (off the root; after `recv_deps`), then
// sends it to the children, largest subtree first; `have` are the ops after
// which the root's `buf` holds the data.
void broadcast_phase(ProgramBuilder& b, const Tree& t, int rank, Region buf,
                     std::vector<OpIndex> have, std::vector<OpIndex> recv_deps,
                     uint32_t first_step) {
  auto down = [&](int v) { return first_step + static_cast<uint32_t>(t.rounds - 1 - t.level(v)); };
  if (t.node.parent >= 0) have = {b.recv(t.node.parent, buf, std::move(recv_deps), down(rank))};
  for (int child : t.node.children) b.send(child, buf, have, down(child));
}

Program build_binomial_broadcast(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const Tree t = tree_of(spec.rank, spec.root, spec.nranks);
  std::vector<OpIndex> have;
  if (t.node.parent < 0) have.push_back(b.copy(B::input(0, c), B::output(0, c)));
  broadcast_phase(b, t, spec.rank, B::output(0, c), have, {}, 0);
  return std::move(b).finish();
}

Program build_binomial_reduce(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const Tree t = tree_of(spec.rank, spec.root, spec.nranks);
  const bool is_root = t.node.parent < 0;
  const Region acc =
      is_root ? B::output(0, c) : B::scratch(b.alloc_scratch(t.node.children.empty() ? 0 : c), c);
  reduce_phase(b, t, spec.rank, B::input(0, c), acc);
  return std::move(b).finish();
}

Program build_reduce_broadcast(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const Tree t = tree_of(spec.rank, 0, spec.nranks);
  const ReducePhase up = reduce_phase(b, t, spec.rank, B::input(0, c), B::output(0, c));
  // The result overwrites what the up send read (the fold, or in place the
  // input), so the receive waits for it.
  std::vector<OpIndex> recv_deps;
  if (up.up) recv_deps.push_back(*up.up);
  broadcast_phase(b, t, spec.rank, B::output(0, c), up.folded, recv_deps,
                  static_cast<uint32_t>(t.rounds));
  return std::move(b).finish();
}

// Broadcast. A node that holds the data at time t sends to its children
// largest subtree first, all at once; its `ports` send ports serve them in
// that order, so the j-th child (1-based) has the data at
//   t + alpha + ceil(j / ports) * M/beta
// (alpha is latency and overlaps; only the M/beta of each message queues).
// For a tree of n nodes, L = ceil(log2 n), the children are 2^(L-1), ...,
// 2^0; the first one roots a binomial tree of n - 2^(L-1) nodes, the j-th
// (j >= 2) a full one of 2^(L-j). So
//   T(1) = 0,  T(n) = max_j ( alpha + ceil(j/d) M/beta + T(size_j) ).
// With d = 1 and n = 2^L this is L (alpha + M/beta), the seed's form; for other
// n it is less, because the first (largest) subtree is not full: e.g. N = 5
// gives 2 alpha + 3 M/beta where the seed says 3 (alpha + M/beta).
double broadcast_tree_time(long long n, double alpha, double g, int d, std::vector<double>& full) {
  if (n <= 1) return 0;
  const int levels = ceil_log2(n);
  double t = 0;
  for (int j = 1; j <= levels; ++j) {
    const long long size = j == 1 ? n - (1LL << (levels - 1)) : 1LL << (levels - j);
    // Full trees recur once per level: memoize them by level.
    double sub;
    if (j > 1) {
      const auto lv = static_cast<size_t>(levels - j);
      if (full[lv] < 0) full[lv] = broadcast_tree_time(size, alpha, g, d, full);
      sub = full[lv];
    } else {
      sub = broadcast_tree_time(size, alpha, g, d, full);
    }
    const double slot = std::ceil(static_cast<double>(j) / d);
    t = std::max(t, alpha + slot * g + sub);
  }
  return t;
}

Prediction broadcast_time(int n, double m, const CostParams& p) {
  std::vector<double> full(64, -1.0);
  return Prediction::time(broadcast_tree_time(n, p.alpha, m / p.beta, p.ports, full));
}

// Reduce. For N = 2^L the subtree results reach a node spaced
// alpha + M/beta + gamma M apart, so its receive port never queues and each
// level costs alpha + M/beta + gamma M. For other N two children can finish at
// the same time and their messages queue at the parent's receive port; the
// result then depends on which of the two the port serves first, and no
// closed form is claimed.
Prediction reduce_time(int n, double m, const CostParams& p) {
  if (!is_pow2(n))
    return Prediction::none(str_cat("binomial reduce has a closed form for power-of-two N only (",
                                    "N = ", n, " queues messages at receive ports)"));
  return Prediction::time(floor_log2(n) * (p.alpha + m / p.beta + m * p.gamma));
}

Prediction reduce_broadcast_time(int n, double m, const CostParams& p) {
  const Prediction r = reduce_time(n, m, p);
  if (!r.ok) return r;
  return Prediction::time(r.seconds + broadcast_time(n, m, p).seconds);
}

constexpr ClosedForm kBroadcastCost[] = {{broadcast_time, 0, "switch",
                                          "T(N), T(1)=0, T(n)=max_j(alpha + ceil(j/d) M/beta + "
                                          "T(size_j)); N=2^L, d=1: L(alpha+M/beta)"}};
constexpr ClosedForm kReduceCost[] = {
    {reduce_time, 0, "switch", "log2 N (alpha + M/beta + gamma M), N a power of two"}};
constexpr ClosedForm kReduceBroadcastCost[] = {
    {reduce_broadcast_time, 0, "switch",
     "binomial reduce + binomial broadcast (N = 2^k: log2 N (2 alpha + 2 M/beta + M gamma))"}};

}  // namespace

extern const Algorithm kBinomialBroadcast{
    Collective::broadcast,    "binomial", "binomial tree from the root",
    build_binomial_broadcast, nullptr,    kBroadcastCost,
    "any N, any root"};
extern const Algorithm kBinomialReduce{
    Collective::reduce,    "binomial", "binomial tree towards the root",
    build_binomial_reduce, nullptr,    kReduceCost,
    "any N, any root"};
extern const Algorithm kReduceBroadcastAllreduce{Collective::allreduce,
                                                 "reduce_broadcast",
                                                 "binomial Reduce to rank 0 + binomial Broadcast",
                                                 build_reduce_broadcast,
                                                 nullptr,
                                                 kReduceBroadcastCost,
                                                 "any N"};

}  // namespace chorus
