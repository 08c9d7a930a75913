#include "core/config.h"

#include "core/check.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
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

}  // namespace

bool launcher_env_present() {
  return launcher_env_present(env_var);
}

bool launcher_env_present(const EnvLookup& lookup) {
  for (const char* v :
       {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
    if (lookup(v)) return true;
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
    auto r = lookup(l.rank);
    auto n = lookup(l.size);
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
  if (auto s = lookup("CHORUS_STORE"); s && !s->empty()) {
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

Config Config::from_env(const EnvLookup& lookup) {
  Config cfg;
  if (auto v = lookup("CHORUS_TIMEOUT"); v && !v->empty()) {
    // Seconds, "inf" (no deadline) included; anything too long to count in
    // milliseconds saturates to no deadline too (deadline_after).
    const double s = parse_number("CHORUS_TIMEOUT", *v);
    const double ms = s * 1000.0;
    if (!(ms >= 1))
      fail(ErrorCode::invalid_argument, "CHORUS_TIMEOUT='", *v,
           "' must be positive seconds (at least 0.001), or inf");
    constexpr auto kForever = std::chrono::milliseconds::max();
    cfg.timeout = ms >= static_cast<double>(kForever.count())
                      ? kForever
                      : std::chrono::milliseconds(static_cast<long long>(ms));
  }
  if (auto v = lookup("CHORUS_ALGO"); v && !v->empty()) {
    std::string_view rest = *v;
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
             trim(item.substr(0, eq)), "' in '", *v, "'");
      cfg.algorithm[*coll] = std::string(trim(item.substr(eq + 1)));
    }
  }
  if (auto v = lookup("CHORUS_TRANSPORT"); v && !v->empty())
    cfg.transport = parse_process_transport(*v, str_cat("CHORUS_TRANSPORT='", *v, "'"));
  if (auto v = lookup("CHORUS_DEBUG"); v && !v->empty()) {
    std::string_view rest = *v;
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
  if (auto v = lookup("CHORUS_TUNER"); v && !v->empty()) {
    const std::string_view t = trim(*v);
    if (t == "learn")
      cfg.tuner = TunerMode::learn;
    else if (t == "model")
      cfg.tuner = TunerMode::model;
    else if (t == "off")
      cfg.tuner = TunerMode::off;
    else
      fail(ErrorCode::invalid_argument, "CHORUS_TUNER='", *v, "' is not one of learn, model, off");
    cfg.tuner_set = true;
  }
  if (auto v = lookup("CHORUS_SPIN_US"); v && !v->empty()) {
    // A spin longer than a few seconds is a busy-wait, not a spin.
    constexpr double kMaxSpinUs = 10e6;
    const double us = parse_number("CHORUS_SPIN_US", *v);
    if (!(us <= kMaxSpinUs))
      fail(ErrorCode::invalid_argument, "CHORUS_SPIN_US='", *v,
           "' must be microseconds from 0 to 10000000");
    cfg.spin = std::chrono::microseconds(static_cast<long long>(us));
  }
  if (auto v = lookup("CHORUS_SEGMENT"); v && !v->empty()) {
    constexpr double kMaxSegment = 1ull << 40;
    const double bytes = parse_number("CHORUS_SEGMENT", *v);
    if (!(bytes <= kMaxSegment) || bytes != static_cast<double>(static_cast<size_t>(bytes)))
      fail(ErrorCode::invalid_argument, "CHORUS_SEGMENT='", *v,
           "' must be whole bytes from 0 (the algorithm's default) to 2^40");
    cfg.segment_bytes = static_cast<size_t>(bytes);
  }
  if (auto v = lookup("CHORUS_STREAM_BYTES"); v && !v->empty()) {
    constexpr double kMax = 1ull << 50;
    const double bytes = parse_number("CHORUS_STREAM_BYTES", *v);
    if (!(bytes <= kMax) || bytes != static_cast<double>(static_cast<size_t>(bytes)))
      fail(ErrorCode::invalid_argument, "CHORUS_STREAM_BYTES='", *v,
           "' must be whole bytes from 0 (never) to 2^50");
    cfg.stream_bytes = static_cast<size_t>(bytes);
  }
  if (auto v = lookup("CHORUS_DETERMINISTIC"); v && !v->empty()) {
    const std::string_view t = trim(*v);
    if (t != "0" && t != "1")
      fail(ErrorCode::invalid_argument, "CHORUS_DETERMINISTIC='", *v, "' is not one of 0, 1");
    cfg.deterministic = t == "1";
  }
  if (auto v = lookup("CHORUS_PROGRESS"); v && !v->empty())
    cfg.progress = parse_progress_mode(*v, "CHORUS_PROGRESS");
  if (auto v = lookup("CHORUS_PROGRESS_CPU"); v && !v->empty())
    cfg.progress_cpu =
        check_progress_cpu(parse_number("CHORUS_PROGRESS_CPU", *v), *v, "CHORUS_PROGRESS_CPU");
  if (auto v = lookup("CHORUS_TUNING_FILE")) cfg.tuning_file = *v;
  if (auto v = lookup("CHORUS_TUNING_CACHE"); v && !v->empty()) {
    if (*v != "on" && *v != "off")
      fail(ErrorCode::invalid_argument, "CHORUS_TUNING_CACHE='", *v, "' is not one of on, off");
    cfg.tuning_cache = *v == "on";
  }
  if (auto v = lookup("XDG_CACHE_HOME"); v && !v->empty() && v->front() == '/')
    cfg.cache_dir = *v + "/chorus";
  else if (auto h = lookup("HOME"); h && !h->empty())
    cfg.cache_dir = *h + "/.cache/chorus";
  if (auto v = lookup("CHORUS_HOST_ID")) cfg.host_id = *v;
  if (auto v = lookup("CHORUS_FLIGHT_RECORDER")) cfg.flight_recorder_dir = *v;
  if (auto v = lookup("CHORUS_TRACE")) cfg.trace_dir = *v;
  if (auto v = lookup("CHORUS_BIND"); v && !v->empty()) {
    if (*v != "core" && *v != "none")
      fail(ErrorCode::invalid_argument, "CHORUS_BIND='", *v, "' is not one of core, none");
    cfg.bind_cores = *v == "core";
  }
  if (auto v = lookup("CHORUS_TCP_STREAMS"); v && !v->empty()) {
    const double n = parse_number("CHORUS_TCP_STREAMS", *v);
    if (n < 1 || n > 64 || n != static_cast<double>(static_cast<size_t>(n)))
      fail(ErrorCode::invalid_argument, "CHORUS_TCP_STREAMS='", *v,
           "' must be an integer from 1 to 64");
    cfg.tcp_streams = static_cast<size_t>(n);
  }
  if (auto v = lookup("CHORUS_TCP_ADDR")) cfg.tcp_address = *v;
  if (auto v = lookup("CHORUS_STORE_SECRET")) {
    // An empty value is more likely a failed substitution than a choice.
    if (v->empty())
      fail(ErrorCode::invalid_argument,
           "CHORUS_STORE_SECRET is set but empty: unset it for an open store, or give every "
           "rank the same non-empty secret");
    cfg.store_secret = *v;
  }
  return cfg;
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
