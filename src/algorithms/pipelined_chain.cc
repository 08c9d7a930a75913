// Pipelined chain Broadcast and Reduce.
//
// The ranks form a chain in ring order from the root: position i = (rank -
// root) mod N. The vector is cut into S segments (spec.segment_bytes,
// kDefaultSegmentBytes by default).
// Broadcast: segment s leaves position i for i+1 at time s + i; each
// position forwards a segment as soon as it has it.
// Reduce: the chain runs the other way. Position N-1 sends its input
// segment; position i folds segment s arriving from i+1 into its own and
// sends the partial sum to i-1 at time s + (N-1-i); the root folds the last
// one into its output.
//
//   N = 4, root 0, Broadcast of 3 segments:
//     time 0: 0 -s0-> 1
//     time 1: 0 -s1-> 1 -s0-> 2
//     time 2: 0 -s2-> 1 -s1-> 2 -s0-> 3
//     time 3:         1 -s2-> 2 -s1-> 3
//     time 4:                 2 -s2-> 3
//
//   steps:          N - 2 + S
//   messages:       S sent per rank (none at the chain's end), S received
//                   (none at its start)
//   bytes per rank: M sent, M received
//   cost:           segments of s bytes, S = ceil(M/s): in lock-step rounds
//                   (N - 2 + S) (alpha + s/beta); with alpha as a latency that
//                   overlaps the next segment's transfer, (N-1) alpha + M/beta
//                   + (N-2) s/beta, so ~ (N-1) alpha + M/beta for S >> N.
//                   Reduce adds (N-1) s gamma (lock-step: (N-2+S) s gamma).
//   scratch:        Reduce off the root: M for the partial sums (the output
//                   of a non-root rank is not written)
//
// Broadcast never reads the input of a non-root rank; Reduce never writes the
// output of a non-root rank.
//
// Constraints: none (any N >= 1, any count >= 0, any root).
#include "algorithms/algorithm.h"

#include "schedule/chunking.h"
#include "schedule/rank_math.h"

#include <algorithm>
#include <cmath>

namespace chorus {
namespace {
using B = ProgramBuilder;

size_t segment_length(const CollectiveSpec& spec) {
  return segment_elements(spec.segment_bytes, spec.elem_size, kDefaultSegmentBytes);
}

Program build_pipelined_chain_broadcast(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  ProgramBuilder b(buffer_counts(spec));
  const int pos = ring_add(r, -spec.root, n);
  const std::vector<Chunk> segs = segments({0, spec.count}, segment_length(spec));
  const int next = pos < n - 1 ? ring_add(r, 1, n) : -1;
  const int prev = pos > 0 ? ring_add(r, -1, n) : -1;
  if (pos == 0) {
    // The root: its own output (a no-op in place), and every segment down
    // the chain straight from the input.
    b.copy(B::input(0, spec.count), B::output(0, spec.count));
    if (next >= 0)
      for (size_t s = 0; s < segs.size(); ++s)
        b.send(next, B::input(segs[s].offset, segs[s].count), {}, static_cast<uint32_t>(s));
    return std::move(b).finish();
  }
  // Every other position: receive a segment, pass it on.
  for (size_t s = 0; s < segs.size(); ++s) {
    const Region seg = B::output(segs[s].offset, segs[s].count);
    const auto time = static_cast<uint32_t>(s) + static_cast<uint32_t>(pos);
    const OpIndex got = b.recv(prev, seg, {}, time - 1);
    if (next >= 0) b.send(next, seg, {got}, time);
  }
  return std::move(b).finish();
}

Program build_pipelined_chain_reduce(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  ProgramBuilder b(buffer_counts(spec));
  const int pos = ring_add(r, -spec.root, n);
  const std::vector<Chunk> segs = segments({0, spec.count}, segment_length(spec));
  const int upstream = pos < n - 1 ? ring_add(r, 1, n) : -1;  // sends to us
  const int downstream = pos > 0 ? ring_add(r, -1, n) : -1;   // towards the root
  // Partial sums: the output at the root (in place the fold reads and writes
  // the same memory), scratch elsewhere. The chain's end folds nothing.
  const bool folds = upstream >= 0;
  const size_t acc_at = pos > 0 && folds ? b.alloc_scratch(spec.count) : 0;
  auto acc = [&](Chunk c) {
    return pos == 0 ? B::output(c.offset, c.count) : B::scratch(acc_at + c.offset, c.count);
  };
  for (size_t s = 0; s < segs.size(); ++s) {
    const Chunk c = segs[s];
    const Region own = B::input(c.offset, c.count);
    const auto time = static_cast<uint32_t>(s) + static_cast<uint32_t>(n - 1 - pos);
    if (!folds) {
      b.send(downstream, own, {}, time);
      continue;
    }
    const OpIndex folded = b.recv_reduce(upstream, own, acc(c), {}, time - 1);
    if (downstream >= 0) b.send(downstream, acc(c), {folded}, time);
  }
  return std::move(b).finish();
}

// Segments of s_i bytes (all of the segment size but the last, which may be
// shorter), g_i = s_i/beta. Position j (0 = root) has segment i at
//   t(j, i) = max(t(j-1, i) + alpha, t(j, i-1)) + g_i,   t(0, i) = 0
// (the link into j is busy with segment i-1 until t(j, i-1)). Unrolled, t is
// the heaviest monotone path through the (position, segment) grid: every
// position step adds alpha, every cell g_i. The heaviest path takes all its
// position steps at a full segment, so at the chain's end, with g = s_max/beta:
//   T = (N-1) alpha + M/beta + (N-2) g
// = (N-1) alpha + (N+S-2) s/beta for S equal segments of s bytes. Reduce
// folds each segment (gamma s_i) before passing it on; with S equal segments
// that adds (N-1) gamma s.
// The seed-style count of (N-2+S) steps of alpha + s/beta charges alpha per
// step; here alpha is latency and overlaps with the next segment's transfer.
struct Segments {
  double count, max, last;
};
Segments segments_of(double m, const CostParams& p) {
  const double seg = static_cast<double>(p.segment_bytes ? p.segment_bytes : kDefaultSegmentBytes);
  const double count = std::max(1.0, std::ceil(m / seg));
  return {count, std::min(seg, m), m - (count - 1) * seg};
}

Prediction chain_broadcast_time(int n, double m, const CostParams& p) {
  const Segments sg = segments_of(m, p);
  return Prediction::time((n - 1) * p.alpha + m / p.beta + (n - 2) * sg.max / p.beta);
}

Prediction chain_reduce_time(int n, double m, const CostParams& p) {
  const Segments sg = segments_of(m, p);
  if (sg.last != sg.max)
    return Prediction::none(
        "pipelined_chain reduce has a closed form for equal segments only (M a multiple of "
        "the segment, or M below it): a short last segment changes which path is heaviest");
  return Prediction::time((n - 1) * p.alpha + m / p.beta + (n - 2) * sg.max / p.beta +
                          (n - 1) * p.gamma * sg.max);
}

constexpr ClosedForm kBroadcastCost[] = {
    {chain_broadcast_time, 1, "switch ring",
     "(N-1) alpha + M/beta + (N-2) s/beta, segments of s bytes"}};
constexpr ClosedForm kReduceCost[] = {
    {chain_reduce_time, 1, "switch ring",
     "(N-1) (alpha + gamma s) + M/beta + (N-2) s/beta, S equal segments of s bytes"}};

}  // namespace

extern const Algorithm kPipelinedChainBroadcast{Collective::broadcast,
                                                "pipelined_chain",
                                                "segments down the chain from the root",
                                                build_pipelined_chain_broadcast,
                                                nullptr,
                                                kBroadcastCost,
                                                "any N, any root"};
extern const Algorithm kPipelinedChainReduce{Collective::reduce,
                                             "pipelined_chain",
                                             "segments folded along the chain to the root",
                                             build_pipelined_chain_reduce,
                                             nullptr,
                                             kReduceCost,
                                             "any N, any root"};

}  // namespace chorus
