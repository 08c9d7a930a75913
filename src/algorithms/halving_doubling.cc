// Recursive halving and doubling (Rabenseifner; Thakur, Rabenseifner & Gropp).
//
// The core is P = 2^k = floor_pow2(N) ranks (core index c). With N not a
// power of two, the r = N - P extra ranks first fold their whole input into
// their core partner (rank_math.h: Fold; extra 2i -> core 2i+1) and get the
// result back at the end.
//
// AllReduce (halving_doubling), the vector cut into P blocks (block()):
//   fold      extra -> partner: M; the partner reduces it into its output.
//   halving   step j = 0..k-1, distance d = P / 2^(j+1), partner c ^ d: the
//             window of 2d blocks still held is cut in halves; the rank with
//             bit d clear keeps the lower half, its partner the upper one;
//             each sends the half it gives up and reduces the half it keeps.
//             After k steps core c holds block c fully reduced.
//   doubling  the same steps backwards (d = 1, 2, .., P/2): send the window
//             held, receive the partner's, the window doubles.
//   unfold    partner -> extra: M.
//
//   N = 8, halving pairs:  step 0 (0,4)(1,5)(2,6)(3,7)  M/2
//                          step 1 (0,2)(1,3)(4,6)(5,7)  M/4
//                          step 2 (0,1)(2,3)(4,5)(6,7)  M/8
//   window of rank 5:      [0,8) -> [4,8) -> [4,6) -> [5,6)
//
//   steps:          2k, plus 2 with the fold
//   messages:       core rank 2k sent, 2k received (+1 each way with an extra)
//   bytes per rank: core: 2 (P-1)/P M sent and received; with an extra, M
//                   more each way; an extra sends M and receives M
//   cost:           2k alpha + 2 (P-1)/P M/beta + (P-1)/P M gamma, and with
//                   the fold 2 alpha + 2 M/beta + M gamma more (the seed:
//                   2 log2 N alpha + 2 (N-1)/N M/beta, fold 2 alpha + 2M/beta)
//
// ReduceScatter (recursive_halving), recv_count c per rank, M = N c input
// bytes. Only the halving, on the N blocks of c elements grouped by core
// index: core c answers for the blocks of the ranks it stands for, [2c, 2c+2)
// for c < r (its extra's and its own), [c+r, c+r+1) otherwise
// (fold_block_begin), so a window of core indices is a contiguous run of
// blocks. Extras fold all N c elements into their partner first and receive
// their own block from it last.
//   steps:          k, plus 2 with the fold
//   bytes per rank: core: the halves given up, about (P-1)/P M; with an extra
//                   M more received and c sent; an extra sends M, receives c
//   cost:           k alpha + (P-1)/P M/beta + (P-1)/P M gamma, fold:
//                   2 alpha + (M + c)/beta + M gamma
//
// Constraints: none (any N >= 1, any count >= 0); blocks may be empty when
// count < P.
#include "algorithms/algorithm.h"

#include "core/check.h"
#include "schedule/chunking.h"
#include "schedule/rank_math.h"

namespace chorus {
namespace {

using B = ProgramBuilder;

// A run of core-level blocks [lo, lo + size).
struct Window {
  int lo = 0;
  int size = 0;
};

// The two halves of the window held before halving step with distance d:
// core c keeps the half its bit d selects.
struct Halves {
  Window keep;
  Window give;
};
Halves halve(Window w, int c, int d) {
  const Window lower{w.lo, d};
  const Window upper{w.lo + d, d};
  return (c & d) ? Halves{upper, lower} : Halves{lower, upper};
}

Program build_halving_doubling_allreduce(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t count = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const Region all_in = B::input(0, count);
  const Region all_out = B::output(0, count);
  const Fold f = make_fold(n);
  const int p = f.core;
  const int k = floor_log2(p);
  const auto unfold_step = static_cast<uint32_t>(2 * k + 1);

  // An extra rank only hands its input over and takes the result back. In
  // place the result overwrites the input, so it waits for the send.
  if (f.is_extra(r)) {
    const int partner = f.partner(r);
    const OpIndex s = b.send(partner, all_in, {}, 0);
    b.recv(partner, all_out, {s}, unfold_step);
    return std::move(b).finish();
  }
  const int c = f.core_index(r);
  const int extra = f.partner(r);  // -1 when this core rank has none
  auto window = [&](Window w, BufferKind buf) {
    const Chunk ch = block_range(count, static_cast<size_t>(p), static_cast<size_t>(w.lo),
                                 static_cast<size_t>(w.size));
    return Region{buf, ch.offset, ch.count};
  };

  // Fold: the extra's input is reduced into the output; from then on this
  // rank's data lives in the output. Without an extra the halving reads the
  // input directly (in place that is the output, which is fine: the step
  // writes only the half it keeps and reads the other).
  BufferKind data = BufferKind::input;
  std::vector<OpIndex> after;
  if (extra >= 0) {
    after = {b.recv_reduce(extra, all_in, all_out, {}, 0)};
    data = BufferKind::output;
  }

  // Phase 1: recursive halving. The send of step j reads the half given up,
  // which no later halving step touches; the receive reduces into the half
  // kept, which the previous receive wrote.
  std::vector<Halves> halves;
  std::vector<OpIndex> rs_send;
  Window w{0, p};
  for (int j = 0; j < k; ++j) {
    const int d = p >> (j + 1);
    const int peer = f.core_rank(c ^ d);
    const Halves h = halve(w, c, d);
    const auto step = static_cast<uint32_t>(j + 1);
    rs_send.push_back(b.send(peer, window(h.give, data), after, step));
    after = {
        b.recv_reduce(peer, window(h.keep, data), window(h.keep, BufferKind::output), after, step)};
    data = BufferKind::output;
    halves.push_back(h);
    w = h.keep;
  }

  // Phase 2: recursive doubling, the halving steps in reverse. The window
  // sent was written by the last halving receive and by every doubling
  // receive so far; the half received overwrites what the halving send of
  // the same distance read (in place at j = 0 without a fold: the input).
  std::vector<OpIndex> written = after;
  for (int j = k - 1; j >= 0; --j) {
    const int d = p >> (j + 1);
    const int peer = f.core_rank(c ^ d);
    const Halves& h = halves[static_cast<size_t>(j)];
    const auto step = static_cast<uint32_t>(2 * k - j);
    b.send(peer, window(h.keep, BufferKind::output), written, step);
    written.push_back(
        b.recv(peer, window(h.give, BufferKind::output), {rs_send[static_cast<size_t>(j)]}, step));
  }

  // Unfold: the whole result to the extra.
  if (extra >= 0) b.send(extra, all_out, written, unfold_step);
  return std::move(b).finish();
}

Program build_recursive_halving_reduce_scatter(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  const size_t total = c * static_cast<size_t>(n);
  ProgramBuilder b(buffer_counts(spec));
  const Region own_out = B::output(0, c);
  const Fold f = make_fold(n);
  const int p = f.core;
  const int k = floor_log2(p);
  const auto unfold_step = static_cast<uint32_t>(k + 1);

  // An extra rank folds its whole input into its partner and receives its
  // own block back. In place its output is part of its input, so the receive
  // waits for the send.
  if (f.is_extra(r)) {
    const int partner = f.partner(r);
    const OpIndex s = b.send(partner, B::input(0, total), {}, 0);
    b.recv(partner, own_out, {s}, unfold_step);
    return std::move(b).finish();
  }
  const int core = f.core_index(r);
  const int extra = f.partner(r);
  // Element range of a window of core indices (see fold_block_begin).
  auto elems = [&](Window w) {
    const auto lo = static_cast<size_t>(fold_block_begin(f, w.lo)) * c;
    const auto hi = static_cast<size_t>(fold_block_begin(f, w.lo + w.size)) * c;
    return Chunk{lo, hi - lo};
  };

  // Partial sums go to scratch, which shadows the part of the input still
  // being reduced: all of it when an extra folds in, else the half kept in
  // the first step (the windows only shrink inside it). Without an extra the
  // last step lands straight in the output and the first reads the input.
  Chunk shadow{0, 0};
  if (extra >= 0) {
    shadow = {0, total};
  } else if (k >= 2) {
    shadow = elems(halve(Window{0, p}, core, p / 2).keep);
  }
  const size_t shadow_at = b.alloc_scratch(shadow.count);
  auto acc = [&](Chunk ch) { return B::scratch(shadow_at + ch.offset - shadow.offset, ch.count); };

  std::vector<OpIndex> after;
  bool in_scratch = false;
  if (extra >= 0) {
    // Fold: the extra's input plus the own input.
    after = {b.recv_reduce(extra, B::input(0, total), acc({0, total}), {}, 0)};
    in_scratch = true;
  }
  auto data = [&](Chunk ch) { return in_scratch ? acc(ch) : B::input(ch.offset, ch.count); };

  // Recursive halving. The send reads the half given up, the receive folds
  // the partner's copy of the half kept into it; the halves are disjoint.
  // In place the output is the input block of this rank, which lies in every
  // window kept: only the last receive writes it, after every read of it.
  Window w{0, p};
  for (int j = 0; j < k; ++j) {
    const int d = p >> (j + 1);
    const int peer = f.core_rank(core ^ d);
    const Halves h = halve(w, core, d);
    const auto step = static_cast<uint32_t>(j + 1);
    b.send(peer, data(elems(h.give)), after, step);
    const Chunk kept = elems(h.keep);
    const bool last = j == k - 1;
    const Region dst = last && extra < 0 ? own_out : acc(kept);
    after = {b.recv_reduce(peer, data(kept), dst, after, step)};
    in_scratch = true;
    w = h.keep;
  }

  // With an extra, the last window is [extra's block, own block]: the own one
  // into the output, the extra's back to it.
  if (extra >= 0) {
    const size_t extra_at = static_cast<size_t>(extra) * c;
    const size_t own_at = static_cast<size_t>(r) * c;
    b.copy(acc({own_at, c}), own_out, after, unfold_step);
    b.send(extra, acc({extra_at, c}), after, unfold_step);
  }
  return std::move(b).finish();
}

// With N = 2^k every rank is a core rank, and rank c does what rank 0 does
// with every partner c ^ d for 0 ^ d; where the count is a multiple of N
// every window of one size holds as many elements on every rank, so rank 0's
// Program renamed stands for every rank's.
RankClass halving_doubling_class(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  if (!is_pow2(n) || spec.count % static_cast<size_t>(n) != 0) return {};
  return {0, RankClass::Rename::xor_bits};
}

// Halving: step j exchanges M/2^(j+1) and reduces it; doubling: the same
// sizes backwards. Sums of the halves: (P-1)/P M each way.
Prediction halving_doubling_time(int n, double m, const CostParams& p) {
  const int pc = floor_pow2(n);
  const double k = floor_log2(pc);
  const double frac = static_cast<double>(pc - 1) / pc;
  if (!is_pow2(n))
    return Prediction::none(
        str_cat("halving_doubling has a closed form for power-of-two N only: with N = ", n,
                " the fold (2 alpha + 2 M/beta + M gamma, the seed's estimate) overlaps the first "
                "halving step at the folded ranks' receive ports, by an amount that depends on all "
                "three parameters"));
  return Prediction::time(2 * k * p.alpha + 2 * frac * m / p.beta + frac * m * p.gamma);
}

// The same on the ring topology with 2 ports, N = 2^k. A step at distance d
// sends M d/N bytes d hops, store and forward: d (alpha + M d/(N beta)). The
// messages of a step move in lockstep, the one from rank i on link i+h at hop
// h, so no two share a link, and with 2 ports a rank forwarding a message to
// the right and one to the left uses both. Summing d over both phases gives
// 2(N-1) hops and d^2 gives (N^2-1)/3:
//   2(N-1) alpha + 2(N^2-1)/(3N) M/beta + (N-1)/N M gamma.
// The seed's 2 log2 N alpha + 2(N-1)/N M/beta assumes every partner is one
// hop away. (With 1 port the left- and right-going messages of a rank queue
// at its one send port, unevenly by step: no closed form.)
Prediction halving_doubling_ring_time(int n, double m, const CostParams& p) {
  if (!is_pow2(n))
    return Prediction::none("halving_doubling on a ring has a closed form for N = 2^k only");
  const double dn = n;
  return Prediction::time(2 * (dn - 1) * p.alpha + 2 * (dn * dn - 1) / (3 * dn) * m / p.beta +
                          (dn - 1) / dn * m * p.gamma);
}

// ReduceScatter by halving alone: k steps, (P-1)/P M moved and reduced; the
// fold sends M in and the extra's own block (M/N) back out.
Prediction recursive_halving_time(int n, double m, const CostParams& p) {
  const int pc = floor_pow2(n);
  const double k = floor_log2(pc);
  const double frac = static_cast<double>(pc - 1) / pc;
  if (!is_pow2(n))
    return Prediction::none(
        str_cat("recursive_halving has a closed form for power-of-two N only: with N = ", n,
                " a core rank with an extra answers for two blocks, so halves are uneven"));
  return Prediction::time(k * p.alpha + frac * m / p.beta + frac * m * p.gamma);
}

constexpr ClosedForm kAllreduceCost[] = {
    {halving_doubling_time, 0, "switch hypercube",
     "2 log2 N alpha + 2 (N-1)/N M/beta + (N-1)/N M gamma, N = 2^k"},
    {halving_doubling_ring_time, 2, "ring",
     "2(N-1) alpha + 2(N^2-1)/(3N) M/beta + (N-1)/N M gamma, ring topology, N = 2^k"}};
constexpr ClosedForm kReduceScatterCost[] = {
    {recursive_halving_time, 0, "switch hypercube",
     "log2 N alpha + (N-1)/N M (1/beta + gamma), N = 2^k"}};

}  // namespace

extern const Algorithm kHalvingDoublingAllreduce{
    Collective::allreduce,
    "halving_doubling",
    "Rabenseifner: recursive halving + recursive doubling",
    build_halving_doubling_allreduce,
    nullptr,
    kAllreduceCost,
    "any N (the r = N - 2^k extras fold into partners)",
    halving_doubling_class};
extern const Algorithm kRecursiveHalvingReduceScatter{Collective::reduce_scatter,
                                                      "recursive_halving",
                                                      "log2 N steps halving the data held",
                                                      build_recursive_halving_reduce_scatter,
                                                      nullptr,
                                                      kReduceScatterCost,
                                                      "any N (the same fold)"};

}  // namespace chorus
