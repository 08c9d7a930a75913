#include "core/config.h"

#include "core/check.h"

#include <charconv>
#include <cstdlib>
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

}  // namespace

std::optional<std::string> env_var(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::string Config::algorithm_for(Collective c) const {
  auto it = algorithm.find(c);
  if (it != algorithm.end()) return it->second;
  return algorithm_all;
}

Config Config::from_env() {
  Config cfg;
  if (auto v = env_var("CHORUS_TIMEOUT"); v && !v->empty()) {
    const double s = parse_number("CHORUS_TIMEOUT", *v);
    cfg.timeout = std::chrono::milliseconds(static_cast<long long>(s * 1000.0));
    if (cfg.timeout.count() == 0)
      fail(ErrorCode::invalid_argument, "CHORUS_TIMEOUT='", *v, "' must be positive seconds");
  }
  if (auto v = env_var("CHORUS_ALGO"); v && !v->empty()) {
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
  if (auto v = env_var("CHORUS_TRANSPORT"); v && !v->empty()) {
    if (*v != "shm" && *v != "tcp" && *v != "inproc")
      fail(ErrorCode::invalid_argument, "CHORUS_TRANSPORT='", *v,
           "' is not one of shm, tcp, inproc");
    cfg.transport = *v;
  }
  if (auto v = env_var("CHORUS_DEBUG"); v && !v->empty()) {
    std::string_view rest = *v;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view item = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      if (item == "WARN") cfg.log_level = LogLevel::warn;
      else if (item == "INFO") cfg.log_level = LogLevel::info;
      else if (item == "TRACE") cfg.log_level = LogLevel::trace;
      else if (item == "TUNING") cfg.log_tuning = true;
      else if (item == "NONE") cfg.log_level = LogLevel::none;
      else if (!item.empty())
        fail(ErrorCode::invalid_argument, "CHORUS_DEBUG: '", item,
             "' is not one of NONE, WARN, INFO, TRACE, TUNING");
    }
  }
  if (auto v = env_var("CHORUS_SPIN_US"); v && !v->empty())
    cfg.spin = std::chrono::microseconds(
        static_cast<long long>(parse_number("CHORUS_SPIN_US", *v)));
  if (auto v = env_var("CHORUS_SEGMENT"); v && !v->empty())
    cfg.segment_bytes = static_cast<size_t>(parse_number("CHORUS_SEGMENT", *v));
  if (auto v = env_var("CHORUS_TUNING_FILE")) cfg.tuning_file = *v;
  return cfg;
}

}  // namespace chorus
