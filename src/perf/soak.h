// chorus-soak, the library part: thousands of random calls on one
// communicator, every element of every output checked exactly against
// perf_check.h's expected values. The command line and the printed report are
// tools/soak_cli.h.
//
// Every rank derives call i from (seed, i) alone, so all ranks issue the same
// calls in the same order, and one call can be replayed by itself
// (first = i, calls = 1). A call is one of the collectives or a batch of
// point-to-point messages, with a random count (0, 1, around N, primes,
// log-uniform up to max_bytes per buffer), dtype, op, root, algorithm (one
// that serves the call on every rank, by name, or automatic), placement (the
// API's in-place forms) and, for allreduce and point-to-point, blocking or
// asynchronous. Asynchronous calls stay outstanding across later calls, a few
// at a time, and are checked once they complete.
//
// What is checked, on every rank:
//   - each output element, bit for bit, against perf_check's expected value;
//     outputs start as poison (perf::poison), so an unwritten element counts
//     as wrong;
//   - out of place, the input is unchanged after the call; a non-root's
//     output of reduce is never written; in place, reduce_scatter leaves the
//     input's other blocks alone.
//
//   SoakOptions o;
//   o.calls = 200;
//   run_ranks(3, [&](Communicator& comm) { SoakReport r = run_soak(comm, o); });
#pragma once

#include "schedule/collective.h"

#include <chorus/communicator.h>
#include <chorus/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::perf {

// What one soak call is: a collective, or a batch of sends and receives.
enum class SoakKind : int {
  allreduce,
  allgather,
  reduce_scatter,
  broadcast,
  reduce,
  alltoall,
  barrier,
  send_recv,
  gather,
  scatter,
};
inline constexpr int kSoakKindCount = 10;
std::string_view to_string(SoakKind kind);

struct SoakOptions {
  size_t calls = 1000;                      // --calls
  uint64_t seed = 1;                        // --seed
  size_t first = 0;                         // --first: index of the first call
  size_t max_bytes = size_t{4} << 20;       // --max-bytes: largest buffer of a call, per rank
  std::chrono::milliseconds time_limit{0};  // --time-limit: stop early after this; 0 = none
  // Test hook (hidden flag --corrupt-one): the last rank flips one element of
  // the first non-empty output it checks, so the report must say 1 wrong.
  bool corrupt_one = false;
};

// One message of a send_recv call.
struct SoakMessage {
  int from = 0;
  int to = 0;
  size_t count = 0;
  DataType type = DataType::float32;
};

// One call, as every rank derives it from (seed, index).
struct SoakCall {
  size_t index = 0;
  SoakKind kind = SoakKind::allreduce;
  size_t count = 0;  // as the API counts it
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  std::string algorithm;  // "" lets chorus choose
  bool in_place = false;
  bool async = false;                 // submitted and left outstanding (Work)
  std::vector<SoakMessage> messages;  // send_recv: in the order every rank issues them
  // Outstanding asynchronous calls above this many are waited for after
  // this call (in the order of `wait_order`'s draws).
  size_t max_outstanding = 0;
  uint64_t wait_order = 0;
  uint64_t rank_salt = 0;  // seeds each rank's buffer misalignment
};

// Call `index` of the sequence of `seed` on a communicator of `nranks` ranks
// (the algorithm candidates use `segment_bytes`, the communicator's
// CHORUS_SEGMENT). The same on every rank.
SoakCall soak_call(uint64_t seed, size_t index, int nranks, size_t max_bytes,
                   size_t segment_bytes = 0);
// "call 12: allreduce count=1021 float16 prod algo=ring in-place async".
std::string describe(const SoakCall& call);

// Counts of one kind of call.
struct SoakTally {
  uint64_t calls = 0;
  uint64_t in_place = 0;
  uint64_t async = 0;
  uint64_t named_algorithm = 0;  // calls that named their algorithm
  uint64_t wrong_calls = 0;      // calls with a wrong element on any rank
  uint64_t wrong_elements = 0;   // summed over ranks
  uint64_t failures = 0;         // calls that raised an error
  void add(const SoakTally& other);
};

struct SoakReport {
  int nranks = 1;
  int rank = 0;
  std::string transport;
  SoakOptions options;
  size_t calls = 0;  // calls made
  std::array<SoakTally, kSoakKindCount> kinds{};
  // Failures of the soak's own collectives (the time-limit agreement, the
  // final tally), which belong to no call; total() counts them.
  uint64_t failures_outside_calls = 0;
  // true: the wrong counts are summed over every rank; false: a failure left
  // the communicator unusable, and they are this rank's.
  bool all_ranks = false;
  bool time_limit_hit = false;
  double seconds = 0;
  // This rank's first wrong results and failures, each naming the call.
  std::vector<std::string> problems;

  SoakTally total() const;
  bool ok() const {
    const SoakTally t = total();
    return t.wrong_calls == 0 && t.failures == 0;
  }
};

// What rank 0 hears while the soak runs.
struct SoakHooks {
  // Before the first call: the report so far (ranks, transport, options).
  std::function<void(const SoakReport&)> start;
  // After each call: calls made so far, calls asked for.
  std::function<void(size_t done, size_t total)> progress;
};

// Runs the soak. Every rank calls it with the same options. A failed call
// (an exception) ends the run, since the communicator is unusable after it;
// run_soak itself does not throw for errors of chorus's calls.
SoakReport run_soak(Communicator& comm, const SoakOptions& options, const SoakHooks& hooks = {});

}  // namespace chorus::perf
