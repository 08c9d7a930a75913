// The collectives chorus offers, by name, and what each one is: whether it
// reduces, whether it has a root, how many blocks of `count` elements its
// buffers hold, and its in-place form. Every layer asks these questions here
// and nowhere else: the configuration (per-collective overrides), argument
// checks, call stamps, the Program builders, the verifier, the model, the
// exact checks of the tools and tests.
//
// A new collective is one enum value (include/chorus/types.h), one row of
// kCollectiveTraits and one name in kCollectiveNames (collective.cc); then
// what only it can say, each a switch without a default so that the compiler
// names the place: its result (the verifier's expected output,
// verify/verifier_symbolic.cc; perf/perf_check.cc's exact data), its lower
// bound (model/cost_model.cc) and its bus bandwidth (perf/perf.cc); its named
// calls (Call::x, Communicator::x and x_async); and at least one algorithm.
#pragma once

#include <chorus/types.h>

#include <array>
#include <cstddef>

namespace chorus {

// The enum Collective, its names and parse_collective are public
// (include/chorus/types.h); collective.cc defines them.

// How many blocks of `count` elements one buffer of a call holds, on every rank.
enum class Blocks : unsigned char {
  none,      // no data (barrier)
  one,       // count elements
  per_rank,  // N * count elements: one block per rank
};

// The in-place form of a call (as in NCCL): which buffer lies inside which.
enum class InPlace : unsigned char {
  none,          // send and recv must not overlap (alltoall, barrier)
  same,          // send == recv (allreduce, broadcast, reduce)
  send_in_recv,  // send == recv + rank * count elements (allgather; gather on the root)
  recv_in_send,  // recv == send + rank * count elements (reduce_scatter; scatter on the root)
};

struct CollectiveTraits {
  bool reduces = false;  // combines the ranks' data with a ReduceOp
  bool rooted = false;   // has a root rank
  Blocks input = Blocks::one;
  Blocks output = Blocks::one;
  InPlace in_place = InPlace::none;
  // Rooted collectives use one buffer on the root only: broadcast and
  // scatter read send on the root only, reduce and gather write recv on the
  // root only.
  bool input_on_root_only = false;
  bool output_on_root_only = false;
};

// One row per Collective, in enum order.
inline constexpr std::array<CollectiveTraits, kCollectiveCount> kCollectiveTraits{{
    // reduces rooted input            output           in place
    {true, false, Blocks::one, Blocks::one, InPlace::same},                // allreduce
    {false, false, Blocks::one, Blocks::per_rank, InPlace::send_in_recv},  // allgather
    {true, false, Blocks::per_rank, Blocks::one, InPlace::recv_in_send},   // reduce_scatter
    {false, true, Blocks::one, Blocks::one, InPlace::same, true, false},   // broadcast
    {true, true, Blocks::one, Blocks::one, InPlace::same, false, true},    // reduce
    {false, false, Blocks::per_rank, Blocks::per_rank, InPlace::none},     // alltoall
    {false, false, Blocks::none, Blocks::none, InPlace::none},             // barrier
    {false, true, Blocks::one, Blocks::per_rank, InPlace::send_in_recv, false, true},  // gather
    {false, true, Blocks::per_rank, Blocks::one, InPlace::recv_in_send, true, false},  // scatter
}};

constexpr const CollectiveTraits& traits(Collective c) {
  return kCollectiveTraits[static_cast<size_t>(c)];
}
// The ranks' data are combined with a ReduceOp (allreduce, reduce_scatter, reduce).
constexpr bool reduces(Collective c) {
  return traits(c).reduces;
}
// The call names a root rank (broadcast, reduce).
constexpr bool rooted(Collective c) {
  return traits(c).rooted;
}
// The call moves data (every collective but the barrier).
constexpr bool has_data(Collective c) {
  return traits(c).input != Blocks::none;
}
// Elements in a buffer of `blocks` for a call of `count` on `nranks` ranks.
constexpr size_t block_elements(Blocks blocks, size_t count, int nranks) {
  switch (blocks) {
    case Blocks::none:
      return 0;
    case Blocks::one:
      return count;
    case Blocks::per_rank:
      return count * static_cast<size_t>(nranks);
  }
  return 0;
}
// The API's count is one rank's block of a larger buffer (allgather,
// reduce_scatter, alltoall): the call moves N blocks of count elements.
constexpr bool per_rank_blocks(Collective c) {
  return traits(c).input == Blocks::per_rank || traits(c).output == Blocks::per_rank;
}
// Whether `rank` reads its send buffer / writes its recv buffer in this call.
constexpr bool uses_input(Collective c, int rank, int root) {
  return has_data(c) && (!traits(c).input_on_root_only || rank == root);
}
constexpr bool uses_output(Collective c, int rank, int root) {
  return has_data(c) && (!traits(c).output_on_root_only || rank == root);
}

}  // namespace chorus
