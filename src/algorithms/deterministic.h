// A deterministic reduction (CallOptions::deterministic; core/exact_sum.h)
// described once: which road a call takes and the calls of the communicator
// each road makes, in order. engine/deterministic.cc runs this description,
// the simulator and the tuner's model price it (simulate_deterministic_plan),
// and the verifier proves each of its parts (verify_deterministic_plan), so
// that what is predicted and proved is what runs.
//
//   whole    (an algorithm is named: CallOptions or CHORUS_ALGO)
//            scales    AllReduce(max) of one uint8 per element (the elements
//                      of every rank's part for ReduceScatter) and one flag:
//                      some rank holds an infinity or a NaN (float16: the
//                      flag only)
//            integers  the call's collective on count * lanes int64 (sum),
//                      with the named algorithm
//            specials  the same collective on one int64 per element, only
//                      when flagged
//            local     every element to its fixed form and back
//   scatter  (no algorithm named; AllReduce and Reduce over 64 KiB gathered,
//            ReduceScatter at any size)
//            exchange  AllToAll: each rank receives every rank's part of its
//                      block of ceil(count / N) elements (ReduceScatter: its
//                      own part of count), and sums the N contributions
//                      (exact::sum_gathered; no scale pass: it sees them all)
//            collect   AllGather of the sums (AllReduce, Reduce; not
//                      ReduceScatter)
//   gather   (no algorithm named; AllReduce and Reduce, N * count at most
//            64 KiB) collect: AllGather of the elements, then every rank
//            that keeps the result sums the N contributions of each element
//
// The parts run one after the other (each is a call of its own), so the
// simulated time is the sum of theirs plus the local work, which runs at the
// copy rate of the fitted model (or gamma per byte). Each part names the
// algorithm that carries it: the named one for the integer pass, else what
// the pick (the communicator's selector at run time) returns.
#pragma once

#include "algorithms/algorithm.h"
#include "sim/simulator.h"
#include "sim/topology.h"

#include <chorus/types.h>

#include <functional>
#include <string>
#include <vector>

namespace chorus {

enum class DeterministicRoad { whole, scatter, gather };
inline constexpr int kDeterministicRoadCount = 3;
const char* to_string(DeterministicRoad road);

// What a part of a road is for; the runtime's local work before and after
// the part's call follows from it.
enum class DeterministicRole {
  scales,    // AllReduce(max) of the uint8 scale codes and the flag
  integers,  // the call's collective on the fixed forms (int64 lanes, sum)
  specials,  // the call's collective on the counts of infinities and NaNs
  exchange,  // AllToAll of the elements; each rank then sums its block
  collect,   // AllGather: of the elements (gather), or of the sums (scatter)
};
const char* to_string(DeterministicRole role);

struct DeterministicPart {
  DeterministicRole role = DeterministicRole::integers;
  // The call: collective, count, elem_size, root; nranks, rank, host_of and
  // windows are the user's call's.
  CollectiveSpec spec;
  DataType type = DataType::int64;
  ReduceOp op = ReduceOp::sum;
  std::string algorithm;  // what carries it
  // The call named `algorithm` (the whole road's integer and specials
  // passes), so it runs with it; else it is the pick, and the runtime
  // leaves the choice to its selector, which picks the same (and learns).
  bool named = false;
  // Runs only when some contribution is an infinity or a NaN (the scale
  // pass's flag); the model leaves it out.
  bool only_with_specials = false;
};

struct DeterministicPlan {
  DeterministicRoad road = DeterministicRoad::whole;
  std::vector<DeterministicPart> parts;
  // Elements of each rank's block on the scatter road (count / N rounded up;
  // ReduceScatter: count); 0 on the others.
  size_t block = 0;
  // Bytes a rank reads and writes in its local work (fixed forms and back,
  // or the local sums).
  double local_bytes = 0;
};

// The road a deterministic call takes: whole when an algorithm is named,
// else gather for an AllReduce or Reduce whose N contributions fit in 64
// KiB, else scatter.
DeterministicRoad deterministic_road(Collective collective, int nranks, size_t count,
                                     size_t elem_size, bool algorithm_named);

// Picks the algorithm of one part (spec, type and op are the part's).
using DeterministicPick =
    std::function<std::string(const CollectiveSpec& part, DataType type, ReduceOp op)>;
// The pick without a communicator: recursive_doubling for a scale pass of
// at most 64 KiB (ring beyond), pairwise for AllToAll, ring for AllGather,
// and ring for an integer pass (or the first algorithm that serves it).
std::string default_deterministic_pick(const CollectiveSpec& part, DataType type, ReduceOp op);

// The road's parts of `call` (the user's spec; its elem_size the type's; for
// ReduceScatter its count is per rank). `algorithm`, when not empty, carries
// the integer and specials passes of the whole road; the other parts take
// what `pick` returns. Raises invalid_argument for a collective or type
// without a deterministic form, or a road the collective does not take.
DeterministicPlan deterministic_plan(const CollectiveSpec& call, DataType type,
                                     DeterministicRoad road, const std::string& algorithm,
                                     const DeterministicPick& pick = default_deterministic_pick);

// Seconds of a plan on `topology` with `options`' parameters (its elem_size
// is set per part): its parts that always run, one after the other, plus
// the local work.
double simulate_deterministic_plan(const DeterministicPlan& plan, const Topology& topology,
                                   SimOptions options);

// Shorthands over deterministic_plan and simulate_deterministic_plan.
// The whole road with `algo` carrying the integer pass.
double simulate_deterministic(const Algorithm& algo, const CollectiveSpec& call, DataType type,
                              const Topology& topology, SimOptions options);
// The scatter road (default picks).
double simulate_deterministic_scatter(const CollectiveSpec& call, DataType type,
                                      const Topology& topology, SimOptions options);
// The gather road (default picks).
double simulate_deterministic_gather(const CollectiveSpec& call, DataType type,
                                     const Topology& topology, SimOptions options);

}  // namespace chorus
