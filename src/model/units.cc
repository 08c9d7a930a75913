#include "model/units.h"

#include "core/check.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace chorus {
namespace {

// Splits "25GB/s" into the number 25 and the suffix "GB/s". The number must
// be finite; the whole text must be consumed by number + suffix.
bool split_number(std::string_view text, double& number, std::string& suffix) {
  const std::string s(text);
  if (s.empty()) return false;
  char* end = nullptr;
  number = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(number)) return false;
  suffix.assign(end);
  return true;
}

}  // namespace

double parse_time(std::string_view text, std::string_view what) {
  double v = 0;
  std::string unit;
  if (!split_number(text, v, unit) || v < 0)
    fail(ErrorCode::invalid_argument, what, ": '", text,
         "' is not a non-negative time (examples: 2us, 1.5ms, 300ns, 0.1s)");
  double scale = 0;
  if (unit.empty() || unit == "s")
    scale = 1;
  else if (unit == "ms")
    scale = 1e-3;
  else if (unit == "us")
    scale = 1e-6;
  else if (unit == "ns")
    scale = 1e-9;
  else
    fail(ErrorCode::invalid_argument, what, ": unknown time unit '", unit, "' in '", text,
         "' (use s, ms, us or ns)");
  return v * scale;
}

double parse_bandwidth(std::string_view text, std::string_view what) {
  double v = 0;
  std::string unit;
  if (!split_number(text, v, unit) || !(v > 0))
    fail(ErrorCode::invalid_argument, what, ": '", text,
         "' is not a positive bandwidth (examples: 25GB/s, 100MB/s, 1e9B/s)");
  double scale = 0;
  if (unit.empty() || unit == "B/s")
    scale = 1;
  else if (unit == "KB/s")
    scale = 1e3;
  else if (unit == "MB/s")
    scale = 1e6;
  else if (unit == "GB/s")
    scale = 1e9;
  else if (unit == "TB/s")
    scale = 1e12;
  else
    fail(ErrorCode::invalid_argument, what, ": unknown bandwidth unit '", unit, "' in '", text,
         "' (use B/s, KB/s, MB/s, GB/s or TB/s; 1 GB = 1e9 B)");
  return v * scale;
}

size_t parse_size(std::string_view text, std::string_view what) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0)
    fail(ErrorCode::invalid_argument, what, ": '", text,
         "' is not a size (examples: 8, 4K, 64M, 1G; K = 1024)");
  std::string_view unit = text.substr(digits);
  if (!unit.empty() && unit.back() == 'B') unit.remove_suffix(1);
  int shift = 0;
  if (unit.empty())
    shift = 0;
  else if (unit == "K")
    shift = 10;
  else if (unit == "M")
    shift = 20;
  else if (unit == "G")
    shift = 30;
  else if (unit == "T")
    shift = 40;
  else
    fail(ErrorCode::invalid_argument, what, ": unknown size suffix '", text.substr(digits),
         "' in '", text, "' (use K, M, G or T; K = 1024)");
  size_t v = 0;
  for (size_t i = 0; i < digits; ++i) {
    const auto d = static_cast<size_t>(text[i] - '0');
    if (v > (std::numeric_limits<size_t>::max() - d) / 10)
      fail(ErrorCode::invalid_argument, what, ": '", text, "' overflows");
    v = v * 10 + d;
  }
  if (shift > 0 && v > (std::numeric_limits<size_t>::max() >> shift))
    fail(ErrorCode::invalid_argument, what, ": '", text, "' overflows");
  return v << shift;
}

std::string format_time(double seconds) {
  const char* unit = "s";
  double v = seconds;
  if (seconds != 0 && std::fabs(seconds) < 1e-6) {
    unit = "ns";
    v = seconds * 1e9;
  } else if (seconds != 0 && std::fabs(seconds) < 1e-3) {
    unit = "us";
    v = seconds * 1e6;
  } else if (seconds != 0 && std::fabs(seconds) < 1) {
    unit = "ms";
    v = seconds * 1e3;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g%s", v, unit);
  return buf;
}

std::string format_size(size_t bytes) {
  static constexpr const char* kSuffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return str_cat(bytes, kSuffix[i]);
}

std::string format_bandwidth(double bps) {
  static constexpr const char* kUnit[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"};
  int i = 0;
  while (i < 4 && bps >= 1000) {
    bps /= 1000;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g%s", bps, kUnit[i]);
  return buf;
}

}  // namespace chorus
