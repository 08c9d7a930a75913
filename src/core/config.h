// Every environment variable chorus reads, in one place. The README lists them.
//
//   CHORUS_TIMEOUT     default deadline of a call, in seconds (default 300);
//                      inf: none
//   CHORUS_ALGO        algorithm override: "ring" for every collective that has
//                      it, or per collective "allreduce=ring,allgather=bruck"
//   CHORUS_TRANSPORT   shm | tcp: force a transport on every process of a job
//                      (core/transport_kind.h; inproc ranks are threads, which
//                      only run_ranks starts)
//   CHORUS_DEBUG       WARN | INFO | TRACE | TUNING (or TUNE) (comma list,
//                      any case): logging; TUNING logs the tuner's picks and
//                      what it learns (tune/learner.h)
//   CHORUS_TUNER       learn | model | off: how a call with no algorithm named
//                      gets one (default learn): learn times the candidates
//                      the model proposes and keeps each call class's
//                      fastest (tune/learner.h); model takes the fitted
//                      model's pick; off takes the first registered algorithm
//                      that serves the call and calibrates nothing. Ranks that
//                      are threads (inproc) learn only when it is set to learn
//   CHORUS_SPIN_US     microseconds a waiting rank spins before it blocks
//                      (default 50; 0 blocks at once)
//   CHORUS_SEGMENT     pipelining segment in bytes for segmented algorithms
//   CHORUS_STREAM_BYTES  calls whose output on a rank is at least this many
//                      bytes write it with non-temporal stores, which skip
//                      reading each untouched line first (exec/executor.h;
//                      default 16777216; 0: never)
//   CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_STORE   bootstrap (init_from_env);
//                      without them the variables of existing launchers:
//                      RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun),
//                      OMPI_COMM_WORLD_RANK/_SIZE (Open MPI), PMI_RANK/PMI_SIZE
//                      (MPICH Hydra), SLURM_PROCID/SLURM_NTASKS (Slurm)
//   CHORUS_STORE_SECRET  the job secret a tcp:// store admits clients by
//                      (challenge and response; it never crosses the wire).
//                      Every rank needs the same one; chorus-run makes one.
//                      Unset: the store is open to any process that reaches
//                      its port (rank 0 warns). Set but empty is an error.
//   CHORUS_TCP_STREAMS sockets per peer of the tcp transport (default 2 up to
//                      256 ranks, else 1: see tcp_streams_for)
//   CHORUS_TCP_ADDR    address this rank publishes for tcp peers on other hosts
//                      (default: the local address that routes to the store)
//   CHORUS_DETERMINISTIC  1: every AllReduce, ReduceScatter and Reduce
//                      with sum or avg on a floating type is deterministic
//                      (CallOptions::deterministic); 0 (default): as each
//                      call asks
//   CHORUS_TUNING_FILE the fitted model (and measured rules) for the tuner
//   CHORUS_TUNING_CACHE on | off: without a tuning file, use (or make and
//                      store) the calibration cached for this host, transport
//                      and rank count under $XDG_CACHE_HOME/chorus (default
//                      ~/.cache/chorus); off calibrates at every start-up
//                      and stores nothing (default on)
//   CHORUS_HOST_ID     the host identity this rank publishes (default hostname
//                      and boot id): ranks with equal identities use shm
//                      between them; lets one machine stand in for several
//   CHORUS_FLIGHT_RECORDER  a directory: every failure writes the rank's last
//                      calls there as JSON (engine/flight_recorder.h)
//   CHORUS_TRACE       a directory: every communicator writes a Chrome trace
//                      of its ops there when it is destroyed (exec/trace.h)
//   CHORUS_BIND        core | none: chorus-run and chorus-perf bind local
//                      ranks to cores when there are enough (default core)
//   CHORUS_PROGRESS    thread | caller: who advances an outstanding Work
//                      while its caller computes (engine/progress.h). thread
//                      (default): the communicator's progress thread takes
//                      over whenever a caller returns with work outstanding;
//                      caller: only calls of the communicator advance it
//   CHORUS_PROGRESS_CPU  a CPU number: the progress threads run on that CPU
//                      only (default: wherever the process may run)
#pragma once

#include "core/collective.h"
#include "core/log.h"
#include "core/transport_kind.h"

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace chorus {

// Where the parsers below read variables from: the value of a name, or nullopt
// when it is unset. The process environment is `env_var`; tests and the fuzz
// targets pass a map (env_from_map), so that parsing is a pure function.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// CHORUS_TUNER.
enum class TunerMode { learn, model, off };
std::string_view to_string(TunerMode mode);

// CHORUS_PROGRESS: who advances outstanding work (engine/progress.h).
enum class ProgressMode { thread, caller };
std::string_view to_string(ProgressMode mode);
// "thread" or "caller"; anything else is an Error(invalid_argument) that
// names `what` (the variable, or the option).
ProgressMode parse_progress_mode(std::string_view text, std::string_view what);
// A CPU number from 0 to 1023; else an Error(invalid_argument) naming `what`.
int check_progress_cpu(double cpu, std::string_view text, std::string_view what);

struct Config {
  std::chrono::milliseconds timeout{300'000};
  // Algorithm forced for every collective that has an algorithm of this name.
  std::string algorithm_all;
  // Per-collective algorithm overrides.
  std::map<Collective, std::string> algorithm;
  // Forced by CHORUS_TRANSPORT (one of process_transports()); unset = automatic.
  std::optional<TransportKind> transport;
  LogLevel log_level = LogLevel::warn;
  bool log_tuning = false;
  TunerMode tuner = TunerMode::learn;  // CHORUS_TUNER
  bool tuner_set = false;              // CHORUS_TUNER was given
  std::chrono::microseconds spin{50};
  size_t segment_bytes = 0;                      // 0 = each algorithm's default
  size_t stream_bytes = size_t{16} << 20;        // CHORUS_STREAM_BYTES; 0 = never
  bool deterministic = false;                    // CHORUS_DETERMINISTIC
  ProgressMode progress = ProgressMode::thread;  // CHORUS_PROGRESS
  int progress_cpu = -1;                         // CHORUS_PROGRESS_CPU; -1 = not pinned
  std::string tuning_file;
  bool tuning_cache = true;  // CHORUS_TUNING_CACHE
  std::string cache_dir;     // $XDG_CACHE_HOME/chorus or $HOME/.cache/chorus; "" = none
  // CHORUS_TCP_STREAMS; 0 = automatic (tcp_streams_for).
  size_t tcp_streams = 0;
  std::string tcp_address;          // "" = derive from the route to the store
  bool bind_cores = true;           // CHORUS_BIND
  std::string host_id;              // CHORUS_HOST_ID; "" = hostname and boot id
  std::string flight_recorder_dir;  // CHORUS_FLIGHT_RECORDER; "" = no files
  std::string trace_dir;            // CHORUS_TRACE; "" = no timeline
  std::string store_secret;         // CHORUS_STORE_SECRET; "" = an open tcp:// store
  // Not a variable: set for a communicator derived from another (split,
  // groups/derive.cc), whose siblings are made on the same host at the same
  // moment. Its tuner then takes a provisional calibration entry as it is
  // instead of calibrating again whenever the host looks quiet: calibrating
  // beside its siblings would only meet their load and store a provisional
  // entry again, at every split.
  bool derived = false;
  // Not variables either: the store of the job, where init() was given one
  // (Communicator::grow meets its joiners there, recovery/grow.h), and the
  // communicator's generation: the grows made since init() on its line (a
  // joiner's: the grow it joined). Split and shrink keep both.
  std::string job_store;
  int generation = 0;

  // The override for one collective, or "" when none applies.
  std::string algorithm_for(Collective c) const;

  // Reads the CHORUS_* variables; a malformed value throws
  // Error(invalid_argument) naming the variable.
  static Config from_env();
  // The same, reading the variables through `env`.
  static Config from_env(const EnvLookup& env);
};

// Sockets per tcp peer for a job of `world_size` ranks: CHORUS_TCP_STREAMS,
// else 2 up to 256 ranks and 1 beyond. Two streams let the kernel's work on
// a large message (copies, checksums, acks) run on both cores of a host: on
// loopback, N = 2, a 2 MiB ring AllReduce took a median of 1000 us on one
// stream and 600 us on two (docs/PERFORMANCE.md). Each stream is a file
// descriptor per peer, besides the control socket: beyond 256 ranks one
// stream keeps a rank within the common limit of 1024 descriptors.
size_t tcp_streams_for(const Config& config, int world_size);

// Creates the directories CHORUS_TRACE and CHORUS_FLIGHT_RECORDER name (when
// set), so that one that cannot be a directory (a path through a regular
// file, no permission) is an Error(invalid_argument) naming the variable at
// start-up rather than a file lost after a failure. from_env stays free of
// the file system (it is fuzzed); init() calls this.
void check_config_directories(const Config& config);

// Where this process sits in a job and how it meets its peers, as the
// environment of the launcher tells it (see read_bootstrap_env).
struct BootstrapEnv {
  int rank = -1;
  int world_size = -1;
  std::string store;   // "file:///dir" or "tcp://host:port"
  std::string source;  // which launcher's variables were used: "CHORUS", "torchrun", ...
  // The variables the store came from: "CHORUS_STORE" or "MASTER_ADDR/MASTER_PORT".
  std::string store_source;
};

// Reads CHORUS_RANK / CHORUS_WORLD_SIZE / CHORUS_STORE, else the variables of
// torchrun, Open MPI, MPICH Hydra or Slurm (the first launcher found, in that
// order, wins: launchers nest inside Slurm allocations). The store defaults to
// tcp://MASTER_ADDR:MASTER_PORT. A variable that is missing, malformed or
// contradicts its partner (rank without size, rank >= size, MASTER_ADDR
// without MASTER_PORT) throws Error(invalid_argument) naming the variable.
BootstrapEnv read_bootstrap_env();
// The same, reading the variables through `env`:
//   read_bootstrap_env(env_from_map({{"RANK", "1"}, {"WORLD_SIZE", "2"}, ...}))
BootstrapEnv read_bootstrap_env(const EnvLookup& env);

// Whether any launcher's rank or size variable (those read_bootstrap_env
// looks at) is set: tools that can also start ranks themselves use it to tell
// "started by a launcher" from "started by hand".
bool launcher_env_present();
bool launcher_env_present(const EnvLookup& env);

// Value of an environment variable, or nullopt when unset.
std::optional<std::string> env_var(std::string_view name);

// A lookup over fixed name=value pairs (names absent from `vars` are unset).
EnvLookup env_from_map(std::map<std::string, std::string, std::less<>> vars);

}  // namespace chorus
