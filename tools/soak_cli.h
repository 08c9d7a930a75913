// chorus-soak's command line (CLI11), usage text and printed report. The
// soak itself, its checks and its counts are src/perf/soak.h.
//
//   SoakCli cli = parse_soak_args({"--calls", "200", "--seed", "7"});
//   run_ranks(cli.ranks, [&](Communicator& comm) {
//     SoakReport r = run_soak(comm, cli.soak);
//     if (comm.rank() == 0) std::cout << format_soak_report(r);
//   });
#pragma once

#include "perf/soak.h"

#include <span>
#include <string>

namespace chorus::perf {

struct SoakCli {
  SoakOptions soak;
  int ranks = 4;  // --ranks: threads of this process, when no launcher started it
  bool help = false;
};

// Parses the command line (without argv[0]). Throws Error(invalid_argument)
// naming the flag and the value on bad input; -h / --help set `help`.
SoakCli parse_soak_args(std::span<const std::string> args);
std::string soak_usage();

// "# chorus-soak: 10000 calls from call 0 on 4 ranks over shm, seed 1, ...".
std::string format_soak_header(const SoakReport& report);
// The table of counts per kind and the verdict line ("... OK" or "... FAILED").
std::string format_soak_report(const SoakReport& report);
// The progress line rank 0 prints now and then on stderr: "chorus-soak:
// 3000/10000 calls".
std::string format_soak_progress(size_t done, size_t total);

}  // namespace chorus::perf
