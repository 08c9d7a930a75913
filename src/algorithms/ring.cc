// Ring algorithms on the ring 0 -> 1 -> ... -> N-1 -> 0 (Patarasuk & Yuan).
//
// Every rank sends only to its right neighbour (r+1) and receives only from its
// left neighbour (r-1), so on any topology that contains the ring every link
// carries one message per step. Two phases, each a function below, make all
// three collectives:
//
//   ReduceScatter phase, step s = 0..N-2: send the partial sum of block
//     (r-1-s) to r+1, receive the partial sum of block (r-2-s) from r-1 and
//     fold the own contribution into it. The last step lands block r, reduced
//     over all ranks.
//   AllGather phase, step s = 0..N-2: send block (r-s) to r+1, receive block
//     (r-1-s) from r-1 and keep it. After N-1 steps every rank holds every
//     block.
//
//   AllReduce = ReduceScatter phase + AllGather phase over the vector cut into
//   N chunks (the shared block() split; uneven sizes differ by at most one
//   element), partial sums kept in the Output.
//
//   N = 4, ReduceScatter step 0           block owned after ReduceScatter
//     r0 --b3--> r1 --b0--> r2              r0: b0   r1: b1   r2: b2   r3: b3
//     ^                      |
//     +---b2---- r3 <--b1----+
//
//   AllReduce:     2(N-1) steps; sends and receives 2 (N-1)/N M per rank;
//                  2(N-1) alpha + 2 (N-1)/N M/beta + (N-1)/N M gamma
//   AllGather:     (send_count c per rank, M = N c output bytes) the own block
//                  copied into place, then the AllGather phase;
//                  (N-1) alpha + (N-1)/N M/beta
//   ReduceScatter: (recv_count c per rank, M = N c input bytes) the phase with
//                  partial sums rotating through two scratch blocks;
//                  (N-1) alpha + (N-1)/N M/beta + (N-1)/N M gamma
//
// Cost: every step is one message of M/N bytes to the right neighbour that
// waits for the previous step's receive, so steps never overlap and no port
// carries two messages at once: each step costs alpha + (M/N)/beta (+ gamma M/N
// reducing). Exact on a switch and on a ring, with 1 or 2 ports.
//
// Constraints: none (any N >= 1, any count >= 0).
#include "algorithms/algorithm.h"

#include "schedule/chunking.h"
#include "schedule/rank_math.h"

#include <functional>

namespace chorus {
namespace {

using B = ProgramBuilder;

// Where block k lives, for the phases.
using BlockRegion = std::function<Region(int block)>;

struct ReduceScatterPhase {
  BlockRegion input;  // the own contribution to block k
  // Where the partial sum of block k received at step s goes; the last step's
  // is the result.
  std::function<Region(int block, int step)> partial;
  // Whether partial() reuses memory across steps, so that a receive must wait
  // for the send that read the same memory the step before.
  bool partials_reused = false;
  uint32_t first_step = 0;
};
struct ReduceScatterResult {
  std::vector<OpIndex> sends;  // sends[s]: the send of step s
  OpIndex last = 0;            // the receive that lands the own block
};

ReduceScatterResult reduce_scatter_phase(ProgramBuilder& b, int r, int n,
                                         const ReduceScatterPhase& p) {
  const int right = ring_add(r, 1, n);
  const int left = ring_add(r, -1, n);
  auto block = [&](int k) { return ring_add(0, k, n); };
  ReduceScatterResult out;
  OpIndex prev_recv = 0;
  for (int s = 0; s < n - 1; ++s) {
    const uint32_t step = p.first_step + static_cast<uint32_t>(s);
    // The first send reads the own contribution; later ones forward the
    // partial sum the previous step produced.
    const OpIndex snd = s == 0
                            ? b.send(right, p.input(block(r - 1)), {}, step)
                            : b.send(right, p.partial(block(r - 1 - s), s - 1), {prev_recv}, step);
    const int k = block(r - 2 - s);
    std::vector<OpIndex> deps;
    if (p.partials_reused && s >= 2 && s != n - 2) deps.push_back(out.sends.back());
    prev_recv = b.recv_reduce(left, p.input(k), p.partial(k, s), std::move(deps), step);
    out.sends.push_back(snd);
  }
  out.last = prev_recv;
  return out;
}

struct AllGatherPhase {
  BlockRegion output;  // where block k ends up
  Region first_send;   // the own block, as it is first sent
  std::vector<OpIndex> first_send_deps;
  // Extra deps of the receive of step s (it overwrites output(r-1-s)).
  std::function<std::vector<OpIndex>(int step)> receive_deps;
  uint32_t first_step = 0;
};

void allgather_phase(ProgramBuilder& b, int r, int n, const AllGatherPhase& p) {
  const int right = ring_add(r, 1, n);
  const int left = ring_add(r, -1, n);
  auto block = [&](int k) { return ring_add(0, k, n); };
  OpIndex last = 0;
  for (int s = 0; s < n - 1; ++s) {
    const uint32_t step = p.first_step + static_cast<uint32_t>(s);
    if (s == 0)
      b.send(right, p.first_send, p.first_send_deps, step);
    else
      b.send(right, p.output(block(r - s)), {last}, step);
    last = b.recv(left, p.output(block(r - 1 - s)),
                  p.receive_deps ? p.receive_deps(s) : std::vector<OpIndex>{}, step);
  }
}

Program build_ring_allreduce(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  ProgramBuilder b(buffer_counts(spec));
  auto chunk = [&](int k) {
    return block(spec.count, static_cast<size_t>(n), static_cast<size_t>(k));
  };
  auto in = [&](int k) { return B::input(chunk(k).offset, chunk(k).count); };
  auto out = [&](int k) { return B::output(chunk(k).offset, chunk(k).count); };
  // Partial sums live in the Output, each block in its own place.
  const ReduceScatterResult rs =
      reduce_scatter_phase(b, r, n, {in, [&](int k, int) { return out(k); }, false, 0});
  // Receiving block (r-1-s) overwrites the memory the ReduceScatter send of
  // step s read (for s == 0 the input block, the same memory in place).
  allgather_phase(b, r, n,
                  {out,
                   out(r),
                   {rs.last},
                   [&](int s) { return std::vector<OpIndex>{rs.sends[static_cast<size_t>(s)]}; },
                   static_cast<uint32_t>(n - 1)});
  return std::move(b).finish();
}

Program build_ring_allgather(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  auto out = [&](int k) { return B::output(static_cast<size_t>(k) * c, c); };
  b.copy(B::input(0, c), out(r));  // own block into place (a no-op in place)
  allgather_phase(b, r, n, {out, B::input(0, c), {}, nullptr, 0});
  return std::move(b).finish();
}

Program build_ring_reduce_scatter(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  // Partial sums alternate between two scratch blocks; the last lands in the
  // Output.
  const size_t scratch[2] = {b.alloc_scratch(n > 2 ? c : 0), b.alloc_scratch(n > 3 ? c : 0)};
  auto partial = [&](int, int s) {
    return s == n - 2 ? B::output(0, c) : B::scratch(scratch[s % 2], c);
  };
  reduce_scatter_phase(
      b, r, n, {[&](int k) { return B::input(static_cast<size_t>(k) * c, c); }, partial, true, 0});
  return std::move(b).finish();
}

// Rank r does what rank 0 does with every rank number shifted by r: the same
// ops, steps and deps, with blocks (r + k) for k. Where the blocks are of one
// size (AllReduce: count a multiple of N; AllGather and ReduceScatter
// always), so are the messages, and rank 0's Program renamed stands for
// every rank's.
RankClass ring_allreduce_class(const CollectiveSpec& spec) {
  if (spec.count % static_cast<size_t>(spec.nranks) != 0) return {};
  return {0, RankClass::Rename::rotate};
}
RankClass ring_block_class(const CollectiveSpec&) {
  return {0, RankClass::Rename::rotate};
}

Prediction ring_allreduce_time(int n, double m, const CostParams& p) {
  const double steps = n - 1;
  const double chunk = m / n;
  return Prediction::time(2 * steps * (p.alpha + chunk / p.beta) + steps * chunk * p.gamma);
}

Prediction ring_allgather_time(int n, double m, const CostParams& p) {
  return Prediction::time((n - 1) * (p.alpha + m / n / p.beta));
}

Prediction ring_reduce_scatter_time(int n, double m, const CostParams& p) {
  const double chunk = m / n;
  return Prediction::time((n - 1) * (p.alpha + chunk / p.beta + chunk * p.gamma));
}

constexpr ClosedForm kAllreduceCost[] = {
    {ring_allreduce_time, 0, "switch ring", "2(N-1) alpha + 2 (N-1)/N M/beta + (N-1)/N M gamma"}};
constexpr ClosedForm kAllgatherCost[] = {
    {ring_allgather_time, 0, "switch ring", "(N-1) alpha + (N-1)/N M/beta"}};
constexpr ClosedForm kReduceScatterCost[] = {
    {ring_reduce_scatter_time, 0, "switch ring", "(N-1) alpha + (N-1)/N M/beta + (N-1)/N M gamma"}};

}  // namespace

extern const Algorithm kRingAllreduce{Collective::allreduce,
                                      "ring",
                                      "ReduceScatter + AllGather around the ring",
                                      build_ring_allreduce,
                                      nullptr,
                                      kAllreduceCost,
                                      "any N",
                                      ring_allreduce_class};
extern const Algorithm kRingAllgather{Collective::allgather,
                                      "ring",
                                      "N-1 steps passing blocks around the ring",
                                      build_ring_allgather,
                                      nullptr,
                                      kAllgatherCost,
                                      "any N",
                                      ring_block_class};
extern const Algorithm kRingReduceScatter{Collective::reduce_scatter,
                                          "ring",
                                          "N-1 steps reducing partial sums around the ring",
                                          build_ring_reduce_scatter,
                                          nullptr,
                                          kReduceScatterCost,
                                          "any N",
                                          ring_block_class};

}  // namespace chorus
