// Double binary tree AllReduce (Sanders, Speck & Traeff; the NCCL tree).
//
// Two binary trees over the N ranks (rank_math.h: double_tree_node): tree 0
// the in-order tree, tree 1 the same shifted by one rank, so that a rank that
// is interior in one tree is a leaf in the other. The vector is cut in two
// halves (block(count, 2, t)); half t is reduced up tree t to its root and
// broadcast back down. Each half is cut into segments (spec.segment_bytes,
// kDefaultSegmentBytes by default) that follow each other through the tree,
// so that the levels work on different segments at once.
//
//   N = 8     tree 0 (half 0)                 tree 1 (half 1)
//                   7                                 0
//               3       .                         4       .
//             1   5                             2   6
//            0 2 4 6                           1 3 5 7
//   (tree 0: 7 -> {3}, 3 -> {1, 5}, 1 -> {0, 2}, 5 -> {4, 6};
//    tree 1: every rank + 1)
//
// Schedule. With H = floor(log2 N) the height of both trees and h(x) the
// height of node x (0 at the leaves), segment s of a tree moves
//   up   from x to its parent at time s + h(x), after x has folded in the
//        segment from each child (sent at s + h(child) < s + h(x));
//   down from x to each child at time s + 2H + 1 - h(x), after x received
//        it from its parent (at s + 2H + 1 - h(parent), earlier) or, at the
//        root, after the last fold.
// Every rank emits its ops in (time, tree) order, so the messages of every
// channel are in the same order at both ends, every dependency points to an
// earlier time, and the schedule cannot deadlock even with rendezvous sends.
//
// A rank with two children folds the first child's segment into its output
// on arrival and lands the second's in scratch, then adds it locally: the two
// receives run side by side, so a level costs one message time, not two.
//
//   steps (times):  S + 2H + 1 per tree for S segments of its half; the
//                   latency path of one segment is 2H messages at most
//   messages:       per segment and tree: up 1 (not at the root), down one
//                   per child; a rank receives one per child and one from
//                   its parent; 2 (N-1) S per tree in all
//   bytes per rank: at most 4 ceil(M/2) sent (M/2 up in each tree plus 2 M/2
//                   down in the tree where it is interior), as many received
//   cost:           pipelined, segments of m bytes, S = M/(2m) per tree:
//                   (S + 2H) (alpha + m/beta) for one tree on its own links
//                   (~ 2H alpha + M/(2 beta) for S >> H); a link both trees
//                   use in the same direction carries M/2 of each, so with
//                   one port per link about 2H alpha + M/beta, and a rank
//                   with a single port sends up to 2M: 2M/beta. gamma: M/2
//                   folded per child, M gamma at most per rank.
//                   The seed's unpipelined form: 2 log2 N alpha + log2 N M/beta.
//   scratch:        M/2 on a rank with two children in one of the trees
//
// Constraints: none (any N >= 1, any count >= 0; for N = 1 a copy).
#include "algorithms/algorithm.h"

#include "schedule/chunking.h"
#include "schedule/rank_math.h"

#include <algorithm>

namespace chorus {
namespace {

Program build_double_binary_tree_allreduce(const CollectiveSpec& spec) {
  using B = ProgramBuilder;
  const int n = spec.nranks;
  const int r = spec.rank;
  ProgramBuilder b(buffer_counts(spec));
  const size_t seg = segment_elements(spec.segment_bytes, spec.elem_size, kDefaultSegmentBytes);
  const int height = floor_log2(n);  // H: the root's height in both trees
  const int down_base = 2 * height + 1;

  // What this rank is in each tree, and its segments of that tree's half.
  struct TreeState {
    TreeNode node;
    int parent_height = 0;
    std::vector<int> child_height;
    Chunk half;                   // this tree's half of the vector
    std::vector<Chunk> segs;      // its segments
    size_t landing_at = 0;        // scratch for the second child's segments
    std::vector<OpIndex> folded;  // per segment: last fold into the output
    std::vector<bool> has_folded;
    std::vector<OpIndex> up_send;  // per segment
    std::vector<OpIndex> have;     // per segment: the output holds the result
    Region landing(Chunk c) const {
      return B::scratch(landing_at + (c.offset - half.offset), c.count);
    }
  };
  TreeState trees[2];
  int last_time = 0;
  for (int t = 0; t < 2; ++t) {
    TreeState& ts = trees[t];
    ts.node = double_tree_node(t, r, n);
    if (ts.node.parent >= 0) ts.parent_height = double_tree_node(t, ts.node.parent, n).height;
    for (int child : ts.node.children)
      ts.child_height.push_back(double_tree_node(t, child, n).height);
    ts.half = block(spec.count, 2, static_cast<size_t>(t));
    ts.segs = segments(ts.half, seg);
    ts.landing_at = b.alloc_scratch(ts.node.children.size() == 2 ? ts.half.count : 0);
    const size_t ns = ts.segs.size();
    ts.folded.assign(ns, 0);
    ts.has_folded.assign(ns, false);
    ts.up_send.assign(ns, 0);
    ts.have.assign(ns, 0);
    last_time = std::max(last_time, static_cast<int>(ns) - 1 + down_base);
  }
  auto in = [](Chunk c) { return B::input(c.offset, c.count); };
  auto out = [](Chunk c) { return B::output(c.offset, c.count); };

  for (int time = 0; time <= last_time; ++time) {
    const auto step = static_cast<uint32_t>(time);
    for (int t = 0; t < 2; ++t) {
      TreeState& ts = trees[t];
      const auto ns = static_cast<int>(ts.segs.size());
      const TreeNode& node = ts.node;
      const int h = node.height;
      auto seg_at = [&](int s) { return s >= 0 && s < ns; };

      // Reduce up, children. The first child's segment is folded into the
      // output together with the own input (in place the same memory); a
      // second child's lands in scratch meanwhile and is folded in locally
      // once both have arrived, so that neither receive waits for the other.
      for (size_t i = 0; i < node.children.size(); ++i) {
        const int s = time - ts.child_height[i];
        if (!seg_at(s)) continue;
        const auto si = static_cast<size_t>(s);
        const Chunk c = ts.segs[si];
        if (!ts.has_folded[si]) {
          ts.has_folded[si] = true;
          ts.folded[si] = b.recv_reduce(node.children[i], in(c), out(c), {}, step);
        } else {
          const OpIndex landed = b.recv(node.children[i], ts.landing(c), {}, step);
          ts.folded[si] = b.reduce(ts.landing(c), out(c), {ts.folded[si], landed}, step);
        }
      }
      // Reduce up, to the parent: a leaf sends its input, others their fold.
      if (node.parent >= 0 && seg_at(time - h)) {
        const auto si = static_cast<size_t>(time - h);
        const Chunk c = ts.segs[si];
        ts.up_send[si] = node.children.empty() ? b.send(node.parent, in(c), {}, step)
                                               : b.send(node.parent, out(c), {ts.folded[si]}, step);
      }
      // Broadcast down, from the parent: the result overwrites what the up
      // send read (the fold, or in place the input).
      if (node.parent >= 0 && seg_at(time - (down_base - ts.parent_height))) {
        const auto si = static_cast<size_t>(time - (down_base - ts.parent_height));
        ts.have[si] = b.recv(node.parent, out(ts.segs[si]), {ts.up_send[si]}, step);
      }
      // Broadcast down, to the children: at the root the result is the last
      // fold.
      if (!node.children.empty() && seg_at(time - (down_base - h))) {
        const auto si = static_cast<size_t>(time - (down_base - h));
        const OpIndex ready = node.parent >= 0 ? ts.have[si] : ts.folded[si];
        for (int child : node.children) b.send(child, out(ts.segs[si]), {ready}, step);
      }
    }
  }
  return std::move(b).finish();
}

// For N = 2^H ranks, 2 ports and one segment per tree (M/2 up to the segment
// size), each half goes H levels up and H down its tree; the two trees use
// different ports at the ranks where both are active, so a level costs
// alpha + (M/2)/beta and the halves never wait for each other:
//   2H alpha + H M/beta + (2H-1) gamma M/2,
// the seed's 2 log2 N alpha + log2 N M/beta. The gamma term, 2H-1 folds of
// M/2, is the longest chain of folds up a tree (a rank with two children folds
// the second child's half after the first); the simulator confirms the whole
// form for N = 2, 4, ..., 64.
// With 1 port the two trees' messages queue at shared ports; with several
// segments they pipeline; for other N the trees' shapes differ: no form.
Prediction double_binary_tree_time(int n, double m, const CostParams& p) {
  if (!is_pow2(n)) return Prediction::none("double_binary_tree has a closed form for N = 2^k only");
  const double seg = static_cast<double>(p.segment_bytes ? p.segment_bytes : kDefaultSegmentBytes);
  if (m / 2 > seg)
    return Prediction::none(
        "double_binary_tree has a closed form for one segment per tree only (M/2 up to the "
        "segment size); segments pipeline through the levels");
  const double h = floor_log2(n);
  return Prediction::time(2 * h * p.alpha + h * m / p.beta + (2 * h - 1) * p.gamma * m / 2);
}

constexpr ClosedForm kCost[] = {
    {double_binary_tree_time, 2, "switch",
     "2 log2 N alpha + log2 N M/beta + (2 log2 N - 1) gamma M/2, N = 2^k, M/2 <= segment"}};

}  // namespace

extern const Algorithm kDoubleBinaryTreeAllreduce{
    Collective::allreduce,
    "double_binary_tree",
    "two complementary trees, pipelined halves",
    build_double_binary_tree_allreduce,
    nullptr,
    kCost,
    "any N; the trees are complementary for even N (odd N: rank 0 is a leaf in both)"};

}  // namespace chorus
