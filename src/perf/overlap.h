// chorus-perf overlap: how much of an asynchronous AllReduce hides behind
// computation on the caller's thread.
//
// Each round, on every rank, with a barrier before each part:
//   A  a blocking AllReduce of the size;
//   C  the compute loop alone (a calibrated arithmetic loop, no memory traffic
//      and no chorus call), sized once so that C is about A (the median of 5
//      blocking calls);
//   T  allreduce_async, the compute loop, then wait(): nothing of chorus runs
//      on the caller's thread between the submit and the wait.
// overlap = (A + C - T) / min(A, C), from the medians over the rounds (each
// the slowest rank's): 1 is full overlap, 0 none, below 0 worse than one
// after the other.
#pragma once

#include "perf/perf.h"

#include <chorus/communicator.h>

#include <string>
#include <vector>

namespace chorus::perf {

struct OverlapRow {
  size_t bytes = 0;
  double allreduce_us = 0;  // A
  double compute_us = 0;    // C
  double total_us = 0;      // T
  double overlap = 0;
  int rounds = 0;
};

struct OverlapReport {
  std::string transport;
  std::string progress;  // CHORUS_PROGRESS in effect: "thread" or "caller"
  int nranks = 1;
  std::vector<OverlapRow> rows;
};

// One row per size of options' sweep (-b .. -e by -f), -n rounds each, float32
// sum, the automatic algorithm. Every rank calls it.
OverlapReport run_overlap(Communicator& comm, const PerfOptions& options);

// The computation the overlap is measured against: `iterations` rounds of a
// dependent multiply-add chain in registers. Returns its result so that the
// compiler keeps it.
double compute_loop(long iterations);

std::string format_overlap(const OverlapReport& report);
std::string overlap_json(const OverlapReport& report);

}  // namespace chorus::perf
