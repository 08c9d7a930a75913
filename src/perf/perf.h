// chorus-perf, the library part: an nccl-tests-style sweep of one or more
// collectives over message sizes, dtypes, ops and algorithms on one
// communicator, with exact data checks (perf_check.h), the seed's lower bound
// per row (model/cost_model.h) and the report as data and JSON. The command
// line, the usage text and the printed table are tools/perf_cli.h.
//
//   PerfOptions o;
//   o.collectives = {Collective::allreduce};
//   o.max_bytes = 1 << 20;
//   run_ranks(2, [&](Communicator& comm) { PerfReport r = run_perf(comm, o); });
#pragma once

#include "schedule/collective.h"

#include <chorus/communicator.h>
#include <chorus/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace chorus::perf {

// What to sweep, and how chorus-perf runs it (tools/perf_cli.h parses these
// from nccl-tests' flags, named beside each field).
struct PerfOptions {
  std::vector<Collective> collectives;  // positional: one name, or "all"
  size_t min_bytes = 8;                 // -b
  size_t max_bytes = size_t{32} << 20;  // -e
  double step_factor = 2;               // -f
  int iters = 20;                       // -n
  int warmup = 5;                       // -w
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
  std::string transport = "auto";                  // --transport
  std::string buffers = "user";                    // --buffers: user (ordinary memory) or window
  std::string json_file;                           // --json
  std::string calibrate_file;  // --calibrate: write a tuning file instead of a table
  bool help = false;           // -h
  bool tuning_report = false;  // --tuning-report
  // --deterministic: every reducing call with CallOptions::deterministic (the
  // algorithm named is its integer pass's; an automatic row shows "gather" or
  // the integer pass's pick, and pred(us) is the deterministic call's).
  bool deterministic = false;
  // Test hook (hidden flag --corrupt-one): after each checked call, the last
  // rank flips one output element before counting, so #wrong must say 1.
  bool corrupt_one = false;
  // positional "overlap": chorus-perf overlap (perf/overlap.h) instead of the
  // sweep; -b .. -e are its sizes (default 16 MiB), -n its rounds.
  bool overlap = false;
  // --plan: each timed call of a row is a start() and wait() of a Plan
  // prepared once for the cell (Communicator::prepare) instead of a named
  // call; blocking rows only.
  bool plan = false;
};

// alpha (s per message) and beta (B/s) measured on this communicator.
struct LinkEstimate {
  double alpha = 0;
  double beta = 0;
};
// The communicator's calibration (tune/calibration.h: calibrate_link) with
// its thorough options: ping-pong medians of every rank pair, the slowest
// pair's figures on every rank. Zero for N == 1. Collective.
LinkEstimate measure_link(Communicator& comm);

// The timed calls of a row: `iters` (-n), or where min_time (--min-time) is
// set, as many calls of `per_call` seconds as last min_time, but no fewer than
// `iters` and at most 10^6: iterations_for(5ms, 2e-3, 1) == 3.
int iterations_for(std::chrono::microseconds min_time, double per_call, int iters);

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
  // lower_bound(...).combined(): with the fitted model's alpha and its beta
  // for the per-rank block M/N, else the start-up alpha and beta.
  double bound_us = 0;
  double pct_bound = 0;  // bound / best time, in percent
  // The model's time for the algorithm that ran: its Programs simulated on
  // the communicator's fitted machine model (tune/model_sim.h: the tuning
  // file's or the calibration cache's), else on a switch at the start-up
  // alpha and beta (no reduction cost); NaN where it cannot say (an
  // algorithm outside the registry).
  double predicted_us = 0;
  double err_pct = 0;  // (best time - predicted) / best time, in percent
};

struct PerfReport {
  LinkEstimate link;
  bool fitted = false;    // pred(us) and the bound come from a fitted machine model
  std::string transport;  // the communicator's transport, as it names itself
  int nranks = 1;
  std::vector<PerfRow> rows;
  size_t wrong = 0;
  double avg_busbw = 0;
};

// What rank 0 hears while the sweep runs (each hook may be empty).
struct PerfHooks {
  // "12/40 allreduce 1048576 B float32 ring" before each row.
  std::function<void(const std::string&)> progress;
  // Once the link is measured, before the first row: the report so far
  // (nranks, transport, link; no rows yet).
  std::function<void(const PerfReport&)> start;
  // Each row as it completes.
  std::function<void(const PerfRow&)> row;
};

// Runs the sweep. Every rank calls it with the same options; rank 0 calls the
// hooks. Throws Error(invalid_argument) on an algorithm no swept collective
// has, or a root outside the communicator.
PerfReport run_perf(Communicator& comm, const PerfOptions& options, const PerfHooks& hooks = {});

// The report as JSON (chorus-perf --json).
std::string to_json(const PerfOptions& options, const PerfReport& report);

}  // namespace chorus::perf
