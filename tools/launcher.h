// Starting the ranks of a job on this host as child processes: the one
// launcher behind chorus-run (each rank execs a program) and chorus-perf's
// local processes (each rank runs the sweep in the forked process), so that
// both start their ranks alike:
//   - every CHORUS_* setting is checked (Config::from_env) before any rank
//     starts, so that a bad one ends the job at once with its name;
//   - a private store: a FileStore in a temporary directory, removed when the
//     launch returns; or a TcpStore that rank 0 serves on a free loopback
//     port, with a fresh random CHORUS_STORE_SECRET that only the ranks know;
//   - each rank's variables: CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_STORE
//     (and CHORUS_TRANSPORT when a transport is given), and torchrun's RANK,
//     WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and
//     MASTER_PORT (a free loopback port for rank 0's TCPStore), so that a
//     torch.distributed script (env://) starts unchanged;
//   - core binding as MPI launchers do, when CHORUS_BIND allows
//     (bootstrap/affinity.h);
//   - output: every line a rank prints prefixed with "[rank] " (read through
//     pipes), or the ranks writing to the launcher's stdout and stderr as is;
//   - stopping: when a rank exits non-zero or is killed, the others get a
//     grace period to finish on their own (so that they can report the peer
//     failure they see), then SIGTERM, then SIGKILL 3 s later. SIGINT and
//     SIGTERM sent to the launcher are passed on to the ranks;
//   - or, elastic: a rank that fails stops nobody; each rank's exit is
//     reported as it happens, and a failed rank may be replaced by a new
//     process that joins by grow (CHORUS_JOIN_GENERATION = 1, 2, ... for the
//     first, second, ... replacement; no CHORUS_RANK or CHORUS_WORLD_SIZE;
//     its lines prefixed with its slot, N, N + 1, ...).
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

namespace chorus {

struct LocalLaunch {
  // The tool that launches: it names the temporary directory and begins the
  // launcher's own lines ("chorus-run: rank 1 exited with status 3; ...").
  std::string tool = "chorus-run";
  int nranks = 1;
  bool tcp_store = false;  // a TcpStore served by rank 0; else a FileStore
  std::string transport;   // CHORUS_TRANSPORT for every rank; "": left as it is
  // How long the other ranks get after one fails, before SIGTERM.
  std::chrono::duration<double> grace{1.0};
  // Each rank's lines prefixed with "[rank] " on `out` (its stdout) and `err`
  // (its stderr); false: the ranks inherit the launcher's stdout and stderr.
  bool prefix_output = true;
  // The launcher's own lines on `err`: the first rank that failed, a signal
  // that stops the ranks.
  bool report = true;
  // Elastic (above): the survivors go on; with `replacements`, that many
  // failed ranks are replaced, one per failure, as they fail.
  bool elastic = false;
  int replacements = 0;
  FILE* out = stdout;
  FILE* err = stderr;
};

struct LaunchResult {
  // The job's exit status: 0 when every rank exited with 0; else the status
  // of the first rank that failed (128 + signal for a killed one), or
  // 128 + the signal that stopped the launcher.
  int status = 0;
  // The largest exit status over the ranks (128 + signal for a killed one).
  int worst = 0;
  // Elastic: the ranks (replacements included) that exited with 0. The
  // status is then 0 when no rank exited non-zero on its own (a killed rank
  // is reported, and is what the job survives) and at least one exited 0.
  int succeeded = 0;
};

// Starts options.nranks child processes as described above; in child r,
// rank_main(r) runs with the rank's environment set, and its return value is
// the child's exit status (it may exec a program instead of returning; an
// exception it lets escape is printed and exits 1). Returns once every rank
// has exited and its output has been passed on. Throws Error for a bad
// setting (invalid_argument) or when the job cannot be set up (system); ranks
// already started are then killed.
LaunchResult launch_local_ranks(const LocalLaunch& options,
                                const std::function<int(int rank)>& rank_main);

}  // namespace chorus
