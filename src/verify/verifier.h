// The symbolic verifier: runs the Programs of all N ranks of one collective
// without data and proves that they are well formed, matched, deadlock-free
// under rendezvous sends, race-free in and out of place, and that they compute
// the collective.
//
//   VerifyResult r = verify_programs(spec, programs, "ring");
//   if (!r.ok()) std::cerr << r.error->message;   // names algorithm, N, count, rank, op
//
// analysis/verify_algorithm.h builds a registered algorithm's Programs and
// verifies them: verify(algorithm, spec).
//
// What is checked, in order (the first problem found is returned):
//   1. well formed: one Program per rank, Input/Output counts as the collective
//      says, known op kinds, regions inside their buffers, equal src/dst counts,
//      deps naming earlier ops (a later, missing or own index is an error, and a
//      cycle is named as such), Input never written, Broadcast never reading
//      Input off the root, Reduce never writing Output off the root;
//   2. matched: the k-th send a->b meets the k-th receive at b from a with the
//      same count, nothing left over (schedule/matching.h);
//   3. race-free, for the out-of-place layout and, where the collective has one,
//      the in-place layout (see race_check.h);
//   4. deadlock-free when a send completes only together with its receive, once
//      both have started, and an op starts after its deps have completed and its
//      channel predecessor has started;
//   5. correct: every element carries the set of ranks whose input it holds (for
//      the data-moving collectives: which rank's which element); reducing two
//      sets that share a rank, or two different elements, is an error; at the
//      end every Output element must hold what the collective defines, and for
//      the Barrier every rank's completion must causally follow every rank's
//      start; for an average (spec.average) every reduced Output element is
//      divided by N exactly once, and nothing is reduced into it after.
// One-sided Programs (get, get_reduce, signal, wait; schedule/program.h) are
// proven too, the steps above extended and a new one before the symbolic run:
//   1. the call shares windows (spec.windows), peers and flags are in range,
//      a get's remote region is a buffer peers may read, inside the peer's
//      buffer, and, with the call's buffers outside windows
//      (!spec.window_buffers), staged by the peer (Program::window_input /
//      window_output), inside its staging window;
//   2. every wait meets the one signal of the call from that peer with that
//      flag: a wait without one hangs (unmatched_wait), a signal without a
//      wait, or a second signal or wait of one flag, is an error too;
//      and every get of a peer q's memory depends (through deps, in its own
//      Program) on a wait for q (unchecked_read): the executor compares q's
//      call stamp, which q publishes before it raises any flag, with its own
//      at every wait for q, so this is where a rank in another call (another
//      count, dtype, op, root or algorithm) is caught before a byte is read;
//   3. race-free, where two ops of one rank may also be ordered through other
//      ranks (a signal raised after a wait for this rank's signal);
//   4. deadlock-free, a wait completing once its signal has;
//   5. correct, a get reading the peer's symbolic memory;
//   and, before 5, with happens-before taken over deps and signal -> wait
//   edges (verify/happens_before.h), for every get of a peer q's memory:
//     - it follows some op of q (q has entered the call), and each write of
//       q to that memory is ordered with it: a write it is meant to read (one
//       before, in q's program, the latest op of q it follows) comes before
//       it (read_before_signal), any other after it (overwrite_before_read);
//     - it happens before some op of q, so before q's call returns, after
//       which q's buffers go back to the caller and its staging window is
//       overwritten by the next call (read_after_return).
// The verifier never prints, exits or throws for a bad schedule: problems come
// back as a VerifyError.
#pragma once

#include "schedule/collective.h"
#include "schedule/matching.h"
#include "schedule/program.h"

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

enum class VerifyErrorKind {
  unsupported_mix,        // some ranks' supports() accept the case, others decline it
  build_failed,           // a builder threw
  program_count,          // not one Program per rank
  buffer_size,            // input_count / output_count differ from the collective's
  bad_op_kind,            // an OpKind outside the enum
  region_out_of_bounds,   // a region reaches past its buffer
  region_count_mismatch,  // copy / reduce / recv_reduce with src and dst counts that differ
  self_dependency,        // an op lists itself in deps
  forward_dependency,     // an op depends on a later op (without forming a cycle)
  missing_dependency,     // a dep names an op index the program does not have
  dependency_cycle,       // deps form a cycle
  input_written,          // an op writes Input
  forbidden_access,       // Broadcast reads Input off the root / Reduce writes Output off the root
  bad_peer,               // peer outside [0, N) or the rank itself
  unmatched_send,         // a send without a matching receive
  unmatched_receive,      // a receive without a matching send
  count_mismatch,         // a send and its receive differ in count
  overlapping_operands,   // an op's source and destination partly overlap
  race,                   // two unordered ops touch the same memory, one writing
  deadlock,               // some op can never complete under rendezvous sends
  double_contribution,    // a reduce adds a rank's contribution a second time
  misaligned_reduce,      // a reduce combines two different element indices
  wrong_result,           // an Output element does not hold what the collective defines
  barrier_incomplete,     // a rank may leave the barrier before another has arrived
  bad_spec,               // the request itself is invalid (N < 1, root outside [0, N))
  // One-sided Programs:
  no_windows,             // a one-sided op or window region where the ranks share no windows
  bad_flag,               // a signal or wait with a flag outside [0, kMaxFlags)
  bad_remote_region,      // a get's remote region is no buffer peers can read, or reaches past
                          // the peer's buffer or staging window
  remote_not_staged,      // a get reads a peer's shared input or output the peer never stages
  unmatched_wait,         // a wait for a signal the peer never raises (missing signal: a hang)
  unmatched_signal,       // a signal that no wait at the peer consumes
  duplicate_signal,       // two signals of one flag to one peer in one call
  duplicate_wait,         // two waits for the one signal of a peer and flag
  read_before_signal,     // a get may read a peer's memory before the peer's write of it
  overwrite_before_read,  // a rank may overwrite memory of its own before a peer's get of it
  read_after_return,      // a get may read a peer's memory after the peer's call returned
  unchecked_read,         // a get of a peer's memory follows no wait for that peer in its
                          // own program, so no comparison of the peer's call stamp
};
inline constexpr int kVerifyErrorKindCount = 37;
std::string_view to_string(VerifyErrorKind kind);

struct VerifyError {
  VerifyErrorKind kind = VerifyErrorKind::wrong_result;
  int rank = -1;       // the rank at fault, -1 when not one rank's
  OpIndex op = kNoOp;  // the op at fault, kNoOp when none
  std::string layout;  // "out_of_place", "in_place" or "" when layout-independent
  // Full description: "allreduce(ring) N=7 count=1031 in_place: rank 3 op 12
  // (recv peer=2 dst=output[0,+148) deps={11} step=6): ...".
  std::string message;
};

// Per-rank counts, for comparison with the seeds' formulas.
struct RankStats {
  size_t messages_sent = 0;
  size_t bytes_sent = 0;
  size_t messages_received = 0;
  size_t bytes_received = 0;
  size_t elements_reduced = 0;  // elements combined by recv_reduce, reduce and get_reduce
  size_t ops = 0;
  // Distinct step numbers among the rank's send/receive ops and one-sided ops.
  size_t distinct_steps = 0;
  // Latency depth in messages: when every message takes one unit of time, local
  // ops none, a send and its receive complete together once both have started,
  // and ports are unlimited, the time at which the rank's last op completes. A
  // get takes one unit, and a wait completes one unit after its signal.
  size_t critical_path = 0;
  size_t gets = 0;       // get and get_reduce ops
  size_t bytes_got = 0;  // bytes they read from peers
  size_t signals = 0;    // signal ops
};

struct VerifyResult {
  bool supported = true;  // false when supports() declined the case; then nothing ran
  std::string reason;     // supports()' reason when !supported
  std::optional<VerifyError> error;
  std::vector<RankStats> ranks;  // filled as far as verification got
  size_t critical_path = 0;      // max over ranks
  size_t total_messages = 0;
  bool in_place_checked = false;  // whether the in-place layout was verified too

  bool ok() const { return supported && !error; }
};

// Verifies given Programs (programs[r] is rank r's) for `spec` (spec.rank is
// ignored). `algorithm` only names the schedule in messages.
VerifyResult verify_programs(const CollectiveSpec& spec, std::span<const Program> programs,
                             std::string_view algorithm = "custom");

}  // namespace chorus
