// Matching of the Programs of all N ranks of one collective: which receive each
// send meets, and the per-channel order in which ops may start. The verifier
// and the simulator both interpret Programs through this one module, so that
// the rules they check and time are the rules the executor runs by.
//
// Rules (see program.h):
//   - the k-th send from a to b meets the k-th receive (recv or recv_reduce) at
//     b from a; their element counts must be equal;
//   - sends from a to b start in program order, and so do receives at b from a:
//     an op of a channel may start only after the previous op of the same
//     channel has started (its "channel predecessor").
#pragma once

#include "schedule/program.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace chorus {

struct OpRef {
  int rank = -1;
  OpIndex op = 0;
  friend bool operator==(const OpRef&, const OpRef&) = default;
};

inline constexpr OpIndex kNoOp = static_cast<OpIndex>(-1);

struct Matching {
  // partner[r][i]: for a send or receive op i of rank r, the op it meets on the
  // peer; rank -1 for local ops.
  std::vector<std::vector<OpRef>> partner;
  // channel_prev[r][i]: the previous op of rank r on the same channel (same
  // peer, same direction), or kNoOp.
  std::vector<std::vector<OpIndex>> channel_prev;
};

// A problem found while matching, with enough to name it in an error.
struct MatchError {
  enum class Kind { bad_peer, unmatched_send, unmatched_receive, count_mismatch };
  Kind kind;
  int rank = -1;
  OpIndex op = 0;
  int peer = -1;
  std::string message;  // human-readable, names ranks, ops and counts
};

// Matches the programs of ranks 0..N-1 (programs[r] is rank r's). Returns the
// matching, or the first problem found.
struct MatchResult {
  Matching matching;
  std::optional<MatchError> error;
};
MatchResult match_programs(std::span<const Program> programs);

// The same matching over global op ids (rank r's op i is base[r] + i), in
// flat arrays: what an interpreter of all ranks at once indexes by op, at
// tens of thousands of ranks and millions of ops.
inline constexpr uint32_t kNoGlobalOp = static_cast<uint32_t>(-1);
struct FlatMatching {
  std::vector<uint32_t> base;          // N + 1 entries; base[N] is the total
  std::vector<uint32_t> partner;       // the op a send or receive meets, or kNoGlobalOp
  std::vector<uint32_t> channel_prev;  // the previous op of its channel, or kNoGlobalOp
};
struct FlatMatchResult {
  FlatMatching matching;
  std::optional<MatchError> error;  // the same first problem as match_programs
};
// Throws Error(invalid_argument) when there are 2^32 - 1 ops or more in all.
FlatMatchResult match_programs_flat(std::span<const Program> programs);

}  // namespace chorus
