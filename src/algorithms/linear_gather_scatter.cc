// Linear Gather and Scatter: the root talks to every other rank directly.
//
// Gather: every rank but the root sends its c elements to the root, all at
// once; the root copies its own block into place and receives block j from
// rank j into Output block j. Scatter is the mirror: the root sends Input
// block j to rank j, every other rank receives straight into its Output.
//
//   N = 4, root 0, Gather (one round):     Scatter (one round):
//     1 -> 0, 2 -> 0, 3 -> 0                 0 -> 1, 0 -> 2, 0 -> 3
//
//   rounds:         1
//   bytes per rank: the root receives (Gather) or sends (Scatter) (N-1)/N M,
//                   every other rank M/N (M = N c elements: the root's buffer)
//   cost:           alpha + ceil((N-1)/d) M/(N beta) with d ports: the
//                   messages' latencies overlap and their bytes queue at the
//                   root's port. One alpha, so it wins for small blocks; the
//                   root's port carries everything, as in any Gather.
//
// Constraints: none (any N >= 1, any count >= 0, any root). In place
// (MPI_IN_PLACE on the root): Gather's Input is the root's own block of
// Output, Scatter's Output the root's own block of Input; the root's copy is
// then a no-op.
#include "algorithms/algorithm.h"

#include <cmath>

namespace chorus {
namespace {

using B = ProgramBuilder;

Program build_linear_gather(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  if (spec.rank != spec.root) {
    b.send(spec.root, B::input(0, c));
    return std::move(b).finish();
  }
  for (int j = 0; j < spec.nranks; ++j) {
    const Region block = B::output(static_cast<size_t>(j) * c, c);
    if (j == spec.root)
      b.copy(B::input(0, c), block);
    else
      b.recv(j, block);
  }
  return std::move(b).finish();
}

Program build_linear_scatter(const CollectiveSpec& spec) {
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  if (spec.rank != spec.root) {
    b.recv(spec.root, B::output(0, c));
    return std::move(b).finish();
  }
  for (int j = 0; j < spec.nranks; ++j) {
    const Region block = B::input(static_cast<size_t>(j) * c, c);
    if (j == spec.root)
      b.copy(block, B::output(0, c));
    else
      b.send(j, block);
  }
  return std::move(b).finish();
}

// M is the root's buffer (N blocks); the N-1 messages of M/N queue at the
// root's d ports after one overlapped latency.
Prediction linear_time(int n, double m, const CostParams& p) {
  const double rounds = std::ceil(static_cast<double>(n - 1) / p.ports);
  return Prediction::time(p.alpha + rounds * m / n / p.beta);
}

constexpr ClosedForm kCost[] = {{linear_time, 0, "switch", "alpha + ceil((N-1)/d) M/(N beta)"}};

}  // namespace

extern const Algorithm kLinearGather{
    Collective::gather,  "linear", "every rank sends its block to the root at once",
    build_linear_gather, nullptr,  kCost,
    "any N, any root"};
extern const Algorithm kLinearScatter{
    Collective::scatter,  "linear", "the root sends each rank its block at once",
    build_linear_scatter, nullptr,  kCost,
    "any N, any root"};

}  // namespace chorus
