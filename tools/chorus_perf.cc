// chorus-perf: nccl-tests-style bandwidth and correctness sweep of chorus's
// collectives. A thin main over src/perf (see perf.h for the flags); exits 0
// when every element of every rank was right, 1 on wrong values or a failed
// call, 2 on bad arguments.
#include "perf/perf.h"

#include <chorus/chorus.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

int main(int argc, char** argv) {
  using namespace chorus;
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const perf::PerfOptions options = perf::parse_perf_args(args);
    if (options.help) {
      std::cout << perf::perf_usage();
      return 0;
    }
    if (options.transport != "inproc")
      throw Error(ErrorCode::invalid_argument,
                  "chorus-perf: --transport " + options.transport +
                      ": this build runs ranks as threads of one process only (inproc)");
    // A progress line on stderr, only when someone watches it.
    const bool tty = isatty(STDERR_FILENO) == 1;
    perf::PerfHooks hooks;
    if (tty)
      hooks.progress = [](const std::string& line) {
        std::fprintf(stderr, "\r\033[K[chorus-perf] %s", line.c_str());
        std::fflush(stderr);
      };
    perf::PerfReport report;
    testing::run_ranks(options.ranks, [&](Communicator& comm) {
      perf::PerfReport r = perf::run_perf(comm, options, &std::cout, hooks);
      if (comm.rank() == 0) report = std::move(r);
    });
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (!options.json_file.empty()) {
      std::ofstream json(options.json_file);
      json << perf::to_json(options, report) << "\n";
      if (!json) throw Error(ErrorCode::system, "chorus-perf: cannot write " + options.json_file);
    }
    return report.wrong == 0 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.code() == ErrorCode::invalid_argument ? 2 : 1;
  }
}
