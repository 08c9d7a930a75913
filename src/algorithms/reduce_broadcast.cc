// AllReduce = binomial Reduce to rank 0 + binomial Broadcast from rank 0.
//
// Both phases use the binomial tree of rank_math.h (binomial_node, root 0).
// Reduce: a rank folds the whole vector of each child into its output,
// smallest subtree first (those finish earliest), then sends the sum to its
// parent. Broadcast: the root sends the result to its children, largest
// subtree first; every other rank receives it from its parent and passes it
// on the same way.
//
//   N = 8, Reduce:     round 0: 1->0 3->2 5->4 7->6
//                      round 1: 2->0 6->4
//                      round 2: 4->0
//          Broadcast:  the same rounds backwards
//
//   steps:          2 ceil(log2 N)
//   messages:       a rank sends 1 up (not the root) and one per child down
//   bytes per rank: the root sends and receives ceil(log2 N) M; a leaf sends
//                   M and receives M
//   cost:           2 ceil(log2 N) (alpha + M/beta) + ceil(log2 N) M gamma
//                   (the seed's "naive" row: bandwidth log2 N times the ring's)
//
// Constraints: none (any N >= 1, any count >= 0).
#include "algorithms/reduce_broadcast.h"

#include "schedule/rank_math.h"

#include <bit>

namespace chorus {

Support reduce_broadcast_supports(const CollectiveSpec& spec) {
  return check_common(spec);
}

Program reduce_broadcast_allreduce(const CollectiveSpec& spec) {
  using B = ProgramBuilder;
  const int n = spec.nranks;
  const int r = spec.rank;
  const Region in = B::input(0, spec.count);
  const Region out = B::output(0, spec.count);
  ProgramBuilder b(buffer_counts(spec));
  if (n == 1) {
    b.copy(in, out);
    return std::move(b).finish();
  }
  const BinomialNode node = binomial_node(r, 0, n);
  const int rounds = ceil_log2(n);
  // The round in which the message between v and its parent v - 2^i moves:
  // round i going up, round rounds-1-i coming down.
  auto level = [](int v) { return std::countr_zero(static_cast<unsigned>(v)); };

  // Phase 1: Reduce. The first fold adds the own input (in place, the same
  // memory as the output); each later one waits for the previous.
  Region partial = in;
  std::vector<OpIndex> deps;
  for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) {
    deps = {b.recv_reduce(*it, partial, out, deps, static_cast<uint32_t>(level(*it)))};
    partial = out;
  }
  OpIndex up = 0;
  if (node.parent >= 0) up = b.send(node.parent, partial, deps, static_cast<uint32_t>(level(r)));

  // Phase 2: Broadcast. The result overwrites what the up send read (the
  // fold, or in place the input), so the receive waits for it.
  std::vector<OpIndex> have = deps;  // the root: after its last fold
  if (node.parent >= 0)
    have = {b.recv(node.parent, out, {up}, static_cast<uint32_t>(rounds + rounds - 1 - level(r)))};
  for (int child : node.children)
    b.send(child, out, have, static_cast<uint32_t>(rounds + rounds - 1 - level(child)));
  return std::move(b).finish();
}

}  // namespace chorus
