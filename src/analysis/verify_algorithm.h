// Proving a registered algorithm: its Programs for every rank, built through
// the registry, put through the symbolic verifier (verify/verifier.h).
//
//   VerifyResult r = verify(*find_algorithm(Collective::allreduce, "ring"),
//                           {Collective::allreduce, /*nranks=*/7, 0, /*count=*/1031, 4});
//   if (!r.ok()) std::cerr << r.error->message;   // names algorithm, N, count, rank, op
#pragma once

#include "algorithms/algorithm.h"
#include "verify/verifier.h"

namespace chorus {

// Builds the Programs of all `base.nranks` ranks with `algorithm` (base.rank
// is ignored, and the collective is the algorithm's) and verifies them. When
// every rank declines the case, returns supported == false with the reason;
// when only some do, an unsupported_mix error.
VerifyResult verify(const Algorithm& algorithm, const CollectiveSpec& base);

}  // namespace chorus
