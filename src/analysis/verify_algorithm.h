// Proving a registered algorithm: its Programs for every rank, built through
// the registry, put through the symbolic verifier (verify/verifier.h).
//
//   VerifyResult r = verify(*find_algorithm(Collective::allreduce, "ring"),
//                           {Collective::allreduce, /*nranks=*/7, 0, /*count=*/1031, 4});
//   if (!r.ok()) std::cerr << r.error->message;   // names algorithm, N, count, rank, op
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/deterministic.h"

#include <chorus/types.h>
#include "verify/verifier.h"

namespace chorus {

// Builds the Programs of all `base.nranks` ranks with `algorithm` (base.rank
// is ignored, and the collective is the algorithm's) and verifies them. When
// every rank declines the case, returns supported == false with the reason;
// when only some do, an unsupported_mix error.
VerifyResult verify(const Algorithm& algorithm, const CollectiveSpec& base);

// Proves that a deterministic call (CallOptions::deterministic;
// algorithms/deterministic.h) gives each element a value that does not
// depend on the schedule: every part of its plan (the description the
// runtime runs) is verified symbolically with the algorithm the plan names
// for it, and the proof of each is that every Output element holds each
// rank's element of the same index exactly once (verify_programs'
// correctness step). The parts carry integers under max and sum (the scale
// pass, the integer and specials passes), which are associative and
// commutative, so the value is the same in every order of any schedule, or
// move the elements unchanged (the scatter road's AllToAll and AllGather,
// the gather road's AllGather), so each rank's local sums see exactly the N
// contributions of their elements; the conversion back is a function of
// those alone. Returns the first failure, else the last part's result
// (supported false where a part's algorithm declines its case).
VerifyResult verify_deterministic_plan(const DeterministicPlan& plan);

// verify_deterministic_plan of the whole road with `algorithm` carrying the
// integer pass, or, for an AllToAll `algorithm` and an AllReduce, the
// scatter road with it carrying the exchange. `base` is the user's call
// (elem_size the type's).
VerifyResult verify_deterministic(const Algorithm& algorithm, const CollectiveSpec& base,
                                  DataType type);

}  // namespace chorus
