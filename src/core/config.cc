#include "core/config.h"

#include "core/check.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string_view>

namespace chorus {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

double parse_number(const char* var, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v >= 0))
    fail(ErrorCode::invalid_argument, var, "='", text, "' is not a non-negative number");
  return v;
}

// A non-negative decimal integer below 2^31, or an error naming the variable.
int parse_index(const char* var, const std::string& text) {
  int v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0)
    fail(ErrorCode::invalid_argument, var, "='", text, "' is not a non-negative integer");
  return v;
}

// One launcher's pair of (rank, size) variables.
struct RankVars {
  const char* source;
  const char* rank;
  const char* size;
};

// A launcher's variable: CHORUS_* ones through the list of settings, so
// that none is read without a description there.
std::optional<std::string> read_var(const EnvLookup& lookup, std::string_view name) {
  if (name.starts_with("CHORUS_")) return setting_var(lookup, name);
  return lookup(name);
}

}  // namespace

bool launcher_env_present() {
  return launcher_env_present(env_var);
}

bool launcher_env_present(const EnvLookup& lookup) {
  for (const char* v :
       {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
    if (read_var(lookup, v)) return true;
  return false;
}

BootstrapEnv read_bootstrap_env() {
  return read_bootstrap_env(env_var);
}

BootstrapEnv read_bootstrap_env(const EnvLookup& lookup) {
  BootstrapEnv env;
  // Launchers from the innermost to the outermost: launchers nest (mpirun or
  // torchrun inside a Slurm allocation, which leaves SLURM_PROCID=0 in every
  // rank's environment), so the first one whose variables are set wins and
  // those of the launchers around it are ignored. Within the chosen pair, a
  // half-set pair or a rank outside [0, size) is an error naming the variable.
  const RankVars launchers[] = {{"CHORUS", "CHORUS_RANK", "CHORUS_WORLD_SIZE"},
                                {"torchrun", "RANK", "WORLD_SIZE"},
                                {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                {"MPICH Hydra", "PMI_RANK", "PMI_SIZE"},
                                {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"}};
  const RankVars* chosen = nullptr;
  for (const RankVars& l : launchers) {
    auto r = read_var(lookup, l.rank);
    auto n = read_var(lookup, l.size);
    if (!r && !n) continue;
    if (!r) fail(ErrorCode::invalid_argument, l.size, " is set but ", l.rank, " is not");
    if (!n) fail(ErrorCode::invalid_argument, l.rank, " is set but ", l.size, " is not");
    const int rank = parse_index(l.rank, *r);
    const int size = parse_index(l.size, *n);
    if (size < 1) fail(ErrorCode::invalid_argument, l.size, "='", *n, "' must be at least 1");
    if (rank >= size)
      fail(ErrorCode::invalid_argument, l.rank, "=", rank, " is not below ", l.size, "=", size);
    chosen = &l;
    env.rank = rank;
    env.world_size = size;
    env.source = l.source;
    break;
  }
  if (chosen == nullptr)
    fail(ErrorCode::invalid_argument,
         "no rank in the environment: set CHORUS_RANK and CHORUS_WORLD_SIZE, or start under "
         "torchrun (RANK, WORLD_SIZE), mpirun (OMPI_COMM_WORLD_RANK/_SIZE, PMI_RANK/PMI_SIZE) "
         "or srun (SLURM_PROCID/SLURM_NTASKS)");
  if (auto s = setting_var(lookup, "CHORUS_STORE"); s && !s->empty()) {
    env.store = *s;
    env.store_source = "CHORUS_STORE";
  } else {
    auto addr = lookup("MASTER_ADDR");
    auto port = lookup("MASTER_PORT");
    if (addr && !port)
      fail(ErrorCode::invalid_argument, "MASTER_ADDR is set but MASTER_PORT is not");
    if (port && !addr)
      fail(ErrorCode::invalid_argument, "MASTER_PORT is set but MASTER_ADDR is not");
    if (!addr)
      fail(ErrorCode::invalid_argument, "rank ", env.rank, " of ", env.world_size, " (from ",
           env.source,
           " variables): no store; set CHORUS_STORE=file:///shared/dir or "
           "tcp://host:port, or MASTER_ADDR and MASTER_PORT");
    const int p = parse_index("MASTER_PORT", *port);
    if (p < 1 || p > 65535)
      fail(ErrorCode::invalid_argument, "MASTER_PORT='", *port, "' is not a port from 1 to 65535");
    env.store = str_cat("tcp://", *addr, ":", p);
    env.store_source = "MASTER_ADDR/MASTER_PORT";
  }
  return env;
}

std::optional<std::string> env_var(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

EnvLookup env_from_map(std::map<std::string, std::string, std::less<>> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string_view to_string(ProgressMode mode) {
  return mode == ProgressMode::thread ? "thread" : "caller";
}

ProgressMode parse_progress_mode(std::string_view text, std::string_view what) {
  const std::string_view t = trim(std::string(text));
  if (t == "thread") return ProgressMode::thread;
  if (t == "caller") return ProgressMode::caller;
  fail(ErrorCode::invalid_argument, what, "='", text, "' is not one of thread, caller");
}

int check_progress_cpu(double cpu, std::string_view text, std::string_view what) {
  // CPU numbers the kernel's affinity masks can hold (CPU_SETSIZE).
  constexpr double kMaxCpu = 1023;
  if (!(cpu >= 0 && cpu <= kMaxCpu) || cpu != static_cast<double>(static_cast<int>(cpu)))
    fail(ErrorCode::invalid_argument, what, "='", text, "' must be a CPU number from 0 to 1023");
  return static_cast<int>(cpu);
}

std::string_view to_string(TunerMode mode) {
  switch (mode) {
    case TunerMode::learn:
      return "learn";
    case TunerMode::model:
      return "model";
    case TunerMode::off:
      return "off";
  }
  return "?";
}

std::string Config::algorithm_for(Collective c) const {
  auto it = algorithm.find(c);
  if (it != algorithm.end()) return it->second;
  return algorithm_all;
}

Config Config::from_env() {
  return from_env(env_var);
}

namespace {

// The text of a number as a person writes it: 300, 0.5, 16777216.
std::string number_text(double v) {
  std::ostringstream out;
  out.precision(15);
  out << v;
  return out.str();
}

std::string or_unset(const std::string& s) {
  return s.empty() ? std::string("unset") : s;
}

void parse_timeout(Config& cfg, const std::string& v) {
  // Seconds, "inf" (no deadline) included; anything too long to count in
  // milliseconds saturates to no deadline too (deadline_after).
  const double s = parse_number("CHORUS_TIMEOUT", v);
  const double ms = s * 1000.0;
  if (!(ms >= 1))
    fail(ErrorCode::invalid_argument, "CHORUS_TIMEOUT='", v,
         "' must be positive seconds (at least 0.001), or inf");
  constexpr auto kForever = std::chrono::milliseconds::max();
  cfg.timeout = ms >= static_cast<double>(kForever.count())
                    ? kForever
                    : std::chrono::milliseconds(static_cast<long long>(ms));
}

std::string show_timeout(const Config& cfg) {
  if (cfg.timeout == std::chrono::milliseconds::max()) return "inf";
  return number_text(static_cast<double>(cfg.timeout.count()) / 1000.0);
}

void parse_algo(Config& cfg, const std::string& v) {
  std::string_view rest = v;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find_first_of("=:");
    if (eq == std::string_view::npos) {
      cfg.algorithm_all = std::string(item);
      continue;
    }
    auto coll = parse_collective(trim(item.substr(0, eq)));
    if (!coll)
      fail(ErrorCode::invalid_argument, "CHORUS_ALGO: unknown collective '",
           trim(item.substr(0, eq)), "' in '", v, "'");
    cfg.algorithm[*coll] = std::string(trim(item.substr(eq + 1)));
  }
}

std::string show_algo(const Config& cfg) {
  std::string text = cfg.algorithm_all;
  for (const auto& [c, name] : cfg.algorithm)
    text += str_cat(text.empty() ? "" : ",", to_string(c), "=", name);
  return text.empty() ? "auto" : text;
}

void parse_debug(Config& cfg, const std::string& v) {
  std::string_view rest = v;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    std::string upper(item);
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (upper == "WARN")
      cfg.log_level = LogLevel::warn;
    else if (upper == "INFO")
      cfg.log_level = LogLevel::info;
    else if (upper == "TRACE")
      cfg.log_level = LogLevel::trace;
    else if (upper == "TUNING" || upper == "TUNE")
      cfg.log_tuning = true;
    else if (upper == "NONE")
      cfg.log_level = LogLevel::none;
    else if (!item.empty())
      fail(ErrorCode::invalid_argument, "CHORUS_DEBUG: '", item,
           "' is not one of NONE, WARN, INFO, TRACE, TUNING (or TUNE)");
  }
}

std::string show_debug(const Config& cfg) {
  const char* level = "NONE";
  switch (cfg.log_level) {
    case LogLevel::none:
      level = "NONE";
      break;
    case LogLevel::warn:
      level = "WARN";
      break;
    case LogLevel::info:
      level = "INFO";
      break;
    case LogLevel::trace:
      level = "TRACE";
      break;
  }
  return cfg.log_tuning ? str_cat(level, ",TUNING") : std::string(level);
}

void parse_tuner(Config& cfg, const std::string& v) {
  const std::string_view t = trim(v);
  if (t == "learn")
    cfg.tuner = TunerMode::learn;
  else if (t == "model")
    cfg.tuner = TunerMode::model;
  else if (t == "off")
    cfg.tuner = TunerMode::off;
  else
    fail(ErrorCode::invalid_argument, "CHORUS_TUNER='", v, "' is not one of learn, model, off");
  cfg.tuner_set = true;
}

void parse_spin(Config& cfg, const std::string& v) {
  // A spin longer than a few seconds is a busy-wait, not a spin.
  constexpr double kMaxSpinUs = 10e6;
  const double us = parse_number("CHORUS_SPIN_US", v);
  if (!(us <= kMaxSpinUs))
    fail(ErrorCode::invalid_argument, "CHORUS_SPIN_US='", v,
         "' must be microseconds from 0 to 10000000");
  cfg.spin = std::chrono::microseconds(static_cast<long long>(us));
}

void parse_segment(Config& cfg, const std::string& v) {
  constexpr double kMaxSegment = 1ull << 40;
  const double bytes = parse_number("CHORUS_SEGMENT", v);
  if (!(bytes <= kMaxSegment) || bytes != static_cast<double>(static_cast<size_t>(bytes)))
    fail(ErrorCode::invalid_argument, "CHORUS_SEGMENT='", v,
         "' must be whole bytes from 0 (the algorithm's default) to 2^40");
  cfg.segment_bytes = static_cast<size_t>(bytes);
}

void parse_stream_bytes(Config& cfg, const std::string& v) {
  constexpr double kMax = 1ull << 50;
  const double bytes = parse_number("CHORUS_STREAM_BYTES", v);
  if (!(bytes <= kMax) || bytes != static_cast<double>(static_cast<size_t>(bytes)))
    fail(ErrorCode::invalid_argument, "CHORUS_STREAM_BYTES='", v,
         "' must be whole bytes from 0 (never) to 2^50");
  cfg.stream_bytes = static_cast<size_t>(bytes);
}

// "0" or "1" for `var`.
bool parse_bit(const char* var, const std::string& v) {
  const std::string_view t = trim(v);
  if (t != "0" && t != "1") fail(ErrorCode::invalid_argument, var, "='", v, "' is not one of 0, 1");
  return t == "1";
}

void parse_tcp_streams(Config& cfg, const std::string& v) {
  const double n = parse_number("CHORUS_TCP_STREAMS", v);
  if (n < 1 || n > 64 || n != static_cast<double>(static_cast<size_t>(n)))
    fail(ErrorCode::invalid_argument, "CHORUS_TCP_STREAMS='", v,
         "' must be an integer from 1 to 64");
  cfg.tcp_streams = static_cast<size_t>(n);
}

void parse_secret(Config& cfg, const std::string& v) {
  // An empty value is more likely a failed substitution than a choice.
  if (v.empty())
    fail(ErrorCode::invalid_argument,
         "CHORUS_STORE_SECRET is set but empty: unset it for an open store, or give every "
         "rank the same non-empty secret");
  cfg.store_secret = v;
}

// The list. Bootstrap variables (read by read_bootstrap_env and
// join_from_env, not by from_env) have no parse or show: their value in
// effect is the text of the variable.
const Setting kSettings[] = {
    {"CHORUS_RANK", "this process's rank (bootstrap: init_from_env)", nullptr, nullptr},
    {"CHORUS_WORLD_SIZE", "the number of ranks of the job (bootstrap: init_from_env)", nullptr,
     nullptr},
    {"CHORUS_STORE", "the job's store: file:///shared/dir or tcp://host:port", nullptr, nullptr},
    {"CHORUS_STORE_SECRET",
     "the secret a tcp:// store admits clients by; the same on every rank (set but empty: an "
     "error)",
     parse_secret,
     [](const Config& c) { return std::string(c.store_secret.empty() ? "unset" : "(set)"); },
     false},
    {"CHORUS_JOIN_GENERATION",
     "the generation of the grow a new process joins (join_from_env): 1 for the job's first grow",
     nullptr, nullptr},
    {"CHORUS_TIMEOUT",
     "seconds: deadline of start-up and default deadline of every call; inf: none", parse_timeout,
     show_timeout},
    {"CHORUS_ALGO",
     "algorithm override: one name for every collective that has it, or "
     "allreduce=ring,allgather=bruck",
     parse_algo, show_algo},
    {"CHORUS_TRANSPORT",
     "shm | tcp: one transport for every peer (auto: shm within a host, tcp across hosts)",
     [](Config& c, const std::string& v) {
       c.transport = parse_process_transport(v, str_cat("CHORUS_TRANSPORT='", v, "'"));
     },
     [](const Config& c) {
       return c.transport ? std::string(to_string(*c.transport)) : std::string("auto");
     }},
    {"CHORUS_DEBUG", "NONE | WARN | INFO | TRACE, and TUNING: logging (comma list, any case)",
     parse_debug, show_debug},
    {"CHORUS_TUNER",
     "learn | model | off: how a call with no algorithm named gets one (time the candidates, the "
     "model's pick, the first that serves)",
     parse_tuner, [](const Config& c) { return std::string(to_string(c.tuner)); }},
    {"CHORUS_SPIN_US", "microseconds a waiting rank spins before it blocks (0: block at once)",
     parse_spin, [](const Config& c) { return std::to_string(c.spin.count()); }},
    {"CHORUS_SEGMENT",
     "pipelining segment in bytes for segmented algorithms (0: each algorithm's default)",
     parse_segment, [](const Config& c) { return std::to_string(c.segment_bytes); }},
    {"CHORUS_STREAM_BYTES",
     "outputs of at least this many bytes are written with non-temporal stores (0: never)",
     parse_stream_bytes, [](const Config& c) { return std::to_string(c.stream_bytes); }},
    {"CHORUS_DETERMINISTIC",
     "1: every floating sum or avg AllReduce, ReduceScatter and Reduce is deterministic",
     [](Config& c, const std::string& v) {
       c.deterministic = parse_bit("CHORUS_DETERMINISTIC", v);
     },
     [](const Config& c) { return std::string(c.deterministic ? "1" : "0"); }},
    {"CHORUS_PROGRESS",
     "thread | caller: who advances an outstanding Work while its caller computes",
     [](Config& c, const std::string& v) {
       c.progress = parse_progress_mode(v, "CHORUS_PROGRESS");
     },
     [](const Config& c) { return std::string(to_string(c.progress)); }},
    {"CHORUS_PROGRESS_CPU", "a CPU number: the progress threads run on that CPU only",
     [](Config& c, const std::string& v) {
       c.progress_cpu =
           check_progress_cpu(parse_number("CHORUS_PROGRESS_CPU", v), v, "CHORUS_PROGRESS_CPU");
     },
     [](const Config& c) {
       return c.progress_cpu < 0 ? std::string("unset") : std::to_string(c.progress_cpu);
     }},
    {"CHORUS_TUNING_FILE", "the fitted model (and measured rules) for the tuner",
     [](Config& c, const std::string& v) { c.tuning_file = v; },
     [](const Config& c) { return or_unset(c.tuning_file); }},
    {"CHORUS_TUNING_CACHE",
     "on | off: without a tuning file, use (or make and store) this host's cached calibration",
     [](Config& c, const std::string& v) {
       if (v != "on" && v != "off")
         fail(ErrorCode::invalid_argument, "CHORUS_TUNING_CACHE='", v, "' is not one of on, off");
       c.tuning_cache = v == "on";
     },
     [](const Config& c) { return std::string(c.tuning_cache ? "on" : "off"); }},
    {"CHORUS_HOST_ID",
     "the host identity this rank publishes (unset: hostname and boot id); equal ones use shm",
     [](Config& c, const std::string& v) { c.host_id = v; },
     [](const Config& c) { return or_unset(c.host_id); }},
    {"CHORUS_FLIGHT_RECORDER",
     "a directory: every failure writes the rank's last calls there as JSON",
     [](Config& c, const std::string& v) { c.flight_recorder_dir = v; },
     [](const Config& c) { return or_unset(c.flight_recorder_dir); }},
    {"CHORUS_TRACE",
     "a directory: every communicator writes a Chrome trace of its ops there when destroyed",
     [](Config& c, const std::string& v) { c.trace_dir = v; },
     [](const Config& c) { return or_unset(c.trace_dir); }},
    {"CHORUS_BIND", "core | none: chorus-run and chorus-perf bind local ranks to cores",
     [](Config& c, const std::string& v) {
       if (v != "core" && v != "none")
         fail(ErrorCode::invalid_argument, "CHORUS_BIND='", v, "' is not one of core, none");
       c.bind_cores = v == "core";
     },
     [](const Config& c) { return std::string(c.bind_cores ? "core" : "none"); }},
    {"CHORUS_TCP_STREAMS", "sockets per tcp peer, 1 to 64 (auto: 2 up to 256 ranks, else 1)",
     parse_tcp_streams,
     [](const Config& c) {
       return c.tcp_streams == 0 ? std::string("auto") : std::to_string(c.tcp_streams);
     }},
    {"CHORUS_METRICS",
     "PATH: write Prometheus text there (%r: the rank) every interval; [ADDRESS]:PORT: serve "
     "/metrics on PORT + rank",
     [](Config& c, const std::string& v) {
       (void)parse_metrics_target(v);
       c.metrics = v;
     },
     [](const Config& c) { return or_unset(c.metrics); }},
    {"CHORUS_METRICS_INTERVAL", "seconds between two writes of the CHORUS_METRICS file",
     [](Config& c, const std::string& v) {
       const double s = parse_number("CHORUS_METRICS_INTERVAL", v);
       if (!(s >= 0.01 && s <= 86400))
         fail(ErrorCode::invalid_argument, "CHORUS_METRICS_INTERVAL='", v,
              "' must be seconds from 0.01 to 86400");
       c.metrics_interval = s;
     },
     [](const Config& c) { return number_text(c.metrics_interval); }},
    {"CHORUS_STRAGGLERS",
     "1: as a job's communicator ends, rank 0 prints who arrived last, how late, per rank",
     [](Config& c, const std::string& v) {
       c.stragglers_summary = parse_bit("CHORUS_STRAGGLERS", v);
     },
     [](const Config& c) { return std::string(c.stragglers_summary ? "1" : "0"); }},
    {"CHORUS_TCP_ADDR",
     "the address this rank publishes for tcp peers (unset: the one that routes to the store)",
     [](Config& c, const std::string& v) { c.tcp_address = v; },
     [](const Config& c) { return or_unset(c.tcp_address); }},
};

}  // namespace

std::span<const Setting> settings() {
  return kSettings;
}

const Setting* find_setting(std::string_view name) {
  for (const Setting& s : kSettings)
    if (s.name == name) return &s;
  return nullptr;
}

std::optional<std::string> setting_var(const EnvLookup& lookup, std::string_view name) {
  CHORUS_CHECK(find_setting(name) != nullptr);
  return lookup(name);
}

bool setting_is_set(const Setting& setting, const std::optional<std::string>& value) {
  return value && (!value->empty() || !setting.empty_is_unset);
}

std::vector<SettingValue> settings_in_effect(const EnvLookup& lookup) {
  const Config defaults;
  const Config cfg = Config::from_env(lookup);
  std::vector<SettingValue> out;
  for (const Setting& s : kSettings) {
    SettingValue v{&s, "", "", "default"};
    const auto text = lookup(s.name);
    const bool set = setting_is_set(s, text);
    if (s.show != nullptr) {
      v.default_value = s.show(defaults);
      v.value = s.show(cfg);
    } else {
      v.default_value = "unset";
      v.value = set ? *text : "unset";
    }
    if (set) v.source = "environment";
    out.push_back(std::move(v));
  }
  return out;
}

Config Config::from_env(const EnvLookup& lookup) {
  Config cfg;
  for (const Setting& s : kSettings) {
    if (s.parse == nullptr) continue;
    const auto v = lookup(s.name);
    if (setting_is_set(s, v)) s.parse(cfg, *v);
  }
  if (auto v = lookup("XDG_CACHE_HOME"); v && !v->empty() && v->front() == '/')
    cfg.cache_dir = *v + "/chorus";
  else if (auto h = lookup("HOME"); h && !h->empty())
    cfg.cache_dir = *h + "/.cache/chorus";
  return cfg;
}

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

MetricsTarget parse_metrics_target(std::string_view text) {
  MetricsTarget t;
  if (text.empty()) return t;
  const size_t colon = text.rfind(':');
  if (text.find('/') == std::string_view::npos && colon != std::string_view::npos) {
    const std::string_view port = text.substr(colon + 1);
    std::string_view address = text.substr(0, colon);
    if (!all_digits(port) || port.size() > 5)
      fail(ErrorCode::invalid_argument, "CHORUS_METRICS='", text,
           "' is neither a file path nor [ADDRESS]:PORT (a port from 0 to 65535)");
    const int p = std::stoi(std::string(port));
    if (p > 65535)
      fail(ErrorCode::invalid_argument, "CHORUS_METRICS='", text,
           "': the port must be from 0 to 65535");
    if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
      address = address.substr(1, address.size() - 2);
    t.kind = MetricsTarget::Kind::http;
    t.address = std::string(address);
    t.port = p;
    return t;
  }
  if (text.back() == '/')
    fail(ErrorCode::invalid_argument, "CHORUS_METRICS='", text,
         "' names a directory: give the file to write (%r: the rank)");
  t.kind = MetricsTarget::Kind::file;
  t.path = std::string(text);
  return t;
}

void check_config_directories(const Config& config) {
  const std::pair<const char*, const std::string*> dirs[] = {
      {"CHORUS_TRACE", &config.trace_dir}, {"CHORUS_FLIGHT_RECORDER", &config.flight_recorder_dir}};
  for (const auto& [var, dir] : dirs) {
    if (dir->empty()) continue;
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    if (ec)
      fail(ErrorCode::invalid_argument, var, "='", *dir,
           "' cannot be made a directory: ", ec.message());
    if (!std::filesystem::is_directory(*dir, ec))
      fail(ErrorCode::invalid_argument, var, "='", *dir, "' is not a directory");
  }
}

size_t tcp_streams_for(const Config& config, int world_size) {
  if (config.tcp_streams > 0) return config.tcp_streams;
  constexpr int kTwoStreamsUpTo = 256;
  return world_size <= kTwoStreamsUpTo ? 2 : 1;
}

}  // namespace chorus
