// chorus-perf --calibrate: measures a tuning file (tune/tuning_file.h) on this
// communicator: the machine model by the thorough probes (tune/calibration.h),
// the call overhead they do not see, and, for each collective of the sweep,
// the fastest algorithm at each size (measured rules that override the model
// where they apply). The machine model alone, fitted when a communicator is
// created, is tune/calibration.h's.
#pragma once

#include "perf/perf.h"
#include "tune/tuning_file.h"

#include <chorus/communicator.h>

#include <string>
#include <vector>

namespace chorus::perf {

// Collective: every rank calls it with the same options. Fits the machine
// model (calibrate_model with the thorough options) and the call overhead,
// then runs the sweep of `options` five times with every algorithm
// (unchecked), keeps for each (collective, size) the algorithm of least
// median out-of-place time on rank 0's clock, merges consecutive sizes with
// the same winner, and on rank 0 writes the table to options.calibrate_file
// (keeping what the file holds for other link classes and rank counts).
// Returns the table (tools/perf_cli.h prints its summary).
TuningTable measure_tuning(Communicator& comm, const PerfOptions& options);

// The per-call overhead of the executor that the machine model's probes do
// not see (stamps, plan lookup, dispatch): the median over every AllReduce
// algorithm of an 8-byte call's measured time less the model's prediction on
// `table`, at least 0. Collective.
double measure_call_overhead(Communicator& comm, const TuningTable& table,
                             const std::vector<int>& host_of);

// The rules of a finished sweep: the fastest algorithm per (collective, size),
// consecutive equal winners merged. Exposed for tests.
std::vector<TuningRule> rules_from_rows(const std::vector<PerfRow>& rows, const std::string& link,
                                        int nranks);

}  // namespace chorus::perf
