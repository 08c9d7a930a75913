// chorus-perf's command line: nccl-tests' flags (parsed with CLI11), the
// usage text, and the nccl-tests table printed while a sweep runs. The sweep,
// the checks, the report and its JSON are src/perf/perf.h.
//
//   PerfOptions o = parse_perf_args({"allreduce", "-b", "8", "-e", "1M"});
//   run_ranks(o.ranks, [&](Communicator& comm) {
//     PerfReport r = run_perf(comm, o, print_table(o, comm.rank() == 0 ? &std::cout : nullptr));
//     if (comm.rank() == 0) std::cout << format_footer(r);
//   });
#pragma once

#include "perf/measure_tuning.h"
#include "perf/perf.h"

#include <ostream>
#include <span>
#include <string>

namespace chorus::perf {

// Parses the command line (without argv[0]). Throws Error(invalid_argument)
// naming the flag and the value on bad input. -h / --help set `help` and
// skip the checks of the other arguments.
PerfOptions parse_perf_args(std::span<const std::string> args);
std::string perf_usage();

// Hooks that print the table to `out` (nothing when null) as the sweep runs:
// the header once the link is measured, then each row as it completes, with a
// "# <collective>" line before each collective's rows when the sweep has
// several. `progress` is kept from `base`. The footer is format_footer's.
PerfHooks print_table(const PerfOptions& options, std::ostream* out, PerfHooks base = {});

// The table pieces.
std::string format_header(const PerfOptions& options, const PerfReport& report);
std::string format_row(const PerfRow& row);
std::string format_footer(const PerfReport& report);

// The summary chorus-perf --calibrate prints for the table it wrote to `file`.
std::string format_calibration(const TuningTable& table, int nranks, const std::string& file);

}  // namespace chorus::perf
