// AllToAll: rank r's input holds N blocks of c elements; block j goes to rank j.
// Afterwards block j of rank r's output is block r of rank j's input. M = N c
// elements of elem_size bytes is the size of one rank's input (and output).
//
// Pairwise exchange. Own block copied locally; then step s = 1..N-1: send
// block (r+s) to rank r+s and receive block (r-s) from rank r-s. Each step's
// send waits for the previous step's receive, so that at most one block per
// peer pair is in flight and every step is one exchange, as in the closed form.
//
//   N = 4, step 1: r -> r+1      step 2: r -> r+2      step 3: r -> r+3
//
//   steps:          N-1
//   bytes per rank: (N-1)/N M sent, the same received
//   cost:           (N-1) alpha + (N-1)/N M / beta   (bandwidth-optimal)
//
// Constraints: none (any N >= 1, any count). No in-place form (MPI's
// MPI_IN_PLACE variant is not offered): input and output must not overlap.
#include "algorithms/algorithm.h"

#include "schedule/rank_math.h"

namespace chorus {
namespace {

Program build_pairwise_alltoall(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  using B = ProgramBuilder;
  ProgramBuilder b(buffer_counts(spec));
  auto blk = [&](long long k) { return static_cast<size_t>(ring_add(0, k, n)) * c; };
  b.copy(B::input(blk(r), c), B::output(blk(r), c), {}, 0);
  std::vector<OpIndex> prev;
  for (int s = 1; s < n; ++s) {
    const auto st = static_cast<uint32_t>(s);
    b.send(ring_add(r, s, n), B::input(blk(r + s), c), prev, st);
    prev = {b.recv(ring_add(r, -s, n), B::output(blk(r - s), c), prev, st)};
  }
  return std::move(b).finish();
}

// N-1 exchanges of one block (M/N bytes), each step's send waiting for the
// previous step's receive.
Prediction pairwise_alltoall_time(int n, double m, const CostParams& p) {
  return Prediction::time((n - 1) * (p.alpha + m / n / p.beta));
}

constexpr ClosedForm kCost[] = {
    {pairwise_alltoall_time, 0, "switch", "(N-1) alpha + (N-1)/N M/beta"}};

}  // namespace

extern const Algorithm kPairwiseAlltoall{
    Collective::alltoall,     "pairwise", "N-1 steps, one block to rank r+s at step s",
    build_pairwise_alltoall,  nullptr,    kCost,
    "any N; no in-place form"};

}  // namespace chorus
