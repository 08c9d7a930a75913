// Bruck's AllGather (Bruck, Ho, Kipnis, Upfal & Weathersby), any N.
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
// Constraints: none (any N >= 1, any count >= 0).
#include "algorithms/bruck.h"

#include "schedule/rank_math.h"

#include <algorithm>

namespace chorus {

Support bruck_allgather_supports(const CollectiveSpec& spec) {
  return check_common(spec);
}

Program bruck_allgather(const CollectiveSpec& spec) {
  using B = ProgramBuilder;
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  // Own block into place (a no-op in place).
  b.copy(B::input(0, c), B::output(static_cast<size_t>(r) * c, c));
  if (n == 1) return std::move(b).finish();
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

}  // namespace chorus
