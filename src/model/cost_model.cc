// Closed forms of every algorithm, under the model of cost_model.h. Each
// function is exact for the Program its algorithm actually builds (see the
// algorithm's own file for the schedule); where a form covers only some cases
// it says which, and answers Prediction::none for the rest.
#include "model/cost_model.h"

#include "core/check.h"
#include "schedule/chunking.h"
#include "schedule/rank_math.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace chorus {
namespace {

using C = Collective;

double log2_ceil(int n) { return static_cast<double>(ceil_log2(n)); }

// --- ring family (ring.cc) ----------------------------------------------------
// Every step is one message of M/N bytes to the right neighbour that waits for
// the previous step's receive, so steps never overlap and no port carries two
// messages at once: each step costs alpha + (M/N)/beta (+ gamma M/N reducing).

Prediction ring_allreduce_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  const double steps = n - 1;
  const double chunk = m / n;
  return Prediction::time(2 * steps * (p.alpha + chunk / p.beta) + steps * chunk * p.gamma);
}

Prediction ring_allgather_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  return Prediction::time((n - 1) * (p.alpha + m / n / p.beta));
}

Prediction ring_reduce_scatter_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  const double chunk = m / n;
  return Prediction::time((n - 1) * (p.alpha + chunk / p.beta + chunk * p.gamma));
}

// --- binomial trees (binomial.cc) ---------------------------------------------

// Broadcast. A node that holds the data at time t sends to its children
// largest subtree first, all at once; its `ports` send ports serve them in
// that order, so the j-th child (1-based) has the data at
//   t + alpha + ceil(j / ports) * M/beta
// (alpha is latency and overlaps; only the M/beta of each message queues).
// For a tree of n nodes, L = ceil(log2 n), the children are 2^(L-1), ...,
// 2^0; the first one roots a binomial tree of n - 2^(L-1) nodes, the j-th
// (j >= 2) a full one of 2^(L-j). So
//   T(1) = 0,  T(n) = max_j ( alpha + ceil(j/d) M/beta + T(size_j) ).
// With d = 1 and n = 2^L this is L (alpha + M/beta), the seed's form; for other
// n it is less, because the first (largest) subtree is not full: e.g. N = 5
// gives 2 alpha + 3 M/beta where the seed says 3 (alpha + M/beta).
double binomial_broadcast_tree(long long n, double alpha, double g, int d,
                               std::vector<double>& full) {
  if (n <= 1) return 0;
  const int levels = ceil_log2(n);
  double t = 0;
  for (int j = 1; j <= levels; ++j) {
    const long long size = j == 1 ? n - (1LL << (levels - 1)) : 1LL << (levels - j);
    // Full trees recur once per level: memoize them by level.
    double sub;
    if (j > 1) {
      const auto lv = static_cast<size_t>(levels - j);
      if (full[lv] < 0) full[lv] = binomial_broadcast_tree(size, alpha, g, d, full);
      sub = full[lv];
    } else {
      sub = binomial_broadcast_tree(size, alpha, g, d, full);
    }
    const double slot = std::ceil(static_cast<double>(j) / d);
    t = std::max(t, alpha + slot * g + sub);
  }
  return t;
}

Prediction binomial_broadcast_time(int n, double m, const CostParams& p) {
  std::vector<double> full(64, -1.0);
  return Prediction::time(binomial_broadcast_tree(n, p.alpha, m / p.beta, p.ports, full));
}

// Reduce. Each rank folds its children in smallest-subtree-first order, one
// recv_reduce after the other, then sends to its parent. For N = 2^L the
// subtree results reach a node spaced alpha + M/beta + gamma M apart, so its
// receive port never queues and each level costs alpha + M/beta + gamma M:
//   L (alpha + M/beta + gamma M).
// For other N two children can finish at the same time and their messages
// queue at the parent's receive port; the result then depends on which of the
// two the port serves first, and no closed form is claimed.
Prediction binomial_reduce_time(int n, double m, const CostParams& p) {
  if (!is_pow2(n))
    return Prediction::none(str_cat("binomial reduce has a closed form for power-of-two N only (",
                                    "N = ", n, " queues messages at receive ports)"));
  return Prediction::time(log2_ceil(n) * (p.alpha + m / p.beta + m * p.gamma));
}

// --- barrier (barrier.cc) -------------------------------------------------------
// ceil(log2 N) rounds of one empty message, each waiting for the previous
// round's receive: ceil(log2 N) alpha, the latency lower bound.
Prediction dissemination_time(int n, double, const CostParams& p) {
  return Prediction::time(log2_ceil(n) * p.alpha);
}

// --- alltoall (alltoall.cc) -----------------------------------------------------
// Pairwise: N-1 exchanges of one block (M/N bytes), each step's send waiting
// for the previous step's receive: (N-1) (alpha + M/(N beta)).
Prediction pairwise_alltoall_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  return Prediction::time((n - 1) * (p.alpha + m / n / p.beta));
}

// --- bidirectional ring (bidir_ring.cc), 2 ports -------------------------------
// a = floor(N/2) steps per phase; in each, one chunk (M/N) goes each way
// round, on separate ports, and the two directions never wait for each
// other's ports: a step costs alpha + (M/N)/beta (+ gamma M/N). In the last
// ReduceScatter step the two partial sums of a chunk meet at its owner, which
// folds them one after the other: one gamma M/N more (for N >= 3, where both
// directions exist).
double bidir_folds(int n) { return n / 2 + (n >= 3 ? 1 : 0); }

Prediction bidir_allreduce_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  const double a = n / 2;
  const double c = m / n;
  return Prediction::time(2 * a * (p.alpha + c / p.beta) + bidir_folds(n) * c * p.gamma);
}

Prediction bidir_allgather_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  return Prediction::time((n / 2) * (p.alpha + m / n / p.beta));
}

Prediction bidir_reduce_scatter_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  const double c = m / n;
  return Prediction::time((n / 2) * (p.alpha + c / p.beta) + bidir_folds(n) * c * p.gamma);
}

// --- power-of-two cores (halving_doubling.cc, recursive_doubling.cc) ----------
// For N = 2^k every step is one exchange between partners that waits for the
// previous step on both sides, so steps add up. For other N the r = N - P
// extras fold into their partners first and are served last; the fold's
// messages meet the first core step at the same receive ports, and the
// overlap makes the exact time a max over paths that depends on alpha, beta
// and gamma together: the simulator gives it, no closed form is claimed.

// Halving: step j exchanges M/2^(j+1) and reduces it; doubling: the same
// sizes backwards. Sums of the halves: (P-1)/P M each way.
Prediction halving_doubling_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  const int pc = floor_pow2(n);
  const double k = floor_log2(pc);
  const double frac = static_cast<double>(pc - 1) / pc;
  if (!is_pow2(n))
    return Prediction::none(str_cat(
        "halving_doubling has a closed form for power-of-two N only: with N = ", n,
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
  if (n == 1) return Prediction::time(0);
  if (!is_pow2(n))
    return Prediction::none("halving_doubling on a ring has a closed form for N = 2^k only");
  const double dn = n;
  return Prediction::time(2 * (dn - 1) * p.alpha + 2 * (dn * dn - 1) / (3 * dn) * m / p.beta +
                          (dn - 1) / dn * m * p.gamma);
}

// ReduceScatter by halving alone: k steps, (P-1)/P M moved and reduced; the
// fold sends M in and the extra's own block (M/N) back out.
Prediction recursive_halving_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  const int pc = floor_pow2(n);
  const double k = floor_log2(pc);
  const double frac = static_cast<double>(pc - 1) / pc;
  if (!is_pow2(n))
    return Prediction::none(str_cat(
        "recursive_halving has a closed form for power-of-two N only: with N = ", n,
        " a core rank with an extra answers for two blocks, so halves are uneven"));
  return Prediction::time(k * p.alpha + frac * m / p.beta + frac * m * p.gamma);
}

// Every step exchanges all of M and reduces it.
Prediction recursive_doubling_allreduce_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  if (!is_pow2(n))
    return Prediction::none(str_cat(
        "recursive_doubling allreduce has a closed form for power-of-two N only: with N = ", n,
        " the core partners of folded ranks send before the fold ends, which hides part of it"));
  return Prediction::time(floor_log2(n) * (p.alpha + m / p.beta + m * p.gamma));
}

// N = 2^k: step j exchanges 2^j blocks of M/N.
Prediction recursive_doubling_allgather_time(int n, double m, const CostParams& p) {
  if (!is_pow2(n)) return Prediction::none("recursive_doubling allgather needs N = 2^k");
  return Prediction::time(floor_log2(n) * p.alpha + (n - 1) * m / n / p.beta);
}

// Bruck: step k sends min(2^k, N - 2^k) blocks; they add up to N-1 blocks.
Prediction bruck_allgather_time(int n, double m, const CostParams& p) {
  return Prediction::time(log2_ceil(n) * p.alpha + (n - 1) * m / n / p.beta);
}

// --- double binary tree (double_binary_tree.cc) --------------------------------
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
  if (n == 1) return Prediction::time(0);
  if (!is_pow2(n))
    return Prediction::none("double_binary_tree has a closed form for N = 2^k only");
  const double seg = static_cast<double>(p.segment_bytes ? p.segment_bytes : kDefaultSegmentBytes);
  if (m / 2 > seg)
    return Prediction::none(
        "double_binary_tree has a closed form for one segment per tree only (M/2 up to the "
        "segment size); segments pipeline through the levels");
  const double h = floor_log2(n);
  return Prediction::time(2 * h * p.alpha + h * m / p.beta + (2 * h - 1) * p.gamma * m / 2);
}

// --- reduce + broadcast (reduce_broadcast.cc) ----------------------------------
// The binomial Reduce to rank 0, then the binomial Broadcast from it.
Prediction reduce_broadcast_time(int n, double m, const CostParams& p) {
  const Prediction r = binomial_reduce_time(n, m, p);
  if (!r.ok) return r;
  return Prediction::time(r.seconds + binomial_broadcast_time(n, m, p).seconds);
}

// --- pipelined chain (pipelined_chain.cc) --------------------------------------
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
  if (n == 1) return Prediction::time(0);
  const Segments sg = segments_of(m, p);
  return Prediction::time((n - 1) * p.alpha + m / p.beta + (n - 2) * sg.max / p.beta);
}

Prediction chain_reduce_time(int n, double m, const CostParams& p) {
  if (n == 1) return Prediction::time(0);
  const Segments sg = segments_of(m, p);
  if (sg.last != sg.max)
    return Prediction::none(
        "pipelined_chain reduce has a closed form for equal segments only (M a multiple of "
        "the segment, or M below it): a short last segment changes which path is heaviest");
  return Prediction::time((n - 1) * p.alpha + m / p.beta + (n - 2) * sg.max / p.beta +
                          (n - 1) * p.gamma * sg.max);
}

constexpr std::string_view kRingAr = "2(N-1) alpha + 2 (N-1)/N M/beta + (N-1)/N M gamma";
constexpr std::string_view kRingAg = "(N-1) alpha + (N-1)/N M/beta";
constexpr std::string_view kRingRs = "(N-1) alpha + (N-1)/N M/beta + (N-1)/N M gamma";
constexpr std::string_view kBinBc =
    "T(N), T(1)=0, T(n)=max_j(alpha + ceil(j/d) M/beta + T(size_j)); N=2^L, d=1: L(alpha+M/beta)";
constexpr std::string_view kBinRd = "log2 N (alpha + M/beta + gamma M), N a power of two";

const Formula kFormulas[] = {
    {C::allreduce, "ring", ring_allreduce_time, 0, "switch ring", kRingAr},
    {C::allgather, "ring", ring_allgather_time, 0, "switch ring", kRingAg},
    {C::reduce_scatter, "ring", ring_reduce_scatter_time, 0, "switch ring", kRingRs},
    {C::broadcast, "binomial", binomial_broadcast_time, 0, "switch", kBinBc},
    {C::reduce, "binomial", binomial_reduce_time, 0, "switch", kBinRd},
    {C::barrier, "dissemination", dissemination_time, 0, "switch", "ceil(log2 N) alpha"},
    {C::alltoall, "pairwise", pairwise_alltoall_time, 0, "switch", kRingAg},
    {C::allreduce, "bidir_ring", bidir_allreduce_time, 2, "switch ring",
     "2 floor(N/2) (alpha + M/(N beta)) + (floor(N/2) + 1) M/N gamma"},
    {C::allgather, "bidir_ring", bidir_allgather_time, 2, "switch ring",
     "floor(N/2) (alpha + M/(N beta))"},
    {C::reduce_scatter, "bidir_ring", bidir_reduce_scatter_time, 2, "switch ring",
     "floor(N/2) (alpha + M/(N beta)) + (floor(N/2) + 1) M/N gamma"},
    {C::allreduce, "halving_doubling", halving_doubling_time, 0, "switch hypercube",
     "2 log2 N alpha + 2 (N-1)/N M/beta + (N-1)/N M gamma, N = 2^k"},
    {C::allreduce, "halving_doubling", halving_doubling_ring_time, 2, "ring",
     "2(N-1) alpha + 2(N^2-1)/(3N) M/beta + (N-1)/N M gamma, ring topology, N = 2^k"},
    {C::reduce_scatter, "recursive_halving", recursive_halving_time, 0, "switch hypercube",
     "log2 N alpha + (N-1)/N M (1/beta + gamma), N = 2^k"},
    {C::allreduce, "recursive_doubling", recursive_doubling_allreduce_time, 0, "switch hypercube",
     "log2 N (alpha + M/beta + M gamma), N = 2^k"},
    {C::allgather, "recursive_doubling", recursive_doubling_allgather_time, 0, "switch hypercube",
     "log2 N alpha + (N-1)/N M/beta, N = 2^k"},
    {C::allreduce, "double_binary_tree", double_binary_tree_time, 2, "switch",
     "2 log2 N alpha + log2 N M/beta + (2 log2 N - 1) gamma M/2, N = 2^k, M/2 <= segment"},
    {C::allgather, "bruck", bruck_allgather_time, 0, "switch", "ceil(log2 N) alpha + (N-1)/N M/beta"},
    {C::allreduce, "reduce_broadcast", reduce_broadcast_time, 0, "switch",
     "binomial reduce + binomial broadcast (N = 2^k: log2 N (2 alpha + 2 M/beta + M gamma))"},
    {C::broadcast, "pipelined_chain", chain_broadcast_time, 1, "switch ring",
     "(N-1) alpha + M/beta + (N-2) s/beta, segments of s bytes"},
    {C::reduce, "pipelined_chain", chain_reduce_time, 1, "switch ring",
     "(N-1) (alpha + gamma s) + M/beta + (N-2) s/beta, S equal segments of s bytes"},
};

}  // namespace

double model_bytes(Collective c, int nranks, size_t count, size_t elem_size) {
  const double v = static_cast<double>(count) * static_cast<double>(elem_size);
  switch (c) {
    case C::allgather:
    case C::reduce_scatter:
    case C::alltoall:
      return v * nranks;
    case C::barrier:
      return 0;
    default:
      return v;
  }
}

LowerBound lower_bound(Collective c, int n, double m, const CostParams& p) {
  LowerBound lb;
  if (n <= 1) return lb;
  lb.latency = log2_ceil(n) * p.alpha;
  const double d = p.ports;
  switch (c) {
    case C::allreduce:
    case C::allgather:
    case C::reduce_scatter:
    case C::alltoall:
      lb.bandwidth = (n - 1) * m / (n * d * p.beta);
      break;
    case C::broadcast:
    case C::reduce:
      lb.bandwidth = m / (d * p.beta);
      break;
    case C::barrier:
      break;
  }
  return lb;
}

std::span<const Formula> formulas() { return kFormulas; }

const Formula* find_formula(Collective c, std::string_view algorithm) {
  for (const Formula& f : kFormulas)
    if (f.collective == c && f.algorithm == algorithm) return &f;
  return nullptr;
}

const Formula* find_formula_on(Collective c, std::string_view algorithm,
                               std::string_view topology, int nranks, int ports) {
  for (const Formula& f : kFormulas)
    if (f.collective == c && f.algorithm == algorithm &&
        formula_applies(f, topology, nranks, ports))
      return &f;
  return nullptr;
}

bool formula_applies(const Formula& f, std::string_view topology, int nranks, int ports) {
  if (f.ports != 0 && f.ports != ports) return false;
  if (topology == "hypercube" && !is_pow2(nranks)) return false;
  for (size_t i = 0; i < f.topologies.size();) {
    size_t j = f.topologies.find(' ', i);
    if (j == std::string_view::npos) j = f.topologies.size();
    if (f.topologies.substr(i, j - i) == topology) return true;
    i = j + 1;
  }
  return false;
}

Prediction closed_form(Collective c, std::string_view algorithm, int nranks, double bytes,
                       const CostParams& params) {
  const Formula* f = find_formula(c, algorithm);
  if (f == nullptr)
    return Prediction::none(
        str_cat(to_string(c), "(", algorithm, ") has no closed form in the cost model"));
  if (f->ports != 0 && f->ports != params.ports)
    return Prediction::none(str_cat(to_string(c), "(", algorithm, ")'s closed form assumes ",
                                    f->ports, " port(s), not ", params.ports));
  return f->time(nranks, bytes, params);
}

}  // namespace chorus
