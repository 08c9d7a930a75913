// Mismatched calls, one scenario per kind, run by every rank of a
// communicator: the last rank (the odd one out) makes a call that differs
// from the others' in one respect, then every rank makes one correct
// AllReduce. What must hold on every rank:
//   - the mismatched call raises ErrorCode::mismatch, or returns with exactly
//     the data its own call asked for (a rank that only sends may finish
//     before the news arrives);
//   - the AllReduce after it raises mismatch (the communicator is broken:
//     no call runs on the channels of a mismatched one);
//   - every message names both sides ("mismatched calls: rank 3 called ...").
// Used by tests/api/mismatch_test.cc (threads, inproc) and by mp_check
// (processes, shm and tcp).
#pragma once

#include <chorus/communicator.h>

#include <string>
#include <string_view>
#include <vector>

namespace chorus::testing {

// count_large, count_small, collective, dtype, op, root, algorithm,
// p2p_count, p2p_tag, p2p_dtype.
const std::vector<std::string>& mismatch_kinds();

struct MismatchOutcome {
  std::string problems;  // "" when everything above held on this rank
  // From the start of the mismatched call to this rank's first error.
  double seconds_to_error = 0;
};

// Runs the scenario `kind` on this rank.
MismatchOutcome run_mismatch_case(Communicator& comm, std::string_view kind);

}  // namespace chorus::testing
