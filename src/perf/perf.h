// chorus-perf, the library part: an nccl-tests-style sweep of one or more
// collectives over message sizes, dtypes, ops and algorithms on one
// communicator, with exact data checks, the seed's lower bound per row and the
// nccl-tests table. tools/chorus_perf.cc is a thin main over this.
//
//   PerfOptions o = parse_perf_args({"allreduce", "-b", "8", "-e", "1M"});
//   run_ranks(o.ranks, [&](Communicator& comm) { run_perf(comm, o, &std::cout); });
#pragma once

#include "schedule/collective.h"

#include <chorus/communicator.h>
#include <chorus/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace chorus::perf {

struct PerfOptions {
  std::vector<Collective> collectives;             // positional: one name, or "all"
  size_t min_bytes = 8;                            // -b
  size_t max_bytes = size_t{32} << 20;             // -e
  double step_factor = 2;                          // -f
  int iters = 20;                                  // -n
  int warmup = 5;                                  // -w
  // --min-time: more timed iterations than -n where a row would otherwise
  // time less than this (0 = exactly -n); calibration uses it so that small
  // sizes are not timed over a few microseconds.
  std::chrono::microseconds min_time{0};
  bool check = true;                               // -c
  std::vector<DataType> types{DataType::float32};  // -d (or "all")
  std::vector<ReduceOp> ops{ReduceOp::sum};        // -o (or "all")
  int root = 0;                                    // -r
  bool blocking = true;                            // -z
  std::vector<std::string> algorithms{"auto"};     // -a: names, "all" or "auto"
  int ranks = 2;                                   // --ranks
  bool ranks_given = false;
  std::string transport = "auto";  // --transport
  std::string json_file;           // --json
  std::string calibrate_file;      // --calibrate: write a tuning file instead of a table
  bool help = false;               // -h
  // Test hook (hidden flag --corrupt-one): after each checked call, the last
  // rank flips one output element before counting, so #wrong must say 1.
  bool corrupt_one = false;
};

// Parses the command line (without argv[0]). Throws Error(invalid_argument)
// naming the flag and the value on bad input.
PerfOptions parse_perf_args(std::span<const std::string> args);
std::string perf_usage();

// alpha (s per message) and beta (B/s) measured on this communicator.
struct LinkEstimate {
  double alpha = 0;
  double beta = 0;
};
// Ping-pong between ranks 0 and 1 (the others wait): alpha is half the round
// trip of an 8-byte message, beta from the half round trip of a large one
// minus alpha. Medians of repeated trials; every rank gets rank 0's figures.
// Zero for N == 1.
LinkEstimate measure_link(Communicator& comm);

// The seed's combined lower bound max(ceil(log2 N) alpha, B) with B the
// bandwidth term of the collective (see src/model: (N-1) M / (N beta), or
// M / beta for broadcast and reduce), in seconds. M is the row's size.
double lower_bound_seconds(Collective c, int nranks, double bytes, const LinkEstimate& link);

// nccl-tests' bus bandwidth factor: allreduce 2(N-1)/N; allgather,
// reduce_scatter, alltoall (N-1)/N; broadcast, reduce 1.
double busbw_factor(Collective c, int nranks);

struct PerfCell {
  bool measured = false;  // false: this placement does not exist (in-place alltoall)
  double time_us = 0;
  double algbw = 0;  // GB/s, GB = 1e9 B
  double busbw = 0;
  size_t wrong = 0;  // summed over ranks; 0 when unchecked
  int iters = 0;     // timed calls (-n, or more with --min-time)
};

struct PerfRow {
  Collective collective = Collective::allreduce;
  size_t bytes = 0;  // nccl-tests' size: the total (gathered / scattered) buffer
  size_t count = 0;  // elements of that size
  DataType type = DataType::float32;
  std::optional<ReduceOp> op;  // none for non-reducing collectives
  int root = -1;               // -1 for collectives without a root
  PerfCell out_of_place, in_place;
  std::string algorithm;
  double bound_us = 0;
  double pct_bound = 0;  // bound / best time, in percent
};

struct PerfReport {
  LinkEstimate link;
  std::string transport;  // the communicator's transport, as it names itself
  int nranks = 1;
  std::vector<PerfRow> rows;
  size_t wrong = 0;
  double avg_busbw = 0;
};

struct PerfHooks {
  // Rank 0 receives "12/40 allreduce 1048576 B" while the sweep runs.
  std::function<void(const std::string&)> progress;
};

// Runs the sweep. Every rank calls it with the same options; rank 0 prints the
// header, the rows as they complete and the footer to `out` (if not null).
PerfReport run_perf(Communicator& comm, const PerfOptions& options, std::ostream* out,
                    const PerfHooks& hooks = {});

// The table pieces, exposed for tests.
std::string format_header(const PerfOptions& options, const PerfReport& report);
std::string format_row(const PerfRow& row);
std::string format_footer(const PerfReport& report);
std::string to_json(const PerfOptions& options, const PerfReport& report);

}  // namespace chorus::perf
