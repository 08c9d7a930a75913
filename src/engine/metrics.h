// Metrics in the Prometheus text exposition format (CHORUS_METRICS).
//
// With CHORUS_METRICS set, each communicator counts its calls in a
// CallMetrics of its own, which only the communicator writes (under its
// turn) and the exporter reads: relaxed atomic loads and stores, no locked
// instruction on the call path. Without it a communicator has none and pays
// one branch per call. The process-wide registry keeps every communicator's
// block (a destroyed communicator's counts stay, so counters never go back)
// and renders them summed over equal labels:
//
//   chorus_calls_total{rank="0",collective="allreduce",algo="ring",transport="shm"} 12
//   chorus_bytes_total{...} 96
//   chorus_call_seconds_bucket{...,le="0.0001"} 11  (..._sum, ..._count)
//   chorus_tuner_explorations_total{rank="0",collective="allreduce"} 40
//   chorus_errors_total{kind="timeout"} 1
//   chorus_revokes_total 0, chorus_shrinks_total 0, chorus_grows_total 0
//   chorus_straggler_last_total{rank="0",late_rank="2"} 19
//   chorus_straggler_late_seconds_total{rank="0",late_rank="2"} 0.095
//
// `rank` is the rank of the communicator that counted (a communicator
// derived by split, shrink or grow counts under the rank of the communicator
// it came from); the bytes of a call are its count times the element size
// (allgather and reduce_scatter: one rank's block). Point-to-point calls are
// collective="send to peer" or "recv from peer" with algo="".
//
// CHORUS_METRICS=PATH writes the text to PATH ("%r" in it replaced by the
// rank of the process's first communicator) every CHORUS_METRICS_INTERVAL
// seconds and when a communicator is destroyed, through a temporary file
// renamed over PATH (node-exporter's textfile convention: a reader never
// sees half a file). CHORUS_METRICS=[ADDRESS]:PORT serves it at /metrics
// over HTTP (cpp-httplib) on ADDRESS (default every address), port PORT +
// that rank, so that ranks sharing a host never collide.
#pragma once

#include "core/config.h"

#include <chorus/error.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace chorus::detail {

// Upper bounds of the latency histogram's buckets, in seconds (+Inf after).
inline constexpr std::array<double, 14> kLatencyBuckets = {
    5e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0};

class CallMetrics {
 public:
  // Series (collective, algorithm) a block holds; calls of further shapes
  // count under algo="other".
  static constexpr size_t kMaxSeries = 96;

  // The block of rank `rank` of a communicator of `size` ranks.
  CallMetrics(int rank, int size, std::string transport);

  // A call ended: `collective` and `algorithm` are names of static storage
  // (to_string(Collective), the registry's names, "send", "recv").
  void call_done(std::string_view collective, std::string_view algorithm, uint64_t bytes,
                 double seconds);
  // The tuner timed a candidate for a call of `collective`.
  void exploration(std::string_view collective);
  // A call's last arriver and how late it was (engine/stragglers.h).
  void straggler(int late_rank, double late_seconds);

  int rank() const { return rank_; }

  struct Series {
    std::string_view collective;
    std::string_view algorithm;
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> nanoseconds{0};
    std::array<std::atomic<uint64_t>, kLatencyBuckets.size()> buckets{};
  };
  struct Exploration {
    std::string_view collective;
    std::atomic<uint64_t> count{0};
  };
  struct Late {
    std::atomic<uint64_t> last{0};
    std::atomic<uint64_t> nanoseconds{0};
  };

  // For the renderer: the series published so far.
  size_t series_count() const { return series_used_.load(std::memory_order_acquire); }
  const Series& series(size_t i) const { return series_[i]; }
  size_t exploration_count() const { return explored_used_.load(std::memory_order_acquire); }
  const Exploration& exploration_at(size_t i) const { return explored_[i]; }
  size_t late_count() const { return late_size_; }
  const Late& late_at(size_t i) const { return late_[i]; }
  const std::string& transport() const { return transport_; }

 private:
  Series& series_for(std::string_view collective, std::string_view algorithm);

  const int rank_;
  const std::string transport_;
  std::array<Series, kMaxSeries> series_{};
  std::atomic<size_t> series_used_{0};
  Series* last_ = nullptr;  // the series of the last call (a loop of one call)
  std::array<Exploration, 16> explored_{};
  std::atomic<size_t> explored_used_{0};
  std::unique_ptr<Late[]> late_;  // one per rank of the communicator
  size_t late_size_ = 0;
};

// The process-wide counters of rare events.
enum class MetricsEvent { revoke, shrink, grow };
void count_metrics_event(MetricsEvent event);
void count_metrics_error(ErrorCode code);

// Makes a communicator's block and registers it; starts the export (the
// writer thread or the HTTP server) at the first one. `config_text` is
// CHORUS_METRICS; `rank` names the series (and the file and port, for the
// first); `interval` is CHORUS_METRICS_INTERVAL.
std::shared_ptr<CallMetrics> register_metrics(const std::string& config_text, double interval,
                                              int rank, int size, std::string transport);
// Writes the file now (file export; nothing otherwise): at a communicator's
// destruction, so that the file holds its last calls.
void flush_metrics();

// Every registered block (and the process-wide counters) as Prometheus text.
std::string render_metrics();

// Where the export went: the file written (with %r replaced) or the HTTP
// port bound; "" / 0 before the first registration (for the tests).
std::string metrics_file();
int metrics_port();

}  // namespace chorus::detail
