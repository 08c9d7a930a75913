// Every environment variable chorus reads, in one place: the list of
// settings below (settings()) holds each CHORUS_* variable with its
// description, parser and printer; Config::from_env reads through it,
// `chorus-run --params` prints it with the values in effect, and
// docs/LAUNCHING.md's settings table is generated from it
// (`chorus-run --params --markdown`). A CHORUS_* variable read anywhere else
// goes through setting_var, which refuses a name the list lacks.
//
// The descriptions there are one line each; docs/LAUNCHING.md says more.
#pragma once

#include "core/collective.h"
#include "core/log.h"
#include "core/transport_kind.h"

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// Where CHORUS_METRICS sends the Prometheus text (engine/metrics.h).
struct MetricsTarget {
  enum class Kind { none, file, http } kind = Kind::none;
  std::string path;     // file: the path, "%r" not yet replaced
  std::string address;  // http: "" = every address
  int port = 0;         // http: the base port (0: any free port)
};
// Parses CHORUS_METRICS: "" is none; [ADDRESS]:PORT (no '/') is http; any
// other text a file. Text with no '/' whose last ':' is followed by anything
// but a port, or a path ending in '/', is an Error(invalid_argument) naming
// the variable.
MetricsTarget parse_metrics_target(std::string_view text);

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
  std::string metrics;              // CHORUS_METRICS; "" = no metrics
  double metrics_interval = 5;      // CHORUS_METRICS_INTERVAL, seconds
  bool stragglers_summary = false;  // CHORUS_STRAGGLERS
  // Not a variable: the rank a communicator's metrics count under (that of
  // the communicator a derived one came from); -1 = its own.
  int metrics_rank = -1;
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

// One CHORUS_* variable.
struct Setting {
  const char* name;
  const char* description;  // one line
  // Parses a set value into `config`; a malformed one throws
  // Error(invalid_argument) naming the variable. nullptr for the bootstrap
  // variables (CHORUS_RANK, CHORUS_STORE, ...), which read_bootstrap_env and
  // join_from_env read and check themselves.
  void (*parse)(Config& config, const std::string& value);
  // The value `config` holds, as text ("unset", "auto" where nothing is
  // chosen); nullptr with parse.
  std::string (*show)(const Config& config);
  // Whether a set but empty value counts as unset (all but
  // CHORUS_STORE_SECRET, where it is an error).
  bool empty_is_unset = true;
};

// Every CHORUS_* variable, in the order --params prints them.
std::span<const Setting> settings();
// The setting of that name, or nullptr.
const Setting* find_setting(std::string_view name);
// lookup(name) for a name the list holds; Error(internal) for any other.
std::optional<std::string> setting_var(const EnvLookup& lookup, std::string_view name);

// A setting with its default, the value in effect and where that came from:
// "environment" or "default" (no setting is read from a tuning file, which
// holds the tuner's model and rules).
struct SettingValue {
  const Setting* setting;
  std::string default_value;
  std::string value;
  std::string source;
};
// Every setting as `lookup` gives them (Config::from_env's errors included).
std::vector<SettingValue> settings_in_effect(const EnvLookup& lookup);

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
