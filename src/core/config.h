// Every environment variable chorus reads, in one place. The README lists them.
//
//   CHORUS_TIMEOUT     default deadline of a call, in seconds (default 300)
//   CHORUS_ALGO        algorithm override: "ring" for every collective that has
//                      it, or per collective "allreduce=ring,allgather=bruck"
//   CHORUS_TRANSPORT   shm | tcp | inproc: force a transport
//   CHORUS_DEBUG       WARN | INFO | TRACE | TUNING (comma list): logging
//   CHORUS_SPIN_US     microseconds a waiting rank spins before it blocks
//                      (default 50; 0 blocks at once)
//   CHORUS_SEGMENT     pipelining segment in bytes for segmented algorithms
//   CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_STORE   bootstrap (init_from_env)
//   CHORUS_TUNING_FILE calibrated alpha/beta for the tuner
#pragma once

#include "schedule/collective.h"

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

namespace chorus {

enum class LogLevel : int { none = 0, warn = 1, info = 2, trace = 3 };

struct Config {
  std::chrono::milliseconds timeout{300'000};
  // Algorithm forced for every collective that has an algorithm of this name.
  std::string algorithm_all;
  // Per-collective algorithm overrides.
  std::map<Collective, std::string> algorithm;
  std::string transport;  // "" = automatic
  LogLevel log_level = LogLevel::warn;
  bool log_tuning = false;
  std::chrono::microseconds spin{50};
  size_t segment_bytes = 0;  // 0 = each algorithm's default
  std::string tuning_file;

  // The override for one collective, or "" when none applies.
  std::string algorithm_for(Collective c) const;

  // Reads the CHORUS_* variables; a malformed value throws
  // Error(invalid_argument) naming the variable.
  static Config from_env();
};

// Value of an environment variable, or nullopt when unset.
std::optional<std::string> env_var(const char* name);

}  // namespace chorus
