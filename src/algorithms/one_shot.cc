// One-shot AllReduce over shared windows: every rank reads every peer's whole
// input in place and reduces it itself. One round: latency-optimal for small
// messages, and it moves (N-1) M per rank, so it loses to two-shot and the
// rings once M/beta outweighs alpha.
//
//   1. Staging (user buffers): copy Input into the staging window; signal
//      kReady to every peer. (Buffers in windows: signal kReady at once.)
//   2. For q = 0 .. N-1, in rank order: wait for q's kReady, then fold q's
//      input into the accumulator (the own input for q = r). The same order
//      on every rank, so that every rank computes bit-identical results.
//   3. kDone to every peer, and wait for theirs (one_sided.h). With buffers
//      in windows the accumulator is scratch, copied into Output only then:
//      in place, Output is the Input that peers are still reading.
//
//   N = 3, rank 1:     r0.in ----get----+
//                      r1.in ---reduce--+--> acc --> Output
//                      r2.in ----get----+
//
// Per rank: reads (N-1) M from peers, writes M; N - 1 reductions of M.
// Cost (switch, 1 or 2 ports: the gets run one after another; a get is a
// transfer from the peer at alpha + bytes/beta on the reader's receive port
// only, a signal arrives after alpha and holds no port):
//   2 alpha + (N-1) (alpha + M/beta + M gamma)
// (kReady's alpha, N-1 gets each followed by its reduction, kDone's alpha.)
//
// Constraints: shared windows (every rank on one host over shm or inproc).
#include "algorithms/algorithm.h"
#include "algorithms/one_sided.h"

namespace chorus {
namespace {

using B = ProgramBuilder;
using namespace one_sided;

Program build_one_shot_allreduce(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t m = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const bool in_windows = spec.window_buffers;
  // Staged: peers read the copy in the window, and the own contribution is
  // read from there too (in place, Output overwrites Input as it fills).
  const Opening opening = open(b, spec, m);
  const std::vector<OpIndex>& staged = opening.staged;
  const std::vector<OpIndex>& ready = opening.ready;
  const Region own = opening.staging() ? B::window(opening.at, m) : B::input(0, m);
  const Region acc = in_windows ? B::scratch(b.alloc_scratch(m), m) : B::output(0, m);
  OpIndex last = 0;
  for (int q = 0; q < n; ++q) {
    std::vector<OpIndex> deps = staged;
    if (q > 0) deps = {last};
    if (q != r) deps.push_back(ready[static_cast<size_t>(q)]);
    const uint32_t step = 1;
    if (q == 0)
      last = q == r ? b.copy(own, acc, deps, step) : b.get(q, B::input(0, m), acc, deps, step);
    else
      last = q == r ? b.reduce(own, acc, deps, step)
                    : b.get_reduce(q, B::input(0, m), acc, acc, deps, step);
  }
  std::vector<OpIndex> done = close(b, r, n, {last}, 2);
  if (in_windows) {
    done.push_back(last);
    b.copy(acc, B::output(0, m), done, 2);
  }
  return std::move(b).finish();
}

Prediction one_shot_time(int n, double m, const CostParams& p) {
  return Prediction::time(2 * p.alpha + (n - 1) * (p.alpha + m / p.beta + m * p.gamma));
}

constexpr ClosedForm kAllreduceCost[] = {
    {one_shot_time, 0, "switch", "2 alpha + (N-1) (alpha + M/beta + M gamma)"}};

}  // namespace

extern const Algorithm kOneShotAllreduce{Collective::allreduce,
                                         "one_shot",
                                         "every rank reads all peers' inputs from shared windows",
                                         build_one_shot_allreduce,
                                         needs_windows,
                                         kAllreduceCost,
                                         "shared windows (one host, shm or inproc)"};

}  // namespace chorus
