// CHORUS_METRICS (engine/metrics.h): the blocks, the registry, the text and
// the file export; the HTTP export is metrics_http.cc.
#include "engine/metrics.h"

#include "core/check.h"
#include "engine/metrics_http.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

namespace chorus::detail {
namespace {

// The only writer of a block is its communicator: a relaxed load and store,
// no locked instruction.
void add(std::atomic<uint64_t>& a, uint64_t v) {
  a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

uint64_t get(const std::atomic<uint64_t>& a) {
  return a.load(std::memory_order_relaxed);
}

uint64_t to_ns(double seconds) {
  return seconds > 0 ? static_cast<uint64_t>(seconds * 1e9) : 0;
}

std::string seconds_text(uint64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(ns) * 1e-9);
  return buf;
}

std::string bound_text(double bound) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", bound);
  return buf;
}

}  // namespace

CallMetrics::CallMetrics(int rank, int size, std::string transport)
    : rank_(rank),
      transport_(std::move(transport)),
      late_(std::make_unique<Late[]>(static_cast<size_t>(size))),
      late_size_(static_cast<size_t>(size)) {}

CallMetrics::Series& CallMetrics::series_for(std::string_view collective,
                                             std::string_view algorithm) {
  if (last_ != nullptr && last_->collective == collective && last_->algorithm == algorithm)
    return *last_;
  const size_t used = series_used_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < used; ++i) {
    if (series_[i].collective == collective && series_[i].algorithm == algorithm) {
      last_ = &series_[i];
      return *last_;
    }
  }
  // The last slot is "other" once the others are taken.
  if (used + 1 >= kMaxSeries) {
    Series& other = series_[kMaxSeries - 1];
    if (used < kMaxSeries) {
      other.collective = "other";
      other.algorithm = "other";
      series_used_.store(kMaxSeries, std::memory_order_release);
    }
    last_ = nullptr;
    return other;
  }
  Series& s = series_[used];
  s.collective = collective;
  s.algorithm = algorithm;
  series_used_.store(used + 1, std::memory_order_release);  // published once labelled
  last_ = &s;
  return s;
}

void CallMetrics::call_done(std::string_view collective, std::string_view algorithm, uint64_t bytes,
                            double seconds) {
  Series& s = series_for(collective, algorithm);
  add(s.calls, 1);
  add(s.bytes, bytes);
  add(s.nanoseconds, to_ns(seconds));
  size_t b = 0;
  while (b < kLatencyBuckets.size() && seconds > kLatencyBuckets[b]) ++b;
  if (b < kLatencyBuckets.size()) add(s.buckets[b], 1);
}

void CallMetrics::exploration(std::string_view collective) {
  const size_t used = explored_used_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < used; ++i) {
    if (explored_[i].collective == collective) {
      add(explored_[i].count, 1);
      return;
    }
  }
  if (used == explored_.size()) return;  // more collectives than there are
  explored_[used].collective = collective;
  add(explored_[used].count, 1);
  explored_used_.store(used + 1, std::memory_order_release);
}

void CallMetrics::straggler(int late_rank, double late_seconds) {
  if (late_rank < 0 || static_cast<size_t>(late_rank) >= late_size_) return;
  Late& l = late_[static_cast<size_t>(late_rank)];
  add(l.last, 1);
  add(l.nanoseconds, to_ns(late_seconds));
}

namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<const CallMetrics>> blocks;
  MetricsTarget target;
  std::string text;  // CHORUS_METRICS as first registered
  int first_rank = -1;
  std::string file;  // the file written (%r replaced)
  double interval = 5;
  // Process-wide counters of rare events (any thread).
  std::atomic<uint64_t> revokes{0}, shrinks{0}, grows{0};
  std::array<std::atomic<uint64_t>, 16> errors{};
  // The file writer.
  std::thread writer;
  std::condition_variable wake;
  bool stopping = false;
  std::unique_ptr<MetricsServer> server;

  ~Registry() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    wake.notify_all();
    if (writer.joinable()) writer.join();
    server.reset();
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

// Writes the text to reg.file through a temporary file and a rename; ""
// or what went wrong. Called with reg.mu held.
std::string render_locked(Registry& reg);

std::string write_file_locked(Registry& reg) {
  const std::string text = render_locked(reg);
  const std::string tmp = str_cat(reg.file, ".tmp.", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return str_cat("cannot write ", tmp, ": ", std::strerror(errno));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    std::remove(tmp.c_str());
    return str_cat("cannot write ", tmp);
  }
  if (std::rename(tmp.c_str(), reg.file.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return str_cat("cannot rename ", tmp, " to ", reg.file, ": ", why);
  }
  return "";
}

std::string replace_rank(const std::string& path, int rank) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'r') {
      out += std::to_string(rank);
      ++i;
    } else {
      out += path[i];
    }
  }
  return out;
}

std::string labels(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : pairs) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    for (char c : v) {
      if (c == '\\' || c == '"') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += str_cat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

void count_metrics_event(MetricsEvent event) {
  Registry& reg = registry();
  std::atomic<uint64_t>& c = event == MetricsEvent::revoke   ? reg.revokes
                             : event == MetricsEvent::shrink ? reg.shrinks
                                                             : reg.grows;
  c.fetch_add(1, std::memory_order_relaxed);
}

void count_metrics_error(ErrorCode code) {
  const auto i = static_cast<size_t>(code);
  Registry& reg = registry();
  if (i < reg.errors.size()) reg.errors[i].fetch_add(1, std::memory_order_relaxed);
}

namespace {

std::string render_locked(Registry& reg) {
  // Summed over blocks of equal labels, in a stable order.
  struct Sum {
    uint64_t calls = 0, bytes = 0, ns = 0;
    std::array<uint64_t, kLatencyBuckets.size()> buckets{};
  };
  std::map<std::tuple<int, std::string, std::string, std::string>, Sum> calls;
  std::map<std::pair<int, std::string>, uint64_t> explored;
  std::map<std::pair<int, int>, std::pair<uint64_t, uint64_t>> late;
  for (const auto& b : reg.blocks) {
    for (size_t i = 0; i < b->series_count(); ++i) {
      const CallMetrics::Series& s = b->series(i);
      Sum& sum =
          calls[{b->rank(), std::string(s.collective), std::string(s.algorithm), b->transport()}];
      sum.calls += get(s.calls);
      sum.bytes += get(s.bytes);
      sum.ns += get(s.nanoseconds);
      for (size_t k = 0; k < kLatencyBuckets.size(); ++k) sum.buckets[k] += get(s.buckets[k]);
    }
    for (size_t i = 0; i < b->exploration_count(); ++i)
      explored[{b->rank(), std::string(b->exploration_at(i).collective)}] +=
          get(b->exploration_at(i).count);
    for (size_t r = 0; r < b->late_count(); ++r) {
      const uint64_t n = get(b->late_at(r).last);
      if (n == 0) continue;
      auto& l = late[{b->rank(), static_cast<int>(r)}];
      l.first += n;
      l.second += get(b->late_at(r).nanoseconds);
    }
  }
  std::string out;
  family(out, "chorus_calls_total", "counter",
         "Calls completed, by collective, algorithm and transport.");
  for (const auto& [k, s] : calls) {
    const auto& [rank, coll, algo, transport] = k;
    const std::string r = std::to_string(rank);
    out += str_cat(
        "chorus_calls_total",
        labels({{"rank", r}, {"collective", coll}, {"algo", algo}, {"transport", transport}}), " ",
        s.calls, "\n");
  }
  family(out, "chorus_bytes_total", "counter",
         "Bytes of the calls completed (count times element size), by collective, algorithm and "
         "transport.");
  for (const auto& [k, s] : calls) {
    const auto& [rank, coll, algo, transport] = k;
    const std::string r = std::to_string(rank);
    out += str_cat(
        "chorus_bytes_total",
        labels({{"rank", r}, {"collective", coll}, {"algo", algo}, {"transport", transport}}), " ",
        s.bytes, "\n");
  }
  family(out, "chorus_call_seconds", "histogram",
         "Time from a call's submission to its completion on this rank.");
  for (const auto& [k, s] : calls) {
    const auto& [rank, coll, algo, transport] = k;
    const std::string r = std::to_string(rank);
    uint64_t cumulative = 0;
    for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
      cumulative += s.buckets[b];
      const std::string le = bound_text(kLatencyBuckets[b]);
      out += str_cat("chorus_call_seconds_bucket",
                     labels({{"rank", r},
                             {"collective", coll},
                             {"algo", algo},
                             {"transport", transport},
                             {"le", le}}),
                     " ", cumulative, "\n");
    }
    out += str_cat("chorus_call_seconds_bucket",
                   labels({{"rank", r},
                           {"collective", coll},
                           {"algo", algo},
                           {"transport", transport},
                           {"le", "+Inf"}}),
                   " ", s.calls, "\n");
    const std::string l =
        labels({{"rank", r}, {"collective", coll}, {"algo", algo}, {"transport", transport}});
    out += str_cat("chorus_call_seconds_sum", l, " ", seconds_text(s.ns), "\n");
    out += str_cat("chorus_call_seconds_count", l, " ", s.calls, "\n");
  }
  family(out, "chorus_tuner_explorations_total", "counter",
         "Calls the tuner timed to compare candidate algorithms, by collective.");
  for (const auto& [k, n] : explored)
    out += str_cat("chorus_tuner_explorations_total",
                   labels({{"rank", std::to_string(k.first)}, {"collective", k.second}}), " ", n,
                   "\n");
  family(out, "chorus_errors_total", "counter", "Calls failed, by the kind of error.");
  for (size_t i = 0; i < reg.errors.size(); ++i) {
    const uint64_t n = reg.errors[i].load(std::memory_order_relaxed);
    if (n == 0) continue;
    out += str_cat("chorus_errors_total", labels({{"kind", to_string(static_cast<ErrorCode>(i))}}),
                   " ", n, "\n");
  }
  family(out, "chorus_revokes_total", "counter", "Communicators revoked by this process.");
  out += str_cat("chorus_revokes_total ", reg.revokes.load(std::memory_order_relaxed), "\n");
  family(out, "chorus_shrinks_total", "counter", "Shrinks this process took part in.");
  out += str_cat("chorus_shrinks_total ", reg.shrinks.load(std::memory_order_relaxed), "\n");
  family(out, "chorus_grows_total", "counter", "Grows this process took part in.");
  out += str_cat("chorus_grows_total ", reg.grows.load(std::memory_order_relaxed), "\n");
  family(out, "chorus_straggler_last_total", "counter",
         "Collectives in which late_rank arrived last, as rank saw them.");
  for (const auto& [k, v] : late)
    out += str_cat(
        "chorus_straggler_last_total",
        labels({{"rank", std::to_string(k.first)}, {"late_rank", std::to_string(k.second)}}), " ",
        v.first, "\n");
  family(out, "chorus_straggler_late_seconds_total", "counter",
         "Summed lateness of late_rank over the collectives it arrived last in (how long the "
         "first arriver waited for it).");
  for (const auto& [k, v] : late)
    out += str_cat(
        "chorus_straggler_late_seconds_total",
        labels({{"rank", std::to_string(k.first)}, {"late_rank", std::to_string(k.second)}}), " ",
        seconds_text(v.second), "\n");
  return out;
}

}  // namespace

std::string render_metrics() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  return render_locked(reg);
}

std::shared_ptr<CallMetrics> register_metrics(const std::string& config_text, double interval,
                                              int rank, int size, std::string transport) {
  const MetricsTarget target = parse_metrics_target(config_text);
  if (target.kind == MetricsTarget::Kind::none) return nullptr;
  auto block = std::make_shared<CallMetrics>(rank, size, std::move(transport));
  Registry& reg = registry();
  std::unique_lock lock(reg.mu);
  reg.blocks.push_back(block);
  if (reg.first_rank >= 0) return block;  // the export runs already
  reg.first_rank = rank;
  reg.target = target;
  reg.text = config_text;
  reg.interval = interval;
  if (target.kind == MetricsTarget::Kind::file) {
    reg.file = replace_rank(target.path, rank);
    // The first write now, so that a path that cannot be written is the
    // communicator's error at creation.
    if (const std::string problem = write_file_locked(reg); !problem.empty()) {
      reg.blocks.pop_back();
      reg.first_rank = -1;
      fail(ErrorCode::invalid_argument, "CHORUS_METRICS='", config_text, "': ", problem);
    }
    reg.writer = std::thread([&reg] {
      std::unique_lock l(reg.mu);
      while (!reg.stopping) {
        reg.wake.wait_for(l, std::chrono::duration<double>(reg.interval));
        if (reg.stopping) break;
        (void)write_file_locked(reg);  // a failure now: the next round tries again
      }
    });
  } else {
    const int port = target.port == 0 ? 0 : target.port + rank;
    try {
      reg.server =
          std::make_unique<MetricsServer>(target.address, port, [] { return render_metrics(); });
    } catch (const Error& e) {
      reg.blocks.pop_back();
      reg.first_rank = -1;
      fail(ErrorCode::invalid_argument, "CHORUS_METRICS='", config_text, "': ", e.what());
    }
  }
  return block;
}

void flush_metrics() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  if (reg.target.kind == MetricsTarget::Kind::file && reg.first_rank >= 0)
    (void)write_file_locked(reg);
}

std::string metrics_file() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  return reg.file;
}

int metrics_port() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  return reg.server ? reg.server->port() : 0;
}

}  // namespace chorus::detail
