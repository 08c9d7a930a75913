#include "exec/trace.h"

#include "core/check.h"
#include "core/deadline.h"

#include <nlohmann/json.hpp>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <sys/mman.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace chorus {

namespace {

bool invariant_tsc() {
#if defined(__x86_64__)
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    auto has = [&](const char* flag) {
      const std::string f = str_cat(" ", flag);
      const size_t at = line.find(f);
      return at != std::string::npos &&
             (at + f.size() == line.size() || line[at + f.size()] == ' ');
    };
    return has("constant_tsc") && has("nonstop_tsc");
  }
#endif
  return false;
}

const bool kUseTsc = invariant_tsc();

}  // namespace

int64_t Tracer::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

int64_t Tracer::ticks() {
#if defined(__x86_64__)
  if (kUseTsc) return static_cast<int64_t>(__rdtsc());
#endif
  return now_ns();
}

Tracer::Tracer(int rank, int size) : rank_(rank), size_(size) {
  next_chunk();
  ticks0_ = ticks();
  ns0_ = now_ns();
}

Tracer::Chunk::~Chunk() {
  if (events != nullptr) ::munmap(events, kChunkEvents * sizeof(Event));
}

bool Tracer::next_chunk() {
  if (chunks_.size() * kChunkEvents >= kTraceEvents) return false;
  void* p = ::mmap(nullptr, kChunkEvents * sizeof(Event), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return false;
  chunks_.emplace_back(static_cast<Event*>(p));
  used_ = 0;
  return true;
}

size_t Tracer::recorded() const {
  return chunks_.empty() ? 0 : (chunks_.size() - 1) * kChunkEvents + used_;
}

std::string chrome_trace(int size, const std::vector<RankTrace>& ranks,
                         const std::string& other_json) {
  using nlohmann::json;
  json events = json::array();
  for (const RankTrace& rt : ranks) {
    const int rank = rt.rank;
    auto meta = [&](const char* what, int tid, const std::string& name) {
      json m = {{"ph", "M"}, {"name", what}, {"pid", rank}, {"args", {{"name", name}}}};
      if (tid >= 0) m["tid"] = tid;
      events.push_back(std::move(m));
    };
    meta("process_name", -1, str_cat("rank ", rank));
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      meta("thread_name", 2 * p, str_cat("send to ", p));
      meta("thread_name", 2 * p + 1, str_cat("recv from ", p));
    }
    meta("thread_name", 2 * size, "local (copy, reduce)");
    for (const TraceOp& e : rt.ops) {
      const int tid = e.peer < 0 ? 2 * size : 2 * e.peer + (e.kind == OpKind::send ? 0 : 1);
      json args = {{"bytes", e.bytes}, {"peer", e.peer}, {"call", e.call}, {"op", e.op}};
      if (!e.algorithm.empty()) args["algorithm"] = std::string(e.algorithm);
      events.push_back({{"ph", "X"},
                        {"name", std::string(to_string(e.kind))},
                        {"cat", std::string(e.category)},
                        {"pid", rank},
                        {"tid", tid},
                        {"ts", e.start_us},
                        {"dur", e.dur_us},
                        {"args", std::move(args)}});
    }
  }
  json doc = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ns"},
              {"otherData", other_json.empty() ? json::object() : json::parse(other_json)}};
  return doc.dump();
}

std::string Tracer::to_json(std::string_view transport) const {
  // Ticks per nanosecond over this tracer's life (1 for the steady clock).
  const int64_t ticks1 = ticks(), ns1 = now_ns();
  const double per_ns = ns1 > ns0_ && ticks1 > ticks0_ ? static_cast<double>(ticks1 - ticks0_) /
                                                             static_cast<double>(ns1 - ns0_)
                                                       : 1.0;
  // Microseconds on rank 0's clock since the epoch.
  auto us = [&](int64_t t) {
    const double local_ns = static_cast<double>(ns0_) + static_cast<double>(t - ticks0_) / per_ns;
    return (local_ns + static_cast<double>(offset_ns_ - epoch_ns_)) * 1e-3;
  };
  RankTrace rt{rank_, {}};
  rt.ops.reserve(recorded());
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const size_t n = c + 1 == chunks_.size() ? used_ : kChunkEvents;
    for (size_t i = 0; i < n; ++i) {
      const Event& e = chunks_[c].events[i];
      rt.ops.push_back({us(e.start), static_cast<double>(e.end - e.start) / per_ns * 1e-3, e.bytes,
                        e.call, e.op, e.kind, e.peer, e.category, e.algorithm});
    }
  }
  const nlohmann::json other = {{"rank", rank_},
                                {"size", size_},
                                {"transport", std::string(transport)},
                                {"dropped", dropped_},
                                {"clock_offset_ns", offset_ns_}};
  return chrome_trace(size_, {std::move(rt)}, other.dump());
}

std::string Tracer::write(const std::string& dir, int comm_index,
                          std::string_view transport) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = str_cat(dir, "/chorus-trace-rank", rank_, "-comm", comm_index, ".json");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << to_json(transport);
    if (!out) return str_cat("cannot write ", tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  return ec ? str_cat("cannot rename ", tmp, " to ", path, ": ", ec.message()) : std::string();
}

}  // namespace chorus
