#include "engine/flight_recorder.h"

#include "core/check.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace chorus::detail {
namespace {

std::string_view state_name(FlightRecorder::State s) {
  switch (s) {
    case FlightRecorder::State::running:
      return "running";
    case FlightRecorder::State::done:
      return "done";
    case FlightRecorder::State::failed:
      return "failed";
  }
  return "invalid";
}

}  // namespace

std::string FlightRecorder::to_json(int rank, int size, std::string_view transport) const {
  auto us = [&](Deadline t) {
    return std::chrono::duration<double, std::micro>(t - created_).count();
  };
  nlohmann::json calls = nlohmann::json::array();
  const uint64_t first = next_ > kFlightRecorderCalls ? next_ - kFlightRecorderCalls : 0;
  for (uint64_t seq = first; seq < next_; ++seq) {
    const Entry& e = ring_[seq % kFlightRecorderCalls];
    nlohmann::json j = {{"seq", e.seq},
                        {"number", e.number},
                        {"call", std::string(e.call)},
                        {"algorithm", std::string(e.algorithm)},
                        {"dtype", std::string(to_string(e.type))},
                        {"op", std::string(to_string(e.op))},
                        {"count", e.count},
                        {"root", e.root},
                        {"peer", e.peer},
                        {"state", std::string(state_name(e.state))},
                        {"start_us", us(e.start)}};
    j["end_us"] = e.state == State::running ? nlohmann::json() : nlohmann::json(us(e.end));
    if (e.state == State::failed) {
      j["error"] = e.error;
      j["pending"] = e.pending;
    }
    if (e.last_rank >= 0) {
      j["last_rank"] = e.last_rank;
      j["late_us"] = static_cast<double>(e.late_ns) / 1e3;
      j["late_beyond_error"] = e.late_beyond_error;
    }
    calls.push_back(std::move(j));
  }
  return nlohmann::json{{"rank", rank},
                        {"size", size},
                        {"transport", std::string(transport)},
                        {"calls", std::move(calls)}}
             .dump(1) +
         "\n";
}

std::string FlightRecorder::dump(const std::string& dir, int rank, int size,
                                 std::string_view transport) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = str_cat(dir, "/chorus-flight-rank", rank, ".json");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << to_json(rank, size, transport);
    if (!out) return str_cat("cannot write ", tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  return ec ? str_cat("cannot rename ", tmp, " to ", path, ": ", ec.message()) : std::string();
}

}  // namespace chorus::detail
