// Proving a registered algorithm: its Programs for every rank, built through
// the registry, put through the symbolic verifier (verify/verifier.h).
//
//   VerifyResult r = verify(*find_algorithm(Collective::allreduce, "ring"),
//                           {Collective::allreduce, /*nranks=*/7, 0, /*count=*/1031, 4});
//   if (!r.ok()) std::cerr << r.error->message;   // names algorithm, N, count, rank, op
#pragma once

#include "algorithms/algorithm.h"

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
// depend on the schedule: every part it runs is verified symbolically, and
// the proof of each is that every Output element holds each rank's element
// of the same index exactly once (verify_programs' correctness step). The
// parts carry integers (the scale pass int32 under max, the integer pass
// int64 lanes under sum), whose max and sum are associative and
// commutative, so the value is the same in every order of any schedule; the
// conversion back is a function of that value alone. `base` is the user's
// call (elem_size the type's); `algorithm` carries the integer pass (an
// AllToAll algorithm proves the scatter road instead: its AllToAll and the
// ring AllGather after it move every element unchanged, so each rank sums
// exactly the N contributions of its block). Returns the first failure,
// else the integer pass's (or the AllToAll's) result.
VerifyResult verify_deterministic(const Algorithm& algorithm, const CollectiveSpec& base,
                                  DataType type);

}  // namespace chorus
