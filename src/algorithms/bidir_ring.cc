// Bidirectional ring algorithms for a 2-port ring: each step every rank sends
// one chunk to its right neighbour (clockwise, cw) and one to its left
// neighbour (counter-clockwise, ccw), and receives one from each.
//
// The vector is cut into N chunks (the shared block() split). Let
//   a = floor(N/2)   hops covered clockwise,
//   b = N - 1 - a    hops covered counter-clockwise (a - 1 or a).
//
// ReduceScatter, a steps. Chunk t is reduced from both sides at once: the a
// ranks t-a .. t-1 pass a growing partial sum clockwise towards t, the b ranks
// t+b .. t+1 pass one counter-clockwise; the two halves of the ring meet at t
// in the last step. Clockwise, rank r sends the partial of chunk r+a-s in step
// s (its own input chunk at s = 0) and folds chunk r+a-1-s arriving from the
// left into its own; counter-clockwise starts b - a steps late, so that both
// arrive at t in step a-1: in step s >= a-b rank r sends chunk r-(a-s) left and
// folds chunk r-(a-1-s) arriving from the right. Every chunk visits every rank
// once, so nothing is counted twice.
//
// AllGather, a steps: the reduced chunk t travels a hops clockwise (to t+1 ..
// t+a) and b hops counter-clockwise (to t-1 .. t-b).
//
//   N = 5 (a = b = 2), ReduceScatter of chunk 0:
//        cw:  r3 --> r4 --> r0 <-- r1 <-- r2  :ccw
//     step      0      1      1      0
//
//   steps:          ReduceScatter a, AllGather a, AllReduce 2a:
//                   N for even N, N - 1 for odd N (the seed's table gives
//                   ceil(N/2) per phase, N in all; for odd N this schedule
//                   needs one step less per phase, as the two directions
//                   share the N - 1 hops evenly)
//   messages:       per rank and phase a clockwise and b counter-clockwise,
//                   N - 1 in all (two per step, one fewer in one step when b < a)
//   bytes per rank: sent and received, (N-1)/N M per phase (chunks of
//                   ceil(M/N) at most), as for the 1-port ring
//   cost (2 ports, full duplex; chunks of M/N bytes, at most ceil(count/N)
//   elements when N does not divide count):
//     AllReduce      2a (alpha + M/(N beta)) + (a + 1) M/N gamma
//                    = N alpha + M/beta + (N/2 + 1) M/N gamma for even N
//                    (the seed: N alpha + ceil(N/2)/(N/2) M/beta). The gamma
//                    term is the critical path: one fold per ReduceScatter
//                    step, and the owner folds the two halves of its chunk one
//                    after the other in the last one (a alone for N = 2). The
//                    work is N - 1 chunk folds per rank.
//     AllGather      a (alpha + M/(N beta))          (M = N c output bytes)
//     ReduceScatter  a (alpha + M/(N beta)) + (a + 1) M/N gamma  (M = N c)
//   On one port the two sends of a step share it: 4a M/N bytes per port,
//   about the 1-port ring's 2 (N-1)/N M/beta.
//
// Constraints: none (any N >= 1, any count >= 0). For N = 2 both neighbours
// are the same rank and only the clockwise direction is used (b = 0).
#include "algorithms/algorithm.h"

#include "schedule/chunking.h"
#include "schedule/rank_math.h"

#include <array>
#include <functional>

namespace chorus {
namespace {

using B = ProgramBuilder;

// The hop counts of the two directions.
struct Split {
  int cw;   // a
  int ccw;  // b
};
Split split_hops(int n) {
  return {n / 2, n - 1 - n / 2};
}

// How the ReduceScatter phase stores what it computes.
struct RsStorage {
  // Input chunk t (the rank's own contribution to chunk t).
  std::function<Region(int t)> input_chunk;
  // Where the partial sum of chunk t lives after the receive of step s in
  // direction dir (0 = cw, 1 = ccw) and is read by the send of step s + 1.
  std::function<Region(int dir, int s, int t)> partial;
  // Partials rotate through two buffers per direction: a receive must then
  // wait for the send that read the same buffer one step earlier.
  bool rotating = false;
  Region result;       // where the fully reduced own chunk goes
  Region ccw_landing;  // scratch for the last counter-clockwise partial
};

struct RsOps {
  OpIndex result_ready = 0;          // after this op `result` holds the reduced chunk
  std::vector<OpIndex> last_reader;  // per chunk: the send that last read it
};

// Emits the ReduceScatter phase (n >= 2) in steps first_step.. and returns
// the ops later phases must wait for.
RsOps emit_reduce_scatter(ProgramBuilder& b, int n, int r, const RsStorage& st,
                          uint32_t first_step) {
  const Split h = split_hops(n);
  const int right = ring_add(r, 1, n);
  const int left = ring_add(r, -1, n);
  RsOps out;
  out.last_reader.assign(static_cast<size_t>(n), 0);
  OpIndex cw_recv = 0, ccw_recv = 0, cw_send = 0, ccw_send = 0;
  OpIndex cw_final = 0, ccw_final = 0;
  const int ccw_start = h.cw - h.ccw;
  for (int s = 0; s < h.cw; ++s) {
    const uint32_t step = first_step + static_cast<uint32_t>(s);
    const bool last = s == h.cw - 1;
    const bool ccw_active = s >= ccw_start;
    const int q = s - ccw_start;  // counter-clockwise step index

    // Sends: the own input chunk first, then the partial the previous step
    // produced.
    const int cw_t = ring_add(r, h.cw - s, n);
    const OpIndex cw_send_prev = cw_send;
    cw_send = s == 0 ? b.send(right, st.input_chunk(cw_t), {}, step)
                     : b.send(right, st.partial(0, s - 1, cw_t), {cw_recv}, step);
    out.last_reader[static_cast<size_t>(cw_t)] = cw_send;
    OpIndex ccw_send_prev = ccw_send;
    if (ccw_active) {
      const int ccw_t = ring_add(r, -(h.cw - s), n);
      ccw_send = q == 0 ? b.send(left, st.input_chunk(ccw_t), {}, step)
                        : b.send(left, st.partial(1, s - 1, ccw_t), {ccw_recv}, step);
      out.last_reader[static_cast<size_t>(ccw_t)] = ccw_send;
    }

    // Receives: fold the arriving partial into the own contribution.
    if (!last) {
      const int t = ring_add(r, h.cw - 1 - s, n);
      std::vector<OpIndex> deps;
      if (st.rotating && s >= 2) deps.push_back(cw_send_prev);
      cw_recv = b.recv_reduce(left, st.input_chunk(t), st.partial(0, s, t), deps, step);
    } else {
      cw_final = b.recv_reduce(left, st.input_chunk(r), st.result, {}, step);
    }
    if (ccw_active) {
      if (!last) {
        const int t = ring_add(r, -(h.cw - 1 - s), n);
        std::vector<OpIndex> deps;
        if (st.rotating && q >= 2) deps.push_back(ccw_send_prev);
        ccw_recv = b.recv_reduce(right, st.input_chunk(t), st.partial(1, s, t), deps, step);
      } else {
        // Both halves of the own chunk arrive in this step: land the second
        // in scratch so that neither receive waits for the other.
        ccw_final = b.recv(right, st.ccw_landing, {}, step);
      }
    }
  }
  out.result_ready = cw_final;
  if (h.ccw > 0)
    out.result_ready = b.reduce(st.ccw_landing, st.result, {cw_final, ccw_final},
                                first_step + static_cast<uint32_t>(h.cw - 1));
  return out;
}

// Emits the AllGather phase (n >= 2): the own chunk is ready after `own_ready`
// (or is read from `own_src` without a dependency when own_ready is empty);
// the receive of chunk t waits for before_write[t].
void emit_allgather(ProgramBuilder& b, int n, int r, const std::function<Region(int t)>& chunk,
                    Region own_src, const std::vector<OpIndex>& own_ready,
                    const std::vector<std::vector<OpIndex>>& before_write, uint32_t first_step) {
  const Split h = split_hops(n);
  const int right = ring_add(r, 1, n);
  const int left = ring_add(r, -1, n);
  OpIndex cw_recv = 0, ccw_recv = 0;
  for (int s = 0; s < h.cw; ++s) {
    const uint32_t step = first_step + static_cast<uint32_t>(s);
    const bool ccw_active = s < h.ccw;
    // Forward what arrived one step earlier (the own chunk at s = 0).
    if (s == 0) {
      b.send(right, own_src, own_ready, step);
      if (ccw_active) b.send(left, own_src, own_ready, step);
    } else {
      b.send(right, chunk(ring_add(r, -s, n)), {cw_recv}, step);
      if (ccw_active) b.send(left, chunk(ring_add(r, s, n)), {ccw_recv}, step);
    }
    const int cw_t = ring_add(r, -1 - s, n);
    cw_recv = b.recv(left, chunk(cw_t), before_write[static_cast<size_t>(cw_t)], step);
    if (ccw_active) {
      const int ccw_t = ring_add(r, 1 + s, n);
      ccw_recv = b.recv(right, chunk(ccw_t), before_write[static_cast<size_t>(ccw_t)], step);
    }
  }
}

Program build_bidir_ring_allreduce(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t parts = static_cast<size_t>(n);
  ProgramBuilder b(buffer_counts(spec));
  auto chunk = [&](int t) { return block(spec.count, parts, static_cast<size_t>(t)); };
  const Chunk own = chunk(r);

  // Phase 1: ReduceScatter. Partial sums of chunk t accumulate in the output
  // at chunk t: each chunk is folded at most once per rank, so no rotation is
  // needed. In place, the input chunk a receive reads is the very memory it
  // writes; the chunks sent straight from the input (r+a and r-b) are never
  // folded on this rank.
  RsStorage st;
  st.input_chunk = [&](int t) {
    const Chunk c = chunk(t);
    return B::input(c.offset, c.count);
  };
  st.partial = [&](int, int, int t) {
    const Chunk c = chunk(t);
    return B::output(c.offset, c.count);
  };
  st.result = B::output(own.offset, own.count);
  st.ccw_landing = B::scratch(b.alloc_scratch(split_hops(n).ccw > 0 ? own.count : 0), own.count);
  const RsOps rs = emit_reduce_scatter(b, n, r, st, 0);

  // Phase 2: AllGather of the reduced chunks. Receiving chunk t overwrites
  // what the ReduceScatter send of chunk t read (the partial, or in place the
  // input), so it waits for that send.
  std::vector<std::vector<OpIndex>> before_write(parts);
  for (int t = 0; t < n; ++t)
    if (t != r) before_write[static_cast<size_t>(t)] = {rs.last_reader[static_cast<size_t>(t)]};
  auto out_chunk = [&](int t) {
    const Chunk c = chunk(t);
    return B::output(c.offset, c.count);
  };
  emit_allgather(b, n, r, out_chunk, st.result, {rs.result_ready}, before_write,
                 static_cast<uint32_t>(split_hops(n).cw));
  return std::move(b).finish();
}

Program build_bidir_ring_allgather(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  // Own block into place (a no-op in place).
  b.copy(B::input(0, c), B::output(static_cast<size_t>(r) * c, c));
  auto out_block = [&](int t) { return B::output(static_cast<size_t>(t) * c, c); };
  // Every block but the own one is written once, by its receive, and read
  // only after it: no receive needs to wait. The first sends read the input,
  // which nothing writes.
  const std::vector<std::vector<OpIndex>> before_write(static_cast<size_t>(n));
  emit_allgather(b, n, r, out_block, B::input(0, c), {}, before_write, 0);
  return std::move(b).finish();
}

Program build_bidir_ring_reduce_scatter(const CollectiveSpec& spec) {
  const int n = spec.nranks;
  const int r = spec.rank;
  const size_t c = spec.count;
  ProgramBuilder b(buffer_counts(spec));
  // Partial sums cannot go to the input (read-only) nor to the output (one
  // block only), so each direction rotates them through two scratch blocks.
  // Clockwise has a - 1 partials, counter-clockwise b - 1; the last partial of
  // each direction lands in the output (cw) and a landing block (ccw).
  const Split h = split_hops(n);
  auto slots = [&](int partials) {
    const size_t first = b.alloc_scratch(partials >= 1 ? c : 0);
    const size_t second = b.alloc_scratch(partials >= 2 ? c : 0);
    return std::array<size_t, 2>{first, second};
  };
  const std::array<size_t, 2> cw_slots = slots(h.cw - 1);
  const std::array<size_t, 2> ccw_slots = slots(h.ccw - 1);
  const int ccw_start = h.cw - h.ccw;
  RsStorage st;
  st.input_chunk = [&](int t) { return B::input(static_cast<size_t>(t) * c, c); };
  st.partial = [&](int dir, int s, int) {
    const size_t slot = dir == 0 ? cw_slots[static_cast<size_t>(s % 2)]
                                 : ccw_slots[static_cast<size_t>((s - ccw_start) % 2)];
    return B::scratch(slot, c);
  };
  st.rotating = true;
  // In place the output is the input block r: only the last clockwise receive
  // reads it (as the own contribution) and writes it, the very same memory.
  st.result = B::output(0, c);
  st.ccw_landing = B::scratch(b.alloc_scratch(h.ccw > 0 ? c : 0), c);
  emit_reduce_scatter(b, n, r, st, 0);
  return std::move(b).finish();
}

// a = floor(N/2) steps per phase; in each, one chunk (M/N) goes each way
// round, on separate ports, and the two directions never wait for each
// other's ports: a step costs alpha + (M/N)/beta (+ gamma M/N). In the last
// ReduceScatter step the two partial sums of a chunk meet at its owner, which
// folds them one after the other: one gamma M/N more (for N >= 3, where both
// directions exist).
double bidir_folds(int n) {
  return n / 2 + (n >= 3 ? 1 : 0);
}

Prediction bidir_allreduce_time(int n, double m, const CostParams& p) {
  const double a = n / 2;
  const double c = m / n;
  return Prediction::time(2 * a * (p.alpha + c / p.beta) + bidir_folds(n) * c * p.gamma);
}

Prediction bidir_allgather_time(int n, double m, const CostParams& p) {
  return Prediction::time((n / 2) * (p.alpha + m / n / p.beta));
}

Prediction bidir_reduce_scatter_time(int n, double m, const CostParams& p) {
  const double c = m / n;
  return Prediction::time((n / 2) * (p.alpha + c / p.beta) + bidir_folds(n) * c * p.gamma);
}

constexpr ClosedForm kAllreduceCost[] = {
    {bidir_allreduce_time, 2, "switch ring",
     "2 floor(N/2) (alpha + M/(N beta)) + (floor(N/2) + 1) M/N gamma"}};
constexpr ClosedForm kAllgatherCost[] = {
    {bidir_allgather_time, 2, "switch ring", "floor(N/2) (alpha + M/(N beta))"}};
constexpr ClosedForm kReduceScatterCost[] = {
    {bidir_reduce_scatter_time, 2, "switch ring",
     "floor(N/2) (alpha + M/(N beta)) + (floor(N/2) + 1) M/N gamma"}};

}  // namespace

extern const Algorithm kBidirRingAllreduce{
    Collective::allreduce,
    "bidir_ring",
    "ReduceScatter + AllGather, chunks going both ways round",
    build_bidir_ring_allreduce,
    nullptr,
    kAllreduceCost,
    "any N; N = 2 uses one direction"};
extern const Algorithm kBidirRingAllgather{
    Collective::allgather,
    "bidir_ring",
    "floor(N/2) steps passing blocks both ways round the ring",
    build_bidir_ring_allgather,
    nullptr,
    kAllgatherCost,
    "any N"};
extern const Algorithm kBidirRingReduceScatter{
    Collective::reduce_scatter,
    "bidir_ring",
    "floor(N/2) steps, partial sums meeting from both sides",
    build_bidir_ring_reduce_scatter,
    nullptr,
    kReduceScatterCost,
    "any N"};

}  // namespace chorus
