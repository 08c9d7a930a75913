// A deterministic reduction (CallOptions::deterministic; core/exact_sum.h,
// engine/deterministic.cc) as the simulator and the tuner's model see it: the
// calls it makes, and their simulated time.
//
//   whole road   scales:   AllReduce(max) of block_count + 1 int32
//                integers: the call's collective on count * lanes int64 (sum)
//                local:    every element to its fixed form and back
//   scatter road an AllToAll of the elements (each rank gets every rank's
//                part of its block of ceil(count / N), in whole blocks of 64),
//                the N contributions of its block summed on each rank, an
//                AllGather of the results (AllReduce only)
//   gather road  AllGather of the elements, then the N contributions of each
//                element summed on every rank (AllReduce only)
//
// The parts run one after the other (each is a call of its own), so the
// simulated time is the sum of theirs plus the local work, which runs at the
// copy rate of the fitted model (or gamma per byte).
#pragma once

#include "algorithms/algorithm.h"
#include "sim/simulator.h"
#include "sim/topology.h"

#include <chorus/types.h>

namespace chorus {

struct DeterministicParts {
  CollectiveSpec scales;    // the scale pass (an AllReduce of int32)
  CollectiveSpec integers;  // the integer pass (int64 lanes)
  // Bytes a rank reads and writes turning its elements into fixed forms and
  // its results back.
  double local_bytes = 0;
};

// The whole road's parts of `call` (the user's spec; elem_size is the
// element type's) for elements of `type`.
DeterministicParts deterministic_parts(const CollectiveSpec& call, DataType type);

// Seconds of the whole road with `algo` carrying the integer pass
// (recursive_doubling the scale pass), on `topology` with `options`'
// parameters (its elem_size is set per part).
double simulate_deterministic(const Algorithm& algo, const CollectiveSpec& call, DataType type,
                              const Topology& topology, SimOptions options);

// Seconds of the scatter road of an AllReduce `call`: a pairwise AllToAll of
// the elements, the local sums of each rank's block, a ring AllGather.
double simulate_deterministic_scatter(const CollectiveSpec& call, DataType type,
                                      const Topology& topology, SimOptions options);

// Seconds of the gather road (ring AllGather, then the local sums) of an
// AllReduce `call`.
double simulate_deterministic_gather(const CollectiveSpec& call, DataType type,
                                     const Topology& topology, SimOptions options);

}  // namespace chorus
