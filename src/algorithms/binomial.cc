// Binomial-tree Broadcast and Reduce.
//
// Ranks are numbered relative to the root, v = (rank - root) mod N. Broadcast
// runs ceil(log2 N) rounds with distance d = 2^(ceil(log2 N)-1) down to 1: in
// each, every rank v < d that holds the data sends it to v + d (when that is a
// rank). Reduce runs the same tree upwards, each rank folding its children's
// partial results into its own before passing the sum to its parent
// (rank_math.h: binomial_node).
//
//   N = 8, root 0, Broadcast:
//     round 1: 0 -> 4
//     round 2: 0 -> 2, 4 -> 6
//     round 3: 0 -> 1, 2 -> 3, 4 -> 5, 6 -> 7
//
//   steps:          ceil(log2 N) rounds
//   bytes per rank: the root sends ceil(log2 N) M; a leaf sends M (Reduce) or
//                   nothing (Broadcast)
//   cost:           ceil(log2 N) (alpha + M/beta), Reduce + ceil(log2 N) M gamma
//
// Reduce on a non-root rank accumulates into scratch: its output buffer is not
// part of the call (NCCL writes recv on the root only). Broadcast never reads
// the input of a non-root rank.
//
// Constraints: none (any N >= 1, any count >= 0, any root).
#include "algorithms/binomial.h"

#include "schedule/rank_math.h"

namespace chorus {

Support binomial_supports(const CollectiveSpec& spec) { return check_common(spec); }

Program binomial_broadcast(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  using B = ProgramBuilder;
  const BinomialNode node = binomial_node(spec.rank, spec.root, spec.nranks);
  std::vector<OpIndex> have;  // op after which the output holds the data
  uint32_t step = 0;
  if (node.parent < 0) {
    have.push_back(b.copy(B::input(0, c), B::output(0, c)));
  } else {
    have.push_back(b.recv(node.parent, B::output(0, c)));
  }
  // Children are ordered largest subtree first, which is the round order.
  for (int child : node.children) b.send(child, B::output(0, c), have, ++step);
  return std::move(b).finish();
}

Program binomial_reduce(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  using B = ProgramBuilder;
  const BinomialNode node = binomial_node(spec.rank, spec.root, spec.nranks);
  const bool is_root = node.parent < 0;
  const Region acc = is_root ? B::output(0, c) : B::scratch(b.alloc_scratch(node.children.empty() ? 0 : c), c);
  if (is_root && node.children.empty()) {
    b.copy(B::input(0, c), acc);
    return std::move(b).finish();
  }
  // Smallest subtree first: those children finish their own subtree earliest.
  Region partial = B::input(0, c);
  std::vector<OpIndex> deps;
  uint32_t step = 0;
  for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) {
    const OpIndex op = b.recv_reduce(*it, partial, acc, deps, ++step);
    deps = {op};
    partial = acc;
  }
  if (!is_root) b.send(node.parent, partial, deps, ++step);
  return std::move(b).finish();
}

}  // namespace chorus
