// chorus-perf: nccl-tests-style bandwidth and correctness sweep of chorus's
// collectives. A thin main over tools/perf_cli.h (the flags and the table)
// and src/perf (the sweep).
//
// Where the ranks come from:
//   - under chorus-run, mpirun, srun or torchrun (their variables are set):
//     this process is one rank, through init_from_env();
//   - otherwise with --transport inproc: --ranks threads of this process;
//   - otherwise: chorus-perf starts --ranks local processes itself, as
//     chorus-run starts its ranks (tools/launcher.h: a FileStore in a private
//     temporary directory, the launcher's variables, core binding, the others
//     stopped when one fails), each running its rank in the forked process
//     (shm between them, or the transport --transport names); their output
//     is not prefixed.
// Exit status: 0 when every element of every rank was right, 1 on wrong values
// or a failed rank, 2 on bad arguments.
#include "core/check.h"
#include "core/config.h"
#include "core/transport_kind.h"
#include "launcher.h"
#include "perf/measure_tuning.h"
#include "perf/overlap.h"
#include "perf/perf.h"
#include "perf/tuning_report.h"
#include "perf_cli.h"

#include <chorus/chorus.h>
#include <chorus/init.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace chorus;

perf::PerfHooks progress_hooks() {
  perf::PerfHooks hooks;
  // A progress line on stderr, only when someone watches it.
  if (isatty(STDERR_FILENO) == 1)
    hooks.progress = [](const std::string& line) {
      std::fprintf(stderr, "\r\033[K[chorus-perf] %s", line.c_str());
      std::fflush(stderr);
    };
  return hooks;
}

void clear_progress(const perf::PerfHooks& hooks) {
  if (hooks.progress) std::fprintf(stderr, "\r\033[K");
}

int finish(const perf::PerfOptions& o, const perf::PerfReport& report) {
  if (!o.json_file.empty()) {
    std::ofstream json(o.json_file);
    json << perf::to_json(o, report) << "\n";
    if (!json) throw Error(ErrorCode::system, "chorus-perf: cannot write " + o.json_file);
  }
  return report.wrong == 0 ? 0 : 1;
}

// One rank of a multi-process run; rank 0 prints and writes the JSON.
// chorus-perf overlap on every rank; rank 0 prints and writes the JSON.
int run_overlap_rank(Communicator& comm, const perf::PerfOptions& o) {
  const perf::OverlapReport report = perf::run_overlap(comm, o);
  if (comm.rank() != 0) return 0;
  std::cout << perf::format_overlap(report) << std::flush;
  if (!o.json_file.empty()) {
    std::ofstream json(o.json_file);
    json << perf::overlap_json(report) << "\n";
    if (!json) throw Error(ErrorCode::system, "chorus-perf: cannot write " + o.json_file);
  }
  return 0;
}

int run_rank(Communicator comm, const perf::PerfOptions& o) {
  if (o.overlap) return run_overlap_rank(comm, o);
  if (!o.calibrate_file.empty()) {
    const TuningTable table = perf::measure_tuning(comm, o);
    if (comm.rank() == 0)
      std::cout << perf::format_calibration(table, comm.size(), o.calibrate_file);
    std::cout.flush();
    return 0;
  }
  const perf::PerfHooks hooks =
      comm.rank() == 0 ? perf::print_table(o, &std::cout, progress_hooks()) : perf::PerfHooks{};
  const perf::PerfReport report = perf::run_perf(comm, o, hooks);
  clear_progress(hooks);
  if (comm.rank() == 0) std::cout << perf::format_footer(report);
  std::cout.flush();
  return comm.rank() == 0 ? finish(o, report) : (report.wrong == 0 ? 0 : 1);
}

// One rank started by a launcher (chorus-run, mpirun, srun, torchrun, or
// chorus-perf's own local processes): rank, size and store from its variables.
int run_launched_rank(const perf::PerfOptions& options) {
  const BootstrapEnv env = read_bootstrap_env();
  InitOptions io;
  io.rank = env.rank;
  io.world_size = env.world_size;
  io.store = env.store;
  if (options.transport != "auto") io.transport = options.transport;
  return run_rank(init(io), options);
}

// Starts o.ranks local processes as chorus-run does; returns the worst exit
// status. When one rank fails, the others get a grace period to report the
// peer failure, then are stopped.
int run_local_processes(const perf::PerfOptions& o) {
  LocalLaunch launch;
  launch.tool = "chorus-perf";
  launch.nranks = o.ranks;
  launch.grace = std::chrono::seconds(10);
  launch.prefix_output = false;  // rank 0 prints the table, as a single process would
  launch.report = false;         // each rank says why it failed
  auto rank_main = [&](int r) {
    try {
      return run_launched_rank(o);
    } catch (const Error& e) {
      std::fprintf(stderr, "chorus-perf: rank %d: %s\n", r, e.what());
      return e.code() == ErrorCode::invalid_argument ? 2 : 1;
    }
  };
  try {
    return launch_local_ranks(launch, rank_main).worst;
  } catch (const Error& e) {
    // The launcher's own failures (a bad CHORUS_* setting, found before any
    // rank starts; a failed fork) are chorus-perf's.
    throw Error(e.code(), str_cat("chorus-perf: ", e.what()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const perf::PerfOptions options = perf::parse_perf_args(args);
    if (options.help) {
      std::cout << perf::perf_usage();
      return 0;
    }
    if (options.tuning_report) {
      std::cout << perf::tuning_report(Config::from_env().cache_dir);
      return 0;
    }
    if (launcher_env_present()) {
      if (options.transport == to_string(TransportKind::inproc))
        throw Error(ErrorCode::invalid_argument,
                    "chorus-perf: --transport inproc under a launcher: each process is one rank");
      return run_launched_rank(options);
    }
    if (options.transport != to_string(TransportKind::inproc)) return run_local_processes(options);
    if (options.overlap) {
      testing::run_ranks(options.ranks,
                         [&](Communicator& comm) { run_overlap_rank(comm, options); });
      return 0;
    }
    const perf::PerfHooks hooks = perf::print_table(options, &std::cout, progress_hooks());
    perf::PerfReport report;
    testing::run_ranks(options.ranks, [&](Communicator& comm) {
      perf::PerfReport r = perf::run_perf(comm, options, hooks);
      if (comm.rank() == 0) report = std::move(r);
    });
    clear_progress(hooks);
    std::cout << perf::format_footer(report) << std::flush;
    return finish(options, report);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.code() == ErrorCode::invalid_argument ? 2 : 1;
  }
}
