// Two-shot AllReduce over shared windows: a ReduceScatter in which rank r
// reads block r of every peer's input in place and reduces it, then an
// AllGather in which every rank reads every peer's reduced block. Each rank
// moves 2 (N-1)/N M, as the ring does, in two rounds instead of 2 (N-1).
//
//   1. Staging (user buffers): copy Input into the staging window; signal
//      kReady. (Buffers in windows: signal kReady at once.)
//   2. For every peer q in turn, after q's kReady: Output block r = (own
//      Input block r for the first, else Output block r) (+) q's Input
//      block r.
//      Staged, the reduced block is copied to the window over the own staged
//      block r (which no peer reads); then kReduced to every peer.
//   3. For every peer q, after q's kReduced: Output block q = q's reduced
//      block (its Output, or where it staged it).
//   4. kDone to every peer, and wait for theirs (one_sided.h).
//
//   In place with buffers in windows, Output block q aliases Input block q,
//   which only q reads, in step 2, before it raises kReduced: step 3 writes
//   it only after that.
//
//   N = 3               step 2 (rank r reads block r)     step 3
//     r0: [a0 a1 a2]    r0: a0+b0+c0                      every rank:
//     r1: [b0 b1 b2]    r1: a1+b1+c1                      [s0 s1 s2]
//     r2: [c0 c1 c2]    r2: a2+b2+c2
//
// Per rank: reads 2 (N-1)/N M from peers; (N-1)/N M reduced.
// Cost (switch, d ports, even blocks; gets as in one_shot.cc, the reads of
// step 3 issued together, so that their alphas overlap and d of them share
// the reader's ports at a time):
//   4 alpha + (N-1) (alpha + M/(N beta) + M gamma / N) + ceil((N-1)/d) M/(N beta)
// (kReady's alpha, step 2's N-1 gets one after another, kReduced's alpha,
// step 3's alpha and its N-1 blocks, kDone's alpha.)
//
// Constraints: shared windows (every rank on one host over shm or inproc).
#include "algorithms/algorithm.h"
#include "algorithms/one_sided.h"
#include "schedule/chunking.h"

namespace chorus {
namespace {

using B = ProgramBuilder;
using namespace one_sided;

Region slice(BufferKind kind, const Chunk& c) {
  return {kind, c.offset, c.count};
}

Program build_two_shot_allreduce(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t m = spec.count;
  const size_t parts = static_cast<size_t>(n);
  ProgramBuilder b(buffer_counts(spec));
  const bool in_windows = spec.window_buffers;
  const Opening opening = open(b, spec, m);
  const std::vector<OpIndex>& staged = opening.staged;
  const std::vector<OpIndex>& ready = opening.ready;
  const size_t at = opening.at;
  // Each rank's reduced block replaces its own staged block.
  if (!in_windows) b.stage_output_at(at);

  const Chunk mine = block(m, parts, static_cast<size_t>(r));
  const Region out_mine = slice(BufferKind::output, mine);
  // The first fold reads the own block from Input: no copy of it into
  // Output first (in place the two are the same memory anyway).
  OpIndex last = 0;
  for (int k = 1; k < n; ++k) {
    const int q = (r + k) % n;
    std::vector<OpIndex> deps = k == 1 ? staged : std::vector<OpIndex>{last};
    deps.push_back(ready[static_cast<size_t>(q)]);
    last = b.get_reduce(q, slice(BufferKind::input, mine),
                        k == 1 ? slice(BufferKind::input, mine) : out_mine, out_mine, deps, 1);
  }
  std::vector<OpIndex> reduced_deps{last};
  if (!in_windows)
    reduced_deps = {b.copy(out_mine, B::window(at + mine.offset, mine.count), {last}, 1)};
  signal_all(b, r, n, kReduced, reduced_deps, 1);
  const std::vector<OpIndex> reduced = wait_all(b, r, n, kReduced, 2);

  std::vector<OpIndex> reads{last};
  for (int k = 1; k < n; ++k) {
    const int q = (r + k) % n;
    const Chunk theirs = block(m, parts, static_cast<size_t>(q));
    reads.push_back(b.get(q, slice(BufferKind::output, theirs), slice(BufferKind::output, theirs),
                          {reduced[static_cast<size_t>(q)]}, 2));
  }
  close(b, r, n, reads, 3);
  return std::move(b).finish();
}

Prediction two_shot_time(int n, double m, const CostParams& p) {
  const double block = m / n;
  const int d = p.ports > 1 ? p.ports : 1;
  const int rounds = (n - 1 + d - 1) / d;  // step 3's reads, d at a time
  return Prediction::time(4 * p.alpha + (n - 1) * (p.alpha + block / p.beta + block * p.gamma) +
                          rounds * block / p.beta);
}

constexpr ClosedForm kAllreduceCost[] = {
    {two_shot_time, 0, "switch",
     "4 alpha + (N-1) (alpha + M/(N beta) + M gamma / N) + ceil((N-1)/d) M/(N beta)"}};

}  // namespace

extern const Algorithm kTwoShotAllreduce{
    Collective::allreduce,
    "two_shot",
    "ReduceScatter then AllGather, each rank reading peers' blocks from shared windows",
    build_two_shot_allreduce,
    needs_windows,
    kAllreduceCost,
    "shared windows (one host, shm or inproc)"};

}  // namespace chorus
