// chorus-perf: nccl-tests-style bandwidth and correctness sweep of chorus's
// collectives. A thin main over tools/perf_cli.h (the flags and the table)
// and src/perf (the sweep).
//
// Where the ranks come from:
//   - under chorus-run, mpirun, srun or torchrun (their variables are set):
//     this process is one rank, through init_from_env();
//   - otherwise with --transport inproc: --ranks threads of this process;
//   - otherwise: chorus-perf forks --ranks local processes itself, which meet
//     through a FileStore in a private temporary directory (shm between them,
//     or the transport --transport names).
// Exit status: 0 when every element of every rank was right, 1 on wrong values
// or a failed rank, 2 on bad arguments.
#include "bootstrap/affinity.h"
#include "core/config.h"
#include "perf/measure_tuning.h"
#include "perf/perf.h"
#include "perf_cli.h"

#include <chorus/chorus.h>
#include <chorus/init.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
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
int run_rank(Communicator comm, const perf::PerfOptions& o) {
  if (!o.calibrate_file.empty()) {
    const TuningTable table = perf::measure_tuning(comm, o);
    if (comm.rank() == 0)
      std::cout << perf::format_calibration(table, comm.size(), o.calibrate_file);
    std::cout.flush();
    return 0;
  }
  const perf::PerfHooks hooks = comm.rank() == 0
                                    ? perf::print_table(o, &std::cout, progress_hooks())
                                    : perf::PerfHooks{};
  const perf::PerfReport report = perf::run_perf(comm, o, hooks);
  clear_progress(hooks);
  if (comm.rank() == 0) std::cout << perf::format_footer(report);
  std::cout.flush();
  return comm.rank() == 0 ? finish(o, report) : (report.wrong == 0 ? 0 : 1);
}

// A private directory for the FileStore, removed on scope exit (RAII).
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "chorus-perf-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr)
      throw Error(ErrorCode::system, "chorus-perf: cannot create a temporary directory");
    path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Forks o.ranks processes; returns the worst exit status. When one rank fails,
// the others get a grace period to report the peer failure, then SIGKILL.
int run_local_processes(const perf::PerfOptions& o) {
  constexpr auto kGrace = std::chrono::seconds(10);
  TempDir dir;
  std::cout.flush();
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw Error(ErrorCode::system, "chorus-perf: fork failed");
    if (pid == 0) {
      int status = 1;
      try {
        if (Config::from_env().bind_cores) bind_local_rank(r, o.ranks);
        InitOptions io;
        io.rank = r;
        io.world_size = o.ranks;
        io.store = "file://" + dir.path.string();
        if (o.transport != "auto") io.transport = o.transport;
        status = run_rank(init(io), o);
      } catch (const Error& e) {
        std::fprintf(stderr, "chorus-perf: rank %d: %s\n", r, e.what());
        status = e.code() == ErrorCode::invalid_argument ? 2 : 1;
      }
      std::cout.flush();
      std::fflush(nullptr);
      _exit(status);  // no destructors of the parent's objects (the TempDir)
    }
    pids.push_back(pid);
  }
  int worst = 0;
  size_t alive = pids.size();
  // time_point::max(): no rank has failed yet.
  auto kill_at = std::chrono::steady_clock::time_point::max();
  while (alive > 0) {
    int st = 0;
    const pid_t done = waitpid(-1, &st, WNOHANG);
    if (done > 0) {
      --alive;
      const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (code != 0 && worst == 0) kill_at = std::chrono::steady_clock::now() + kGrace;
      worst = std::max(worst, code);
      continue;
    }
    if (std::chrono::steady_clock::now() >= kill_at) {
      for (pid_t p : pids) kill(p, SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return worst;
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
    if (launcher_env_present()) {
      const BootstrapEnv env = read_bootstrap_env();
      if (options.transport == "inproc")
        throw Error(ErrorCode::invalid_argument,
                    "chorus-perf: --transport inproc under a launcher: each process is one rank");
      InitOptions io;
      io.rank = env.rank;
      io.world_size = env.world_size;
      io.store = env.store;
      if (options.transport != "auto") io.transport = options.transport;
      return run_rank(init(io), options);
    }
    if (options.transport != "inproc") return run_local_processes(options);
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
