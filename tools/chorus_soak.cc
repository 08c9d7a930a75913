// chorus-soak: thousands of random calls (collectives, algorithms, shapes,
// dtypes, ops, placements, blocking and asynchronous, point-to-point
// batches), every output element checked exactly. A thin main over
// tools/soak_cli.h (the flags and the report) and src/perf/soak.h (the soak).
//
// Where the ranks come from:
//   - under chorus-run, mpirun, srun or torchrun (their variables are set):
//     this process is one rank, through init_from_env();
//   - otherwise: --ranks threads of this process, over the in-process
//     transport.
// Rank 0 prints the header and the report; every rank prints its own wrong
// results and failures, each naming the call. Exit status: 0 when every
// element was right and no call failed, 1 otherwise, 2 on bad arguments.
#include "core/config.h"
#include "perf/soak.h"
#include "soak_cli.h"

#include <chorus/chorus.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace {

using namespace chorus;

// Rank 0's progress on stderr, every this many calls.
constexpr size_t kProgressEvery = 1000;

// Rank 0's hooks: the header before the first call, then the progress.
perf::SoakHooks rank0_hooks() {
  perf::SoakHooks hooks;
  hooks.start = [](const perf::SoakReport& r) {
    std::cout << perf::format_soak_header(r) << std::flush;
  };
  hooks.progress = [](size_t done, size_t total) {
    if (done % kProgressEvery == 0 && done < total)
      std::fprintf(stderr, "%s\n", perf::format_soak_progress(done, total).c_str());
  };
  return hooks;
}

void print_problems(const perf::SoakReport& r) {
  for (const std::string& p : r.problems) std::cout << p << "\n";
  std::cout << std::flush;
}

// One process of a launched job.
int run_launched(const perf::SoakOptions& o) {
  Communicator comm = init_from_env();
  const perf::SoakReport r =
      perf::run_soak(comm, o, comm.rank() == 0 ? rank0_hooks() : perf::SoakHooks{});
  print_problems(r);
  // After a failure every rank reports what it saw itself.
  if (comm.rank() == 0 || !r.all_ranks) std::cout << perf::format_soak_report(r) << std::flush;
  return r.ok() ? 0 : 1;
}

// --ranks threads of this process.
int run_in_process(const perf::SoakCli& cli) {
  std::vector<perf::SoakReport> reports(static_cast<size_t>(cli.ranks));
  testing::run_ranks(cli.ranks, [&](Communicator& comm) {
    reports[static_cast<size_t>(comm.rank())] =
        perf::run_soak(comm, cli.soak, comm.rank() == 0 ? rank0_hooks() : perf::SoakHooks{});
  });
  bool ok = true;
  for (const perf::SoakReport& r : reports) {
    print_problems(r);
    ok = ok && r.ok();
  }
  for (const perf::SoakReport& r : reports)
    if (r.rank == 0 || !r.all_ranks) std::cout << perf::format_soak_report(r);
  std::cout << std::flush;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const perf::SoakCli cli = perf::parse_soak_args(args);
    if (cli.help) {
      std::cout << perf::soak_usage();
      return 0;
    }
    return launcher_env_present() ? run_launched(cli.soak) : run_in_process(cli);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.code() == ErrorCode::invalid_argument ? 2 : 1;
  }
}
