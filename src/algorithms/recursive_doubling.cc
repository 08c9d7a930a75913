// Recursive doubling.
//
// AllReduce (recursive_doubling): on the power-of-two core of P = 2^k ranks
// (rank_math.h: Fold), step j = 0..k-1 exchanges the whole partial vector
// with core partner c ^ 2^j and reduces what arrives. After step j every rank
// holds the sum over its aligned group of 2^(j+1) core ranks, so after k steps
// every core rank holds the full sum. Extra ranks of a non-power-of-two N fold
// their input into their partner first and receive the result last.
//
//   N = 8:  step 0 (0,1)(2,3)(4,5)(6,7)   step 1 (0,2)(1,3)(4,6)(5,7)
//           step 2 (0,4)(1,5)(2,6)(3,7)   every message carries all of M
//
// A rank sends its partial while it receives the partner's, so the partial
// and the incoming sum cannot share memory (a rendezvous send would wait for
// a receive that waits for the send). The partials therefore alternate
// between the output and scratch, and are laid out so that the last one is
// the output: with L_i the buffer written by the i-th reduction (the fold
// counts as one), L_w = output, L_{w-1} = scratch, L_{w-2} = output, ...
// The first exchange reads the input, which in place is the output, so it
// must not write the output: then a second scratch buffer takes its place,
// and for k = 1 without a fold the sum lands in scratch and is copied out.
//
//   steps:          k = log2 P, plus 2 with the fold
//   messages:       k sent, k received per core rank (+1 each way with an
//                   extra); an extra sends 1, receives 1
//   bytes per rank: k M sent and received (+M each way with an extra)
//   cost:           k (alpha + M/beta + M gamma), fold 2 alpha + 2 M/beta +
//                   M gamma; the latency is optimal for P = N, the bandwidth
//                   is log2 N times the ring's: for small messages
//   scratch:        M, or 2M when k is odd and >= 3 without a fold
//
// AllGather (recursive_doubling), N = 2^k, send_count c: step j exchanges
// the aligned group of 2^j blocks held with rank r ^ 2^j; the group doubles.
//   steps:          k
//   bytes per rank: (N-1) c sent and received
//   cost:           log2 N alpha + (N-1)/N M/beta (M = N c)
//   constraint:     N a power of two (supports() declines other N; Bruck
//                   serves any N)
#include "algorithms/algorithm.h"

#include "core/check.h"
#include "schedule/rank_math.h"

namespace chorus {
namespace {

using B = ProgramBuilder;

enum class Slot { input, output, scratch_a, scratch_b };

Program build_recursive_doubling_allreduce(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t count = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  const Region all_in = B::input(0, count);
  const Region all_out = B::output(0, count);
  const Fold f = make_fold(n);
  const int k = floor_log2(f.core);
  const auto unfold_step = static_cast<uint32_t>(k + 1);
  if (f.is_extra(r)) {
    // Hand the input over, take the sum back (in place after the send).
    const int partner = f.partner(r);
    const OpIndex s = b.send(partner, all_in, {}, 0);
    b.recv(partner, all_out, {s}, unfold_step);
    return std::move(b).finish();
  }
  const int c = f.core_index(r);
  const int extra = f.partner(r);

  // Buffers written by the w reductions, last one the output (see above).
  const bool fold = extra >= 0;
  const int w = k + (fold ? 1 : 0);
  std::vector<Slot> dst(static_cast<size_t>(w) + 1);  // dst[i], i = 1..w
  for (int i = 1; i <= w; ++i)
    dst[static_cast<size_t>(i)] = (w - i) % 2 == 0 ? Slot::output : Slot::scratch_a;
  bool copy_out = false;
  if (!fold && dst[1] == Slot::output) {
    if (w == 1) {
      dst[1] = Slot::scratch_a;
      copy_out = true;
    } else {
      dst[1] = Slot::scratch_b;  // dst[2] is scratch_a
    }
  }
  bool uses_a = false, uses_b = false;
  for (int i = 1; i <= w; ++i) {
    uses_a |= dst[static_cast<size_t>(i)] == Slot::scratch_a;
    uses_b |= dst[static_cast<size_t>(i)] == Slot::scratch_b;
  }
  const size_t at_a = b.alloc_scratch(uses_a ? count : 0);
  const size_t at_b = b.alloc_scratch(uses_b ? count : 0);
  auto region = [&](Slot s) {
    switch (s) {
      case Slot::input:
        return all_in;
      case Slot::output:
        return all_out;
      case Slot::scratch_a:
        return B::scratch(at_a, count);
      case Slot::scratch_b:
        return B::scratch(at_b, count);
    }
    return all_in;
  };

  int i = 1;
  Slot cur = Slot::input;
  std::vector<OpIndex> after;
  // Fold: the extra's input plus the own one. Nothing else reads the input
  // meanwhile, so in place this may write the output.
  if (fold) {
    after = {b.recv_reduce(extra, all_in, region(dst[1]), {}, 0)};
    cur = dst[1];
    ++i;
  }

  // Exchanges: send the partial, fold the partner's partial into the next
  // buffer. That buffer was read by the previous step's send (and, in place,
  // the output is the input the first step read): each receive waits for the
  // previous send and the previous receive, and so transitively for all.
  std::vector<OpIndex> last_send;
  for (int j = 0; j < k; ++j, ++i) {
    const int peer = f.core_rank(c ^ (1 << j));
    const auto step = static_cast<uint32_t>(j + 1);
    const Slot next = dst[static_cast<size_t>(i)];
    const OpIndex s = b.send(peer, region(cur), after, step);
    std::vector<OpIndex> deps = after;
    deps.insert(deps.end(), last_send.begin(), last_send.end());
    after = {b.recv_reduce(peer, region(cur), region(next), deps, step)};
    last_send = {s};
    cur = next;
  }
  if (copy_out) {
    std::vector<OpIndex> deps = after;
    deps.insert(deps.end(), last_send.begin(), last_send.end());
    after = {b.copy(region(cur), all_out, deps, static_cast<uint32_t>(k))};
  }
  CHORUS_CHECK(copy_out || cur == Slot::output);

  // Unfold: the sum to the extra.
  if (fold) b.send(extra, all_out, after, unfold_step);
  return std::move(b).finish();
}

Support recursive_doubling_allgather_supports(const CollectiveSpec& spec) {
  if (!is_pow2(spec.nranks))
    return Support::no(
        str_cat("recursive_doubling allgather needs a power-of-two rank count, got ", spec.nranks));
  return Support::yes();
}

Program build_recursive_doubling_allgather(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  CHORUS_CHECK(is_pow2(n));
  ProgramBuilder b(buffer_counts(spec));
  auto blocks = [&](int first, int m) {
    return B::output(static_cast<size_t>(first) * c, static_cast<size_t>(m) * c);
  };
  // Own block into place (a no-op in place).
  std::vector<OpIndex> written = {b.copy(B::input(0, c), blocks(r, 1))};
  // Step j: the group held is the aligned run of d = 2^j blocks around r; the
  // partner holds the neighbouring run. The first send reads the input
  // (nothing writes it); later sends read what the copy and the receives
  // wrote. Receives write blocks nothing has touched yet.
  for (int j = 0, d = 1; d < n; ++j, d *= 2) {
    const auto step = static_cast<uint32_t>(j);
    const int peer = r ^ d;
    const int mine = r & ~(d - 1);
    if (j == 0)
      b.send(peer, B::input(0, c), {}, step);
    else
      b.send(peer, blocks(mine, d), written, step);
    written.push_back(b.recv(peer, blocks(mine ^ d, d), {}, step));
  }
  return std::move(b).finish();
}

// Every step exchanges all of M and reduces it.
Prediction recursive_doubling_allreduce_time(int n, double m, const CostParams& p) {
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

constexpr ClosedForm kAllreduceCost[] = {{recursive_doubling_allreduce_time, 0, "switch hypercube",
                                          "log2 N (alpha + M/beta + M gamma), N = 2^k"}};
constexpr ClosedForm kAllgatherCost[] = {{recursive_doubling_allgather_time, 0, "switch hypercube",
                                          "log2 N alpha + (N-1)/N M/beta, N = 2^k"}};

}  // namespace

extern const Algorithm kRecursiveDoublingAllreduce{Collective::allreduce,
                                                   "recursive_doubling",
                                                   "log2 N steps exchanging the whole vector",
                                                   build_recursive_doubling_allreduce,
                                                   nullptr,
                                                   kAllreduceCost,
                                                   "any N (the same fold)"};
extern const Algorithm kRecursiveDoublingAllgather{
    Collective::allgather,
    "recursive_doubling",
    "log2 N steps doubling the blocks held (N = 2^k)",
    build_recursive_doubling_allgather,
    recursive_doubling_allgather_supports,
    kAllgatherCost,
    "N a power of two (declines others, with the reason)"};

}  // namespace chorus
