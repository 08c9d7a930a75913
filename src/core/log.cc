#include "core/log.h"

#include <cstdio>

namespace chorus {

void write_log_line(LogLevel level, int rank, const std::string& text) {
  const char* tag = level == LogLevel::warn ? "WARN" : level == LogLevel::info ? "INFO" : "TRACE";
  // One fprintf per line so that lines of concurrent ranks do not interleave.
  std::fprintf(stderr, "[chorus rank %d] %s %s\n", rank, tag, text.c_str());
}

}  // namespace chorus
