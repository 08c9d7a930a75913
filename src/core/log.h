// Rank-prefixed logging to stderr, gated by CHORUS_DEBUG.
//   log_message(cfg.log_level, LogLevel::info, rank, "ring allreduce ", bytes, " B");
#pragma once

#include "core/check.h"

#include <string>

namespace chorus {

// CHORUS_DEBUG: warn (default), info, trace, or none.
enum class LogLevel : int { none = 0, warn = 1, info = 2, trace = 3 };

void write_log_line(LogLevel level, int rank, const std::string& text);

template <typename... Parts>
void log_message(LogLevel enabled, LogLevel level, int rank, Parts&&... parts) {
  if (static_cast<int>(level) > static_cast<int>(enabled)) return;
  write_log_line(level, rank, str_cat(std::forward<Parts>(parts)...));
}

}  // namespace chorus
