// Dissemination barrier (Hensgen, Finkel & Manber).
//
// Round k = 0..ceil(log2 N)-1: rank r sends an empty message to r + 2^k and
// waits for one from r - 2^k. After round k, rank r has heard (transitively)
// from the 2^(k+1) ranks r - 2^(k+1) + 1 .. r, so after ceil(log2 N) rounds it
// has heard from every rank: nobody leaves before everybody has arrived.
//
//   N = 5:  round 0: r -> r+1    round 1: r -> r+2    round 2: r -> r+4
//
//   steps:          ceil(log2 N)
//   bytes per rank: 0 (ceil(log2 N) empty messages)
//   cost:           ceil(log2 N) alpha, the latency lower bound
//
// Constraints: none.
#include "algorithms/algorithm.h"

#include "schedule/rank_math.h"

namespace chorus {
namespace {

Program build_dissemination_barrier(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  ProgramBuilder b(buffer_counts(spec));
  std::vector<OpIndex> deps;
  for (int k = 0, dist = 1; dist < n; ++k, dist *= 2) {
    const auto st = static_cast<uint32_t>(k);
    b.send(ring_add(r, dist, n), ProgramBuilder::input(0, 0), deps, st);
    deps = {b.recv(ring_add(r, -dist, n), ProgramBuilder::output(0, 0), deps, st)};
  }
  return std::move(b).finish();
}

// ceil(log2 N) rounds of one empty message, each waiting for the previous
// round's receive.
Prediction dissemination_time(int n, double, const CostParams& p) {
  return Prediction::time(ceil_log2(n) * p.alpha);
}

constexpr ClosedForm kCost[] = {{dissemination_time, 0, "switch", "ceil(log2 N) alpha"}};

}  // namespace

extern const Algorithm kDisseminationBarrier{Collective::barrier,
                                             "dissemination",
                                             "ceil(log2 N) rounds of empty messages",
                                             build_dissemination_barrier,
                                             nullptr,
                                             kCost,
                                             "any N"};

}  // namespace chorus
