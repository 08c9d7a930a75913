// Bruck's AllGather and AllToAll (Bruck, Ho, Kipnis, Upfal & Weathersby,
// 1997), any N: ceil(log2 N) steps at distances 2^k, latency-optimal.
//
// AllGather.
//
// Rank r gathers the blocks r, r+1, r+2, ... (mod N) in that order into a
// scratch array, so that what it holds is always one contiguous prefix. In
// step k (distance d = 2^k, while d < N) it holds d blocks; it sends the first
// m = min(d, N - d) of them to r - d and receives from r + d that rank's first
// m blocks, which are blocks r+d .. r+d+m-1: they extend the prefix to
// min(2d, N) blocks. A last local pass rotates the array into place (scratch
// position i holds block r + i).
//
//   N = 5, rank 0 holds after each step:   [0] -> [0 1] -> [0 1 2 3] -> [0 1 2 3 4]
//   step 0: r -> r-1 (1 block)   step 1: r -> r-2 (2)   step 2: r -> r-4 (1)
//
//   steps:          ceil(log2 N)
//   messages:       ceil(log2 N) sent and received per rank
//   bytes per rank: (N-1) c sent and received (send_count c)
//   cost:           ceil(log2 N) alpha + (N-1)/N M/beta (M = N c), plus the
//                   local copies of N c elements (into scratch and back)
//   scratch:        N c
//
// AllToAll (rank r's input holds N blocks of c elements; block j goes to
// rank j). Let tmp[i] be the block rank r must deliver to rank r+i (after
// a rotation by r: tmp[i] starts as input block (r+i) mod N). In step k, every
// block whose index i has bit k set travels 2^k ranks to the right, keeping its
// index: a block of index i therefore moves exactly i ranks in total (along the
// set bits of i), from its source s to s+i = its destination. So at the end,
// rank r holds at index i the block that rank r-i sent it: output block (r-i)
// mod N = tmp[i]. The blocks of one step are not contiguous, so each step packs
// them into a scratch buffer, sends one message and unpacks what arrives.
//
// A block reads its current value from the input while none of its lower bits
// has been set yet (it has not moved), else from tmp; and once step k is i's
// highest set bit, the block has arrived for good and is unpacked straight into
// the output. So tmp only holds blocks in transit and no final rotation pass
// is needed.
//
//   N = 5, indices with bit k set:  k=0: 1 3   k=1: 2 3   k=2: 4
//
//   steps:          ceil(log2 N)
//   bytes per rank: about ceil(log2 N) M / 2 sent (each step sends the blocks
//                   with bit k set: at most half of them, rounded up)
//   cost:           ceil(log2 N) alpha + ceil(log2 N) M / (2 beta) + copies;
//                   latency-optimal, so the choice for small blocks
//
// Constraints: none (any N >= 1, any count >= 0). AllToAll has no in-place form (MPI's
// MPI_IN_PLACE variant is not offered): input and output must not overlap.
#include "algorithms/algorithm.h"

#include "schedule/rank_math.h"

#include <algorithm>
#include <optional>

namespace chorus {
namespace {

Program build_bruck_allgather(const CollectiveSpec& spec) {
  using B = ProgramBuilder;
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  // Own block into place (a no-op in place).
  b.copy(B::input(0, c), B::output(static_cast<size_t>(r) * c, c));
  const size_t base = b.alloc_scratch(static_cast<size_t>(n) * c);
  auto held = [&](int first, int m) {
    return B::scratch(base + static_cast<size_t>(first) * c, static_cast<size_t>(m) * c);
  };

  // Phase 1: gather into the rotated scratch array. A send reads the prefix,
  // which the own copy and the earlier receives wrote; a receive writes past
  // everything held so far, which nothing has read.
  std::vector<OpIndex> written = {b.copy(B::input(0, c), held(0, 1))};
  uint32_t step = 0;
  for (int d = 1; d < n; d *= 2, ++step) {
    const int m = std::min(d, n - d);
    b.send(ring_add(r, -d, n), held(0, m), written, step);
    written.push_back(b.recv(ring_add(r, d, n), held(d, m), {}, step));
  }

  // Phase 2: rotate into place. Scratch position i holds block r + i: the
  // blocks r+1 .. N-1 come from positions 1 .. N-1-r, the blocks 0 .. r-1 from
  // the positions after them. The own block is already in place.
  const int tail = n - 1 - r;
  if (tail > 0)
    b.copy(held(1, tail), B::output(static_cast<size_t>(r + 1) * c, static_cast<size_t>(tail) * c),
           written, step);
  if (r > 0) b.copy(held(tail + 1, r), B::output(0, static_cast<size_t>(r) * c), written, step);
  return std::move(b).finish();
}

Program build_bruck_alltoall(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  const auto nn = static_cast<size_t>(n);
  using B = ProgramBuilder;
  ProgramBuilder b(buffer_counts(spec));
  // Index 0 is rank r's own block: it never moves.
  b.copy(B::input(static_cast<size_t>(r) * c, c), B::output(static_cast<size_t>(r) * c, c), {}, 0);

  // The most blocks any step moves: indices in [1, N) with bit k set.
  size_t most = 0;
  for (size_t bit = 1; bit < nn; bit <<= 1) {
    size_t moved = 0;
    for (size_t i = 1; i < nn; ++i) moved += (i & bit) ? 1 : 0;
    most = std::max(most, moved);
  }
  const size_t tmp = b.alloc_scratch(nn * c);
  const size_t send_pack = b.alloc_scratch(most * c);
  const size_t recv_pack = b.alloc_scratch(most * c);

  // Last op that wrote tmp[i] (an unpack), while block i is in transit.
  std::vector<std::optional<OpIndex>> writer(nn);
  std::optional<OpIndex> prev_send;   // read send_pack
  std::vector<OpIndex> prev_unpacks;  // read recv_pack
  uint32_t step = 0;
  for (size_t bit = 1; bit < nn; bit <<= 1, ++step) {
    std::vector<size_t> moved;
    for (size_t i = 1; i < nn; ++i)
      if (i & bit) moved.push_back(i);

    // Pack. A block that has not moved yet (no bit below `bit` set) is still
    // input block (r + i) mod N; otherwise it sits in tmp[i].
    std::vector<OpIndex> packs;
    for (size_t j = 0; j < moved.size(); ++j) {
      const size_t i = moved[j];
      const bool untouched = (i & (bit - 1)) == 0;
      const Region src =
          untouched
              ? B::input(static_cast<size_t>(ring_add(r, static_cast<long long>(i), n)) * c, c)
              : B::scratch(tmp + i * c, c);
      std::vector<OpIndex> deps;
      if (!untouched && writer[i]) deps.push_back(*writer[i]);
      if (prev_send) deps.push_back(*prev_send);  // send_pack is free again
      packs.push_back(b.copy(src, B::scratch(send_pack + j * c, c), std::move(deps), step));
    }
    const size_t len = moved.size() * c;
    const int dist = static_cast<int>(bit);
    prev_send = b.send(ring_add(r, dist, n), B::scratch(send_pack, len), packs, step);
    const OpIndex rcv =
        b.recv(ring_add(r, -dist, n), B::scratch(recv_pack, len), prev_unpacks, step);

    // Unpack. Block i is final once `bit` is its highest set bit: it goes to
    // output block (r - i) mod N; otherwise back to tmp[i] for a later step.
    prev_unpacks.clear();
    for (size_t j = 0; j < moved.size(); ++j) {
      const size_t i = moved[j];
      const bool final_move = (i >> 1) < bit;  // no bit above `bit`
      const Region dst =
          final_move
              ? B::output(static_cast<size_t>(ring_add(r, -static_cast<long long>(i), n)) * c, c)
              : B::scratch(tmp + i * c, c);
      // The pack of block i (this step) read tmp[i] before it is overwritten.
      const OpIndex u = b.copy(B::scratch(recv_pack + j * c, c), dst, {rcv, packs[j]}, step);
      prev_unpacks.push_back(u);
      writer[i] = u;
    }
  }
  return std::move(b).finish();
}

// AllGather: step k sends min(2^k, N - 2^k) blocks; they add up to N-1 blocks.
Prediction bruck_allgather_time(int n, double m, const CostParams& p) {
  return Prediction::time(ceil_log2(n) * p.alpha + (n - 1) * m / n / p.beta);
}

constexpr ClosedForm kAllgatherCost[] = {
    {bruck_allgather_time, 0, "switch", "ceil(log2 N) alpha + (N-1)/N M/beta"}};

}  // namespace

extern const Algorithm kBruckAllgather{Collective::allgather,
                                       "bruck",
                                       "ceil(log2 N) steps for any N, rotated gather",
                                       build_bruck_allgather,
                                       nullptr,
                                       kAllgatherCost,
                                       "any N"};
// AllToAll's packing copies have no place in the alpha-beta model: no closed
// form, the simulator gives its time.
extern const Algorithm kBruckAlltoall{Collective::alltoall,
                                      "bruck",
                                      "ceil(log2 N) steps of packed blocks (small blocks)",
                                      build_bruck_alltoall,
                                      nullptr,
                                      {},
                                      "any N; no in-place form; for small blocks"};

}  // namespace chorus
