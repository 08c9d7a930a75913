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
// Bruck (1997). Let tmp[i] be the block rank r must deliver to rank r+i (after
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
// Constraints: none (any N >= 1, any count). No in-place form (MPI's
// MPI_IN_PLACE variant is not offered): input and output must not overlap.
#include "algorithms/alltoall.h"

#include "schedule/rank_math.h"

#include <algorithm>
#include <optional>

namespace chorus {

Support alltoall_supports(const CollectiveSpec& spec) {
  if (spec.collective != Collective::alltoall) return Support::no("not an alltoall");
  return check_common(spec);
}

Program pairwise_alltoall(const CollectiveSpec& spec) {
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

Program bruck_alltoall(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  const auto nn = static_cast<size_t>(n);
  using B = ProgramBuilder;
  ProgramBuilder b(buffer_counts(spec));
  // Index 0 is rank r's own block: it never moves.
  b.copy(B::input(static_cast<size_t>(r) * c, c), B::output(static_cast<size_t>(r) * c, c), {}, 0);
  if (n == 1) return std::move(b).finish();

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

}  // namespace chorus
