// Broadcast = binomial scatter + ring AllGather (van de Geijn), for large
// messages.
//
// Ranks are numbered relative to the root, v = (rank - root) mod N, and the
// vector is cut into N blocks (block(); uneven sizes differ by one element),
// block v for relative rank v.
// Scatter: down the binomial tree (rank_math.h: binomial_node), every rank
// receives from its parent, in one message, the blocks of its whole subtree:
// relative ranks [v, v + binomial_subtree_size(v)), a contiguous run of
// blocks; it passes each child the run of the child's subtree.
// AllGather: N-1 ring steps in relative order. In step s rank v sends block
// v - s to v + 1 and receives block v - 1 - s from v - 1. The root already
// holds everything: it receives nothing and sends straight from its input, so
// the last rank (v = N-1) sends nothing.
//
//   N = 4, scatter:  round 0: 0 -[2,3]-> 2      round 1: 0 -[1]-> 1, 2 -[3]-> 3
//          ring:     0 -> 1 -> 2 -> 3   (3 does not send back to 0)
//
//   steps:          ceil(log2 N) + N - 1
//   messages:       scatter: one received (not the root), one per child
//                   sent; ring: N-1 sent (none at v = N-1), N-1 received (none
//                   at the root)
//   bytes per rank: the root sends (N-1)/N M in the scatter and (N-1)/N M in
//                   the ring; others receive their subtree's blocks and
//                   (N-1)/N M in the ring, and send at most as much
//   cost:           (ceil(log2 N) + N - 1) alpha + 2 (N-1)/N M/beta for
//                   blocks of M/N bytes (ceil(count/N) elements at most)
//
// Broadcast never reads the input of a non-root rank.
//
// Constraints: none (any N >= 1, any count >= 0, any root).
#include "algorithms/algorithm.h"

#include "schedule/chunking.h"
#include "schedule/rank_math.h"

#include <bit>

namespace chorus {
namespace {

Program build_scatter_allgather_broadcast(const CollectiveSpec& spec) {
  using B = ProgramBuilder;
  const int n = spec.nranks;
  const int r = spec.rank;
  const auto parts = static_cast<size_t>(n);
  ProgramBuilder b(buffer_counts(spec));
  const bool is_root = r == spec.root;
  if (is_root) b.copy(B::input(0, spec.count), B::output(0, spec.count));  // no-op in place
  const int v = ring_add(r, -spec.root, n);
  auto run = [&](BufferKind buf, int first, int m) {
    const Chunk c =
        block_range(spec.count, parts, static_cast<size_t>(first), static_cast<size_t>(m));
    return Region{buf, c.offset, c.count};
  };
  // The root reads its input, everyone else what it received.
  const BufferKind from = is_root ? BufferKind::input : BufferKind::output;
  const int rounds = ceil_log2(n);
  // Round of the scatter message from relative rank w's parent to w: the
  // root's largest subtree first (binomial_node's order).
  auto round_of = [&](int w) {
    return static_cast<uint32_t>(rounds - 1 - std::countr_zero(static_cast<unsigned>(w)));
  };

  // Phase 1: scatter. The children's sends read blocks of the run received.
  const BinomialNode node = binomial_node(r, spec.root, n);
  std::vector<OpIndex> got;  // the receive of the run (empty at the root)
  if (!is_root)
    got = {b.recv(node.parent, run(BufferKind::output, v, binomial_subtree_size(v, n)), {},
                  round_of(v))};
  struct ChildSend {
    int first, size;
    OpIndex op;
  };
  std::vector<ChildSend> child_sends;
  for (int child : node.children) {
    const int cv = ring_add(child, -spec.root, n);
    const int size = binomial_subtree_size(cv, n);
    child_sends.push_back({cv, size, b.send(child, run(from, cv, size), got, round_of(cv))});
  }

  // Phase 2: ring AllGather. A receive of a block of the own subtree
  // overwrites (with the same values) what the scatter send to a child read,
  // so it waits for that send; blocks outside the subtree are written once.
  const int next = v < n - 1 ? ring_add(r, 1, n) : -1;
  const int prev = ring_add(r, -1, n);
  OpIndex last_recv = 0;
  for (int s = 0; s < n - 1; ++s) {
    const uint32_t step = static_cast<uint32_t>(rounds + s);
    if (next >= 0) {
      const int t = ring_add(v, -s, n);
      std::vector<OpIndex> deps;
      if (!is_root) deps = s == 0 ? got : std::vector<OpIndex>{last_recv};
      b.send(next, run(from, t, 1), deps, step);
    }
    if (!is_root) {
      const int t = ring_add(v, -1 - s, n);
      std::vector<OpIndex> deps;
      for (const ChildSend& cs : child_sends)
        if (t >= cs.first && t < cs.first + cs.size) deps.push_back(cs.op);
      last_recv = b.recv(prev, run(BufferKind::output, t, 1), deps, step);
    }
  }
  return std::move(b).finish();
}

}  // namespace

// The binomial scatter's uneven halves and the ring's steps overlap in ways
// no closed form captures: the simulator gives its time.
extern const Algorithm kScatterAllgatherBroadcast{Collective::broadcast,
                                                  "scatter_allgather",
                                                  "binomial scatter + ring AllGather",
                                                  build_scatter_allgather_broadcast,
                                                  nullptr,
                                                  {},
                                                  "any N, any root"};

}  // namespace chorus
