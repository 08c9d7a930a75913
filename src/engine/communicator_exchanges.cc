// The exchanges a communicator runs outside the user's own calls: the records
// of shared windows (an allgather run as an ordinary call, or as a part of the
// one-sided call that needs it), a one-sided call's set-up before its first
// op, the alignment of trace clocks at creation, and the stragglers
// report (engine/stragglers.h): clock offsets by ping-pong and an exchange
// of arrival times.
#include "engine/call_site.h"
#include "engine/communicator_impl.h"

#include "core/check.h"
#include "core/log.h"
#include "engine/stragglers.h"
#include "exec/trace.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

namespace chorus {
namespace detail {

std::vector<WindowRecord> CommunicatorImpl::exchange_records(const WindowRecord& mine) {
  std::vector<WindowRecord> all(static_cast<size_t>(size_));
  exchange(&mine, all.data(), sizeof(WindowRecord));
  return all;
}

void CommunicatorImpl::exchange(const void* mine, void* all, size_t bytes, std::string_view what,
                                std::chrono::milliseconds timeout) {
  // A ring allgather of the records' bytes.
  const Algorithm* ring = find_algorithm(Collective::allgather, "ring");
  CHORUS_CHECK(ring != nullptr);
  const CollectiveSpec spec{Collective::allgather, size_, rank_, bytes, 1, 0};
  auto program = prepare(build_program(*ring, spec));
  std::vector<std::byte> scratch(program->program.scratch_count);
  CallStamp stamp;
  Deadline deadline;
  CallLabel label{what, "ring"};
  if (exchange_call_) {
    // Part of a one-sided call: its stamp, so that ranks in different calls
    // meet as a mismatch, and its deadline.
    stamp = exchange_call_->stamp;
    deadline = exchange_call_->deadline;
    label = CallLabel{exchange_call_->collective, exchange_call_->algorithm};
  } else {
    stamp = collective_stamp(++collective_seq_, Collective::allgather, algorithm_stamp_id(*ring),
                             DataType::uint8, ReduceOp::sum, bytes, 0);
    begin_call(stamp);
    deadline = deadline_after(timeout.count() > 0 ? timeout : config_.timeout, Clock::now());
  }
  auto exec = std::make_shared<Execution>(program, ExecBuffers{mine, all, scratch.data()},
                                          DataType::uint8, ReduceOp::sum, label, deadline, stamp);
  try {
    engine_.enqueue(exec);
    engine_.wait(*exec);
  } catch (...) {
    fail_all(std::current_exception());
    std::rethrow_exception(broken_);
  }
}

void CommunicatorImpl::learn_agree(LearnClass& c, std::chrono::milliseconds timeout) {
  // The figures are of every earlier call of the class: those still in
  // flight finish first (they are ahead of the exchange on every rank).
  try {
    for (const auto& w : outstanding_) engine_.wait(w->exec);
  } catch (...) {
    fail_all(std::current_exception());
    std::rethrow_exception(broken_);
  }
  retire_done();
  const std::vector<double> mine = c.figures();
  std::vector<double> all(mine.size() * static_cast<size_t>(size_));
  exchange(mine.data(), all.data(), mine.size() * sizeof(double), "tuner agreement", timeout);
  std::vector<double> agreed(mine.size(), 0.0);
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r)
    for (size_t k = 0; k < mine.size(); ++k)
      agreed[k] = std::max(agreed[k], all[r * mine.size() + k]);
  const std::string line = c.agree(agreed);
  if (selector_->log()) selector_->log()(line);
  if (selector_->learner()->absorb(c) && rank_ == 0) warn_store(selector_->note_learned());
}

void CommunicatorImpl::warn_store(const std::string& why) {
  if (why.empty() || store_warned_) return;
  store_warned_ = true;
  log_message(config_.log_level, LogLevel::warn, rank_, "calibration cache '",
              selector_->cache_path(), "': ", why, "; learned picks are kept for this job");
}

void CommunicatorImpl::setup_allgather(const void* mine, void* all, size_t bytes) {
  Hold hold(*this);
  enter_call();
  exchange(mine, all, bytes);
}

void CommunicatorImpl::setup_message(OpKind kind, void* buf, size_t bytes, int peer) {
  CallOptions options;
  options.tag = kSetupTag;
  const bool sending = kind == OpKind::send;
  wait(*submit_point_to_point(kind, sending ? buf : nullptr, sending ? nullptr : buf, bytes,
                              DataType::uint8, peer, options));
}

std::shared_ptr<SharedWindow> CommunicatorImpl::create_window(size_t bytes) {
  Hold hold(*this);
  enter_call();
  const CallSite where{rank(), "window"};
  if (!windows_)
    fail(ErrorCode::invalid_argument, where, "the ranks of this communicator share no memory (",
         transport_->name(), "): windows need every rank on one host, over shm or inproc");
  // Earlier calls first: the exchange is a collective call behind them.
  for (const auto& w : outstanding_) engine_.wait(w->exec);
  retire_done();
  return windows_->create_user_window(bytes);
}

void CommunicatorImpl::prepare_one_sided(const Call& call, const CollectiveSpec& spec,
                                         const PreparedProgram& prepared, const CallStamp& stamp,
                                         Deadline deadline) {
  // A one-sided call runs alone: its flags and the staging window are the
  // communicator's, one call's at a time.
  for (const auto& w : outstanding_) engine_.wait(w->exec);
  retire_done();
  const Program& program = prepared.program;
  const size_t es = spec.elem_size;
  exchange_call_ = ExchangeCall{stamp, deadline, to_string(call.collective),
                                algorithm_of_stamp_id(stamp.algorithm)};
  struct Reset {
    std::optional<ExchangeCall>& c;
    ~Reset() { c.reset(); }
  } reset{exchange_call_};
  windows_->ensure_control();
  windows_->publish_stamp(stamp);
  windows_->ensure_staging(checked_mul(program.window_count, es, "staging window size"));
  SharedPlace input;
  SharedPlace output;
  if (spec.window_buffers) {
    const BufferCounts counts = buffer_counts(spec);
    CHORUS_CHECK(windows_->find_user_window(call.send, counts.input * es, input));
    CHORUS_CHECK(windows_->find_user_window(call.recv, counts.output * es, output));
  } else {
    if (program.window_input != SIZE_MAX) input.offset = program.window_input * es;
    if (program.window_output != SIZE_MAX) output.offset = program.window_output * es;
  }
  windows_->publish_places(stamp.seq, input, output);
}

namespace {
// The K of trace file names: traced communicators made so far, per rank (so
// that the threads of run_ranks, each a rank, count like processes do).
int next_trace_index(int rank) {
  static std::mutex mu;
  static std::map<int, int> made;
  std::lock_guard lock(mu);
  return made[rank]++;
}
}  // namespace

// Rank 0 answers kClockRounds pings of every other rank, in rank order, with
// its clock and the trace's epoch; each rank keeps the offset of its ping
// with the shortest round trip (Cristian's algorithm), so the error of its
// offset is at most half that round trip.
void CommunicatorImpl::start_trace() {
  if (config_.trace_dir.empty()) return;
  auto tracer = std::make_unique<Tracer>(rank_, size_);
  int64_t epoch = Tracer::now_ns();
  int64_t offset = 0;
  const CallOptions options;
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) {
      for (int k = 0; k < kClockRounds; ++k) {
        int64_t ping = 0;
        wait(*submit_point_to_point(OpKind::recv, nullptr, &ping, 1, DataType::int64, r, options));
        const int64_t reply[2] = {Tracer::now_ns(), epoch};
        wait(*submit_point_to_point(OpKind::send, reply, nullptr, 2, DataType::int64, r, options));
      }
    }
  } else {
    int64_t best = INT64_MAX;
    for (int k = 0; k < kClockRounds; ++k) {
      const int64_t sent = Tracer::now_ns();
      wait(*submit_point_to_point(OpKind::send, &sent, nullptr, 1, DataType::int64, 0, options));
      int64_t reply[2] = {0, 0};
      wait(*submit_point_to_point(OpKind::recv, nullptr, reply, 2, DataType::int64, 0, options));
      const int64_t back = Tracer::now_ns();
      if (back - sent < best) {
        best = back - sent;
        offset = reply[0] - (sent + (back - sent) / 2);
        epoch = reply[1];
      }
    }
  }
  tracer->set_clock(offset, epoch);
  tracer_ = std::move(tracer);
  trace_index_ = next_trace_index(rank_);
  engine_.set_tracer(tracer_.get());
}

std::pair<int64_t, int64_t> CommunicatorImpl::measure_clock(std::chrono::milliseconds timeout) {
  CallOptions options;
  options.tag = kSetupTag;  // never meets a user's message
  options.timeout = timeout;
  // One message of the ping-pong, waited for; not a call of the user's, so
  // not in the metrics.
  auto message = [&](OpKind kind, int64_t* value, int peer) {
    const bool sending = kind == OpKind::send;
    auto w = submit_point_to_point(kind, sending ? value : nullptr, sending ? nullptr : value, 1,
                                   DataType::int64, peer, options);
    w->uncounted = true;
    wait(*w);
  };
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  };
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) {
      for (int k = 0; k < kClockRounds; ++k) {
        int64_t ping = 0;
        message(OpKind::recv, &ping, r);
        int64_t reply = now_ns();
        message(OpKind::send, &reply, r);
      }
    }
    return {0, 0};
  }
  int64_t best = INT64_MAX;
  int64_t offset = 0;
  for (int k = 0; k < kClockRounds; ++k) {
    int64_t sent = now_ns();
    message(OpKind::send, &sent, 0);
    int64_t reply = 0;
    message(OpKind::recv, &reply, 0);
    const int64_t back = now_ns();
    if (back - sent < best) {
      best = back - sent;
      offset = reply - (sent + best / 2);
    }
  }
  // Rank 0 read its clock somewhere within the round trip: the offset is
  // off by at most half of it.
  return {offset, (best + 1) / 2};
}

namespace {

// One rank's part of the stragglers exchange.
struct PackedArrivals {
  int64_t offset_ns = 0;
  int64_t error_ns = 0;
  uint32_t count = 0;
  uint32_t unused = 0;
  struct Call {
    uint32_t number = 0;
    uint32_t unused = 0;
    int64_t arrival_ns = 0;
  };
  std::array<Call, kFlightRecorderCalls> calls{};
};
static_assert(std::is_trivially_copyable_v<PackedArrivals>);

}  // namespace

std::vector<StragglerStats> CommunicatorImpl::stragglers(int window,
                                                         std::chrono::milliseconds timeout) {
  Hold hold(*this);
  enter_call();
  if (window < 0)
    fail(ErrorCode::invalid_argument, CallSite{rank(), "stragglers"}, "negative number of calls ",
         window);
  if (timeout.count() <= 0) timeout = config_.timeout;
  // Earlier calls first: their arrivals are what it reports.
  for (const auto& w : outstanding_) engine_.wait(w->exec);
  retire_done();
  // This rank's arrivals (its collectives' start times in the flight
  // recorder), before the ping-pongs below take entries of it.
  PackedArrivals mine;
  const uint64_t end = recorder_.calls();
  for (uint64_t seq = end > kFlightRecorderCalls ? end - kFlightRecorderCalls : 0; seq < end;
       ++seq) {
    const FlightRecorder::Entry* e = recorder_.entry(seq);
    if (e == nullptr || e->peer >= 0 || e->state != FlightRecorder::State::done) continue;
    mine.calls[mine.count++] = {
        e->number, 0,
        std::chrono::duration_cast<std::chrono::nanoseconds>(e->start.time_since_epoch()).count()};
  }
  std::tie(mine.offset_ns, mine.error_ns) =
      size_ > 1 ? measure_clock(timeout) : std::pair<int64_t, int64_t>{0, 0};
  std::vector<PackedArrivals> all(static_cast<size_t>(size_));
  if (size_ > 1) {
    exchange(&mine, all.data(), sizeof(PackedArrivals), "stragglers", timeout);
  } else {
    all[0] = mine;
  }
  std::vector<RankArrivals> ranks(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    ranks[r].offset_ns = all[r].offset_ns;
    ranks[r].error_ns = all[r].error_ns;
    const uint32_t n = std::min<uint32_t>(all[r].count, kFlightRecorderCalls);
    for (uint32_t i = 0; i < n; ++i)
      ranks[r].calls.push_back({all[r].calls[i].number, all[r].calls[i].arrival_ns});
  }
  std::vector<CallVerdict> verdicts;
  std::vector<StragglerStats> stats =
      attribute_stragglers(ranks, static_cast<size_t>(window), &verdicts);
  // Each call's verdict into its flight record; its last arriver into the
  // metrics, once.
  std::map<uint32_t, const CallVerdict*> by_number;
  for (const CallVerdict& v : verdicts) by_number[v.number] = &v;
  for (uint64_t seq = end > kFlightRecorderCalls ? end - kFlightRecorderCalls : 0; seq < end;
       ++seq) {
    FlightRecorder::Entry* e = recorder_.entry(seq);
    if (e == nullptr || e->peer >= 0) continue;
    auto it = by_number.find(e->number);
    if (it == by_number.end()) continue;
    e->last_rank = it->second->last_rank;
    e->late_ns = it->second->late_ns;
    e->late_beyond_error = it->second->attributed;
  }
  if (metrics_) {
    for (const CallVerdict& v : verdicts) {
      if (v.number <= stragglers_counted_ || !v.attributed) continue;
      metrics_->straggler(v.last_rank, static_cast<double>(v.late_ns) * 1e-9);
    }
  }
  if (!verdicts.empty())
    stragglers_counted_ = std::max(stragglers_counted_, verdicts.back().number);
  last_stragglers_ = stats;
  return stats;
}

void CommunicatorImpl::print_stragglers_summary() {
  std::vector<StragglerStats> report;
  try {
    // A peer that has gone stops it within seconds, not CHORUS_TIMEOUT.
    report = stragglers(0, std::min(config_.timeout, std::chrono::milliseconds(10'000)));
  } catch (...) {
    report = last_stragglers_;  // the last report there was, if any
  }
  if (rank_ != 0 || report.empty()) return;
  for (const StragglerStats& s : report)
    std::fprintf(stderr,
                 "chorus stragglers: rank %d arrived last in %d of %d collectives (beyond the "
                 "%.3f ms clock error); late %.3f ms mean, %.3f ms p90; caused %.1f%% of the "
                 "waiting\n",
                 s.rank, s.last_count, s.calls, s.error_s * 1e3, s.mean_late_s * 1e3,
                 s.p90_late_s * 1e3, s.wait_share * 100);
}

}  // namespace detail
}  // namespace chorus
