// Ring algorithms on the ring 0 -> 1 -> ... -> N-1 -> 0 (Patarasuk & Yuan).
//
// Every rank sends only to its right neighbour (r+1) and receives only from its
// left neighbour (r-1), so on any topology that contains the ring every link
// carries one message per step.
//
// AllReduce = ReduceScatter + AllGather, the vector cut into N chunks (the
// shared block() split; uneven sizes differ by at most one element):
//   ReduceScatter, step s = 0..N-2: send chunk (r-s) to r+1, receive chunk
//     (r-1-s) from r-1 and reduce it into the local one. After N-1 steps rank r
//     holds chunk (r+1) reduced over all ranks.
//   AllGather, step s = 0..N-2: send chunk (r+1-s), receive chunk (r-s) and
//     keep it. After N-1 steps every rank holds every reduced chunk.
//
//   N = 4, ReduceScatter step 0           chunk owned after ReduceScatter
//     r0 --c0--> r1 --c1--> r2              r0: c1   r1: c2   r2: c3   r3: c0
//     ^                      |
//     +---c3---- r3 <--c2----+
//
//   steps:          2(N-1)
//   bytes per rank: 2 (N-1)/N M sent, the same received
//   cost:           2(N-1) alpha + 2 (N-1)/N M beta^-1 + (N-1)/N M gamma
//
// AllGather (send_count c per rank, M = N c output bytes): copy own block into
// place, then N-1 steps passing block (r-s) right; (N-1) alpha + (N-1)/N M/beta.
//
// ReduceScatter (recv_count c per rank, M = N c input bytes): step s sends the
// partial sum of block (r-1-s) right and reduces block (r-2-s) arriving from the
// left, so that the last step lands block r; partial sums rotate through two
// scratch blocks. (N-1) alpha + (N-1)/N M/beta + (N-1)/N M gamma.
//
// Constraints: none (any N >= 1, any count >= 0).
#include "algorithms/ring.h"

#include "schedule/chunking.h"
#include "schedule/rank_math.h"

namespace chorus {

Support ring_supports(const CollectiveSpec& spec) { return check_common(spec); }

Program ring_allreduce(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t parts = static_cast<size_t>(n);
  ProgramBuilder b(buffer_counts(spec));
  using B = ProgramBuilder;
  auto chunk = [&](long long k) { return block(spec.count, parts, static_cast<size_t>(ring_add(0, k, n))); };
  if (n == 1) {
    b.copy(B::input(0, spec.count), B::output(0, spec.count));
    return std::move(b).finish();
  }
  const int right = ring_add(r, 1, n);
  const int left = ring_add(r, -1, n);
  uint32_t step = 0;

  // Phase 1: ReduceScatter. The first send reads the input; every later one
  // forwards the partial sum the previous step produced in the output.
  std::vector<OpIndex> rs_sends;
  OpIndex last = 0;
  for (int s = 0; s < n - 1; ++s, ++step) {
    const Chunk out = chunk(r - s);
    const Chunk in = chunk(r - 1 - s);
    OpIndex snd = s == 0 ? b.send(right, B::input(out.offset, out.count), {}, step)
                         : b.send(right, B::output(out.offset, out.count), {last}, step);
    rs_sends.push_back(snd);
    last = b.recv_reduce(left, B::input(in.offset, in.count), B::output(in.offset, in.count), {},
                         step);
  }

  // Phase 2: AllGather. Receiving chunk (r-s) overwrites a region the
  // ReduceScatter send of step s read (for s == 0 the input chunk r, which is
  // the same memory in place), so each receive waits for that send.
  for (int s = 0; s < n - 1; ++s, ++step) {
    const Chunk out = chunk(r + 1 - s);
    const Chunk in = chunk(r - s);
    b.send(right, B::output(out.offset, out.count), {last}, step);
    last = b.recv(left, B::output(in.offset, in.count), {rs_sends[static_cast<size_t>(s)]}, step);
  }
  return std::move(b).finish();
}

Program ring_allgather(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  using B = ProgramBuilder;
  auto blk = [&](long long k) { return static_cast<size_t>(ring_add(0, k, n)) * c; };
  // Own block into place (a no-op in place).
  b.copy(B::input(0, c), B::output(blk(r), c));
  if (n == 1) return std::move(b).finish();
  const int right = ring_add(r, 1, n);
  const int left = ring_add(r, -1, n);
  OpIndex last = 0;
  for (int s = 0; s < n - 1; ++s) {
    const auto st = static_cast<uint32_t>(s);
    if (s == 0)
      b.send(right, B::input(0, c), {}, st);
    else
      b.send(right, B::output(blk(r - s), c), {last}, st);
    last = b.recv(left, B::output(blk(r - 1 - s), c), {}, st);
  }
  return std::move(b).finish();
}

Program ring_reduce_scatter(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  using B = ProgramBuilder;
  auto blk = [&](long long k) { return static_cast<size_t>(ring_add(0, k, n)) * c; };
  if (n == 1) {
    b.copy(B::input(0, c), B::output(0, c));
    return std::move(b).finish();
  }
  const int right = ring_add(r, 1, n);
  const int left = ring_add(r, -1, n);
  // Partial sums alternate between two scratch blocks; a block is rewritten
  // only after the send that read it has completed.
  const size_t scratch[2] = {b.alloc_scratch(n > 2 ? c : 0), b.alloc_scratch(n > 3 ? c : 0)};
  OpIndex prev_recv = 0;
  OpIndex prev_send = 0;
  for (int s = 0; s < n - 1; ++s) {
    const auto st = static_cast<uint32_t>(s);
    const Region sent = s == 0 ? B::input(blk(r - 1), c)
                               : B::scratch(scratch[(s - 1) % 2], c);
    const OpIndex snd = s == 0 ? b.send(right, sent, {}, st) : b.send(right, sent, {prev_recv}, st);
    const size_t in = blk(r - 2 - s);
    const bool final_step = s == n - 2;
    const Region dst = final_step ? B::output(0, c) : B::scratch(scratch[s % 2], c);
    std::vector<OpIndex> deps;
    if (s >= 2 && !final_step) deps.push_back(prev_send);  // dst was read by that send
    prev_recv = b.recv_reduce(left, B::input(in, c), dst, std::move(deps), st);
    prev_send = snd;
  }
  return std::move(b).finish();
}

}  // namespace chorus
