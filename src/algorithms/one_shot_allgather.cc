// One-shot AllGather over shared windows: every rank reads every peer's block
// in place, straight into its Output. One round and no intermediate copy:
// a block crosses memory once (the peer's Input to this rank's Output),
// where the ring passes it through a slot and N-1 hops.
//
//   1. Staging (user buffers): copy Input into the staging window; signal
//      kReady to every peer. (Buffers in windows: signal kReady at once.)
//   2. Output block r = own Input (in place the same memory: nothing to do);
//      for every peer q, after q's kReady: Output block q = q's Input.
//   3. kDone to every peer, and wait for theirs (one_sided.h).
//
//   N = 3, rank 1:   r0.in --get--> out[0]
//                    r1.in --copy-> out[1]
//                    r2.in --get--> out[2]
//
// Per rank: reads (N-1)/N M from peers (M = the gathered output).
// Cost (switch, d ports; the N-1 reads requested together, so that their
// alphas overlap and d of them share the reader's receive ports at a time):
//   3 alpha + ceil((N-1)/d) M/(N beta)
//
// Constraints: shared windows (every rank on one host over shm or inproc).
#include "algorithms/algorithm.h"
#include "algorithms/one_sided.h"

#include <cmath>

namespace chorus {
namespace {

using B = ProgramBuilder;
using namespace one_sided;

Program build_one_shot_allgather(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const std::vector<OpIndex> ready = open(b, spec, c).ready;
  std::vector<OpIndex> reads{
      b.copy(B::input(0, c), B::output(static_cast<size_t>(r) * c, c), {}, 1)};
  for (int k = 1; k < n; ++k) {
    const int q = (r + k) % n;
    reads.push_back(b.get(q, B::input(0, c), B::output(static_cast<size_t>(q) * c, c),
                          {ready[static_cast<size_t>(q)]}, 1));
  }
  close(b, r, n, reads, 2);
  return std::move(b).finish();
}

Prediction one_shot_allgather_time(int n, double m, const CostParams& p) {
  const double rounds = std::ceil(static_cast<double>(n - 1) / p.ports);
  return Prediction::time(3 * p.alpha + rounds * m / n / p.beta);
}

constexpr ClosedForm kAllgatherCost[] = {
    {one_shot_allgather_time, 0, "switch", "3 alpha + ceil((N-1)/d) M/(N beta)"}};

}  // namespace

extern const Algorithm kOneShotAllgather{Collective::allgather,
                                         "one_shot",
                                         "every rank reads all peers' blocks from shared windows",
                                         build_one_shot_allgather,
                                         needs_windows,
                                         kAllgatherCost,
                                         "shared windows (one host, shm or inproc)"};

}  // namespace chorus
