#include "tune/calibration.h"

#include "schedule/rank_math.h"

#include "core/check.h"
#include "core/first_seen.h"
#include "core/reduce_kernels.h"
#include "schedule/rank_math.h"
#include "transport/window.h"
#include "tune/rank_exchange.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

namespace chorus {
namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Median half round trip of `trials` ping-pongs of `bytes` with `peer` (after
// `warmup` untimed ones); the lower rank of the pair pings.
double half_round_trip(RankExchange& ex, int peer, size_t bytes, int trials, int warmup) {
  std::vector<std::byte> out(bytes, std::byte{1}), in(bytes);
  const bool pinger = ex.rank() < peer;
  std::vector<double> times;
  for (int i = 0; i < warmup + trials; ++i) {
    const auto start = Clock::now();
    if (pinger) {
      ex.send_recv(peer, out.data(), in.data(), bytes);
    } else {
      ex.recv(peer, in.data(), bytes);
      ex.send(peer, out.data(), bytes);
    }
    if (i >= warmup) times.push_back(seconds_since(start) / 2);
  }
  return median(std::move(times));
}

// Median time of `trials` runs of fn (after one untimed run).
template <class F>
double time_runs(int trials, F&& fn) {
  fn();
  std::vector<double> times;
  for (int i = 0; i < trials; ++i) {
    const auto start = Clock::now();
    fn();
    times.push_back(seconds_since(start));
  }
  return median(std::move(times));
}

// Median time of both ends of the pair sending `bytes` to each other at once.
double bidirectional(RankExchange& ex, int peer, size_t bytes, int trials) {
  std::vector<std::byte> out(bytes, std::byte{2}), in(bytes);
  return time_runs(trials, [&] { ex.send_recv(peer, out.data(), in.data(), bytes); });
}

// Round trips per timed batch of the flag ping-pong (about a hundred
// nanoseconds each between two cores: a clock reading per round trip would
// be a good part of what it measures), and untimed batches before them.
constexpr int kFlagBatch = 10;
constexpr int kFlagWarmupBatches = 20;
// Polls of a flag before a waiting rank starts yielding its CPU (the peer
// may need it), and yields between looks at the clock and the peer.
constexpr uint32_t kFlagSpins = 1 << 12;
constexpr uint32_t kFlagCheckEvery = 1 << 10;

// Half the median round trip of a flag between ranks 0 and 1 over a control
// window: rank 0 raises flag kPing at rank 1 with call number k = 1, 2, ...,
// rank 1 raises it back at rank 0 once it holds k, and rank 0 times batches
// of kFlagBatch round trips. The warm-up stops after kFlagWarmupBatches or a
// quarter of `budget`, the timed batches after `round_trips` or `budget`
// (at least one batch each); then rank 0 raises kStop. Collective: every
// rank helps create the window; ranks above 1 then return 0 at once.
//
// A rank that cannot create or map the window (it maps its peers' files
// through /proc/<pid>/fd, which fails across PID namespaces, while the shm
// transport's named segments may still work) does not fail the calibration:
// it keeps the window's record exchanges in step with the ranks that got
// further, every rank learns of it, and all return -1 (not measured).
double flag_half_round_trip(RankExchange& ex, int round_trips, std::chrono::microseconds budget) {
  // The WindowSet's record exchange: every rank's record to every rank.
  const RecordExchange over_transport = [&ex](const WindowRecord& mine) {
    std::vector<WindowRecord> all(static_cast<size_t>(ex.size()));
    ex.allgather(&mine, all.data(), sizeof mine);
    return all;
  };
  int exchanges = 0;  // SharedWindow::create runs two
  WindowSet windows(ex.rank(), ex.size(), [&](const WindowRecord& mine) {
    ++exchanges;
    return over_transport(mine);
  });
  double failed = 0;
  try {
    windows.ensure_control();  // the control window; no staging
  } catch (const Error&) {
    // A record that no rank accepts (0 bytes) where this rank has not sent
    // its own yet; the barrier after it.
    for (int k = exchanges; k < 2; ++k) over_transport(WindowRecord{});
    failed = 1;
  }
  ex.agree_max(std::span<double>(&failed, 1));
  if (failed != 0) return -1;
  const int rank = ex.rank();
  if (rank > 1) return 0;
  const int peer = 1 - rank;
  constexpr uint32_t kPing = 0;
  constexpr uint32_t kStop = 1;
  // Polls until seen() holds, as the executor's waits do.
  auto until = [&](auto&& seen) {
    for (uint32_t spins = 0; !seen(); ++spins) {
      if (spins < kFlagSpins) continue;
      std::this_thread::yield();
      if (spins % kFlagCheckEvery != 0) continue;
      if (ex.expired()) ex.timed_out(str_cat("rank ", peer, "'s flag"));
      ex.transport().check_peer(peer);
    }
  };
  uint32_t seq = 0;
  if (rank == 1) {
    for (;;) {
      ++seq;
      bool stop = false;
      until([&] {
        if (windows.signalled(peer, kPing, seq)) return true;
        stop = windows.signalled(peer, kStop, 1);
        return stop;
      });
      if (stop) return 0;
      windows.signal(peer, kPing, seq);
    }
  }
  auto batch = [&] {
    const auto start = Clock::now();
    for (int k = 0; k < kFlagBatch; ++k) {
      ++seq;
      windows.signal(peer, kPing, seq);
      until([&] { return windows.signalled(peer, kPing, seq); });
    }
    return seconds_since(start) / kFlagBatch;
  };
  const auto start = Clock::now();
  for (int i = 0; i < kFlagWarmupBatches; ++i) {
    batch();
    if (Clock::now() >= start + budget / 4) break;
  }
  std::vector<double> times;
  do {
    times.push_back(batch());
  } while (static_cast<int>(times.size()) * kFlagBatch < round_trips &&
           Clock::now() < start + budget);
  windows.signal(peer, kStop, 1);
  return median(std::move(times)) / 2;
}

// FNV-1a, cut to 52 bits so that a double carries it exactly.
double identity_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return static_cast<double>(h & ((uint64_t{1} << 52) - 1));
}

}  // namespace

LinkParams fit_link(std::string name, double small, double large, size_t small_bytes,
                    size_t large_bytes) {
  CHORUS_CHECK(large_bytes > small_bytes);
  const double extra = large - small;
  const double bytes = static_cast<double>(large_bytes - small_bytes);
  // Timer noise can make the large message look no slower: then the small
  // message's whole time is charged to its bytes, an upper bound on 1/beta.
  const double inv_beta = extra > 0 ? extra / bytes : small / static_cast<double>(large_bytes);
  const double alpha = std::max(0.0, small - static_cast<double>(small_bytes) * inv_beta);
  return {std::move(name), alpha, 1 / inv_beta};
}

LinkParams calibrate_link(Transport& t, Deadline deadline, const CalibrationOptions& o) {
  const std::string name(t.name());
  if (o.large_bytes <= o.small_bytes || o.small_trials < 1 || o.large_trials < 1 || o.warmup < 0)
    fail(ErrorCode::invalid_argument,
         "calibration: need large_bytes > small_bytes, trials >= 1 and warmup >= 0");
  if (t.size() == 1) return {name, 0, 0};
  RankExchange ex(t, deadline);
  const int peer = t.rank() ^ 1;
  // alpha and 1/beta, so that the slowest pair's are the largest.
  double measured[2] = {0, 0};
  if (peer < t.size()) {
    const double small = half_round_trip(ex, peer, o.small_bytes, o.small_trials, o.warmup);
    const double large = half_round_trip(ex, peer, o.large_bytes, o.large_trials, o.warmup);
    const LinkParams p = fit_link(name, small, large, o.small_bytes, o.large_bytes);
    measured[0] = p.alpha;
    measured[1] = 1 / p.beta;
  }
  ex.agree_max(measured);
  return {name, measured[0], 1 / measured[1]};
}

HostLoad read_host_load() {
  HostLoad load;
  std::ifstream stat("/proc/stat");
  std::string line;
  while (std::getline(stat, line))
    if (line.rfind("procs_running ", 0) == 0) {
      load.running = std::strtod(line.c_str() + 14, nullptr);
      break;
    }
  std::ifstream avg("/proc/loadavg");
  if (double a = 0; avg >> a) load.loadavg = a;
  return load;
}

double median_others_running(const std::vector<double>& running, int local_ranks) {
  if (running.empty()) return 0;
  std::vector<double> others;
  for (double r : running) others.push_back(std::max(0.0, r - local_ranks));
  std::sort(others.begin(), others.end());
  const size_t n = others.size();
  return n % 2 == 1 ? others[n / 2] : (others[n / 2 - 1] + others[n / 2]) / 2;
}

bool host_busy(const std::vector<double>& running, int local_ranks, int cores) {
  if (running.empty()) return false;
  const double free_cores = std::max(0, cores - local_ranks);
  return median_others_running(running, local_ranks) > free_cores;
}

ModelCalibrationOptions ModelCalibrationOptions::quick() {
  ModelCalibrationOptions o;
  o.pingpong_sizes = {8, 64, 512, 4096, 32768, 262144, size_t{2} << 20, size_t{16} << 20};
  o.kernel_sizes = {65536, size_t{1} << 20, size_t{8} << 20};
  o.small_trials = 20;
  o.large_trials = 3;
  o.rounds = 2;
  o.sweep_budget = std::chrono::milliseconds(500);
  o.memory_bytes = size_t{16} << 20;
  return o;
}

ModelCalibrationOptions ModelCalibrationOptions::thorough() {
  ModelCalibrationOptions o;
  for (size_t b = 8; b <= (size_t{64} << 20); b *= 4) o.pingpong_sizes.push_back(b);
  for (size_t b = 4096; b <= (size_t{64} << 20); b *= 4) o.kernel_sizes.push_back(b);
  o.small_trials = 200;
  o.large_trials = 7;
  o.rounds = 5;
  o.memory_bytes = size_t{64} << 20;
  o.all_ops = true;
  o.flag_round_trips = 20000;
  o.flag_budget = std::chrono::milliseconds(50);
  return o;
}

std::vector<int> host_layout(Transport& t, std::string_view identity, Deadline deadline) {
  const auto n = static_cast<size_t>(t.size());
  std::vector<double> ids(n, 0);
  ids[static_cast<size_t>(t.rank())] = identity_hash(identity);
  RankExchange(t, deadline).agree_max(ids);
  return number_by_first_seen(std::span<const double>(ids));
}

ModelCalibration calibrate_model(Transport& t, Deadline deadline,
                                 const ModelCalibrationOptions& o) {
  const auto start = Clock::now();
  ModelCalibration out;
  const std::string cls = link_class_of(t.name());
  if (t.size() == 1) return out;
  const int rank = t.rank();
  const auto n = static_cast<size_t>(t.size());
  RankExchange ex(t, deadline);
  out.host_of = host_layout(t, o.host_identity, deadline);
  // The load the probes run under: this rank's host, sampled at each step.
  const LoadSampler sample_load = o.load_sampler ? o.load_sampler : LoadSampler(read_host_load);
  std::vector<double> running;
  double loadavg = 0;
  auto sample = [&] {
    const HostLoad l = sample_load();
    running.push_back(l.running);
    loadavg = std::max(loadavg, l.loadavg);
  };
  sample();

  // 1. The link: a ping-pong sweep between `peer`s (-1: this rank waits),
  // fitted as link class `name`.
  auto probe_link = [&](int peer, const std::string& name) {
    const auto probe_start = Clock::now();
    // 1. Ping-pong sweep, every pair at once; the slowest pair's times. First
    // a few exchanges of 4 MiB: the transport's buffers (shm slots, socket
    // buffers) are touched for the first time here, and the page faults and
    // cold caches of that first pass would otherwise be charged to the small
    // sizes measured first.
    const bool paired = peer >= 0 && peer < t.size();
    if (paired) {
      // The lower rank of the pair says, before each exchange, whether to go on.
      const auto until = Clock::now() + o.warmup;
      for (;;) {
        double go = rank < peer && Clock::now() < until ? 1 : 0;
        if (rank < peer)
          ex.send(peer, &go, sizeof go);
        else
          ex.recv(peer, &go, sizeof go);
        if (go == 0) break;
        bidirectional(ex, peer, size_t{1} << 20, 1);
      }
    }
    // Each size's ping-pong, then (above kAlphaFitMaxBytes) its exchange, in
    // one vector so that one agree_max settles both.
    // The sweep stops (on every rank alike) once it has used its budget: slow
    // links measure fewer sizes, and the curve holds its last point beyond.
    // Rounds over all sizes, keeping each size's fastest: the shm ping-pong of
    // this host is bimodal (the same 128 KiB message measured 1.2 and 16 GB/s
    // in consecutive jobs), and the collectives it predicts ran in the fast
    // mode. Round 0 decides how many sizes fit the budget.
    size_t sizes = o.pingpong_sizes.size();
    std::vector<double> times(2 * sizes, std::numeric_limits<double>::infinity());
    for (int k = 0; k < o.rounds; ++k)
      for (size_t i = 0; i < sizes; ++i) {
        const size_t b = o.pingpong_sizes[i];
        const bool small = static_cast<double>(b) <= kAlphaFitMaxBytes;
        sample();
        if (paired) {
          times[i] = std::min(
              times[i], half_round_trip(ex, peer, b, small ? o.small_trials : o.large_trials, 2));
          // 2. The bidirectional exchange of the same size.
          if (!small)
            times[sizes + i] =
                std::min(times[sizes + i], bidirectional(ex, peer, b, o.large_trials));
        } else {
          times[i] = times[sizes + i] = 0;
        }
        if (k > 0 || small || o.sweep_budget.count() == 0) continue;
        double elapsed = seconds_since(probe_start);
        ex.agree_max(std::span<double>(&elapsed, 1));
        if (elapsed * o.rounds > std::chrono::duration<double>(o.sweep_budget).count()) {
          std::copy(times.begin() + static_cast<std::ptrdiff_t>(sizes),
                    times.begin() + static_cast<std::ptrdiff_t>(sizes + i + 1),
                    times.begin() + static_cast<std::ptrdiff_t>(i + 1));
          sizes = i + 1;
          times.resize(2 * sizes);
          break;
        }
      }
    for (double& x : times)
      if (!std::isfinite(x)) x = 0;  // sizes at or below kAlphaFitMaxBytes have no exchange
    ex.agree_max(times);
    std::vector<Sample> samples, exchanges;
    for (size_t i = 0; i < sizes; ++i) {
      const auto b = static_cast<double>(o.pingpong_sizes[i]);
      samples.push_back({b, times[i]});
      if (b > kAlphaFitMaxBytes) exchanges.push_back({b, times[sizes + i]});
    }
    LinkParams link = fit_link_model(name, samples);
    link.mem_traffic = 4;  // two copies (a send's and a receive's), each a read and a write
    fit_half_duplex(link, exchanges);
    return link;
  };
  // On one host, ranks r and r ^ 1 pair up. Across hosts the class link is
  // the network's: hosts pair up (0-1, 2-3, ...) and so do their ranks of
  // equal local index; and where a host has several ranks, the link inside
  // a host is fitted too, as class "shm" (r with its host's local i ^ 1), so
  // that the model tells the two apart (tune/model_sim.h).
  const HostGroups hosts = host_groups(out.host_of);
  const auto me = static_cast<size_t>(rank);
  auto rank_on = [&](int h, int i) {
    if (h >= hosts.host_count() || i >= hosts.size_of(h)) return -1;
    return hosts.ranks[static_cast<size_t>(h)][static_cast<size_t>(i)];
  };
  LinkParams link;
  if (hosts.host_count() > 1) {
    link = probe_link(rank_on(hosts.host[me] ^ 1, hosts.local[me]), cls);
    if (hosts.widest > 1)
      out.table.links["shm"] = probe_link(rank_on(hosts.host[me], hosts.local[me] ^ 1), "shm");
  } else {
    link = probe_link(rank ^ 1, cls);
  }

  // 2b. Where the ranks share memory, the latency of a signal: ranks 0 and
  // 1 ping-pong a flag, the others wait in agree_max. Every message hands
  // over at least one cache line too, so a flag slower than alpha is the
  // probe's misfortune (ranks 0 and 1 took turns on one CPU: each round
  // trip then waits out a spin and a yield), not the link's: alpha bounds it,
  // and a one-sided op is never priced above a message.
  if (t.shares_memory()) {
    double flag = flag_half_round_trip(ex, o.flag_round_trips, o.flag_budget);
    ex.agree_max(std::span<double>(&flag, 1));
    if (flag >= 0) link.flag_alpha = std::min(flag, link.alpha);
  }

  sample();

  // 3. Kernels and copies, on rank 0 alone.
  std::vector<std::pair<std::string, std::vector<double>>> rates;  // key, s/B per kernel size
  auto add_rate = [&](std::string key, std::vector<double> per_size) {
    rates.emplace_back(std::move(key), std::move(per_size));
  };
  const size_t biggest =
      o.kernel_sizes.empty() ? 0 : *std::max_element(o.kernel_sizes.begin(), o.kernel_sizes.end());
  std::vector<DataType> types;
  for (int d = 0; d < kDataTypeCount; ++d) types.push_back(static_cast<DataType>(d));
  std::vector<ReduceOp> ops = {ReduceOp::sum};
  if (o.all_ops) ops = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max};
  {
    std::vector<std::byte> a(biggest, std::byte{0}), b(biggest, std::byte{0});
    auto sweep = [&](auto&& run) {
      std::vector<double> v(o.kernel_sizes.size(), 0);
      if (rank != 0) return v;
      for (size_t i = 0; i < o.kernel_sizes.size(); ++i) {
        const size_t bytes = o.kernel_sizes[i];
        const int trials = std::clamp(static_cast<int>((size_t{8} << 20) / bytes), 3, 50);
        v[i] = time_runs(trials, [&] { run(bytes); }) / static_cast<double>(bytes);
      }
      return v;
    };
    add_rate("copy", sweep([&](size_t bytes) { std::memcpy(a.data(), b.data(), bytes); }));
    for (DataType d : types)
      for (ReduceOp op : ops)
        add_rate(kernel_key(d, op), sweep([&](size_t bytes) {
                   reduce_into(d, op, a.data(), a.data(), b.data(), bytes / dtype_size(d));
                 }));
  }
  std::vector<double> flat;
  for (const auto& [key, v] : rates) flat.insert(flat.end(), v.begin(), v.end());
  ex.agree_max(flat);
  size_t at = 0;
  for (const auto& [key, v] : rates) {
    RateCurve c;
    for (size_t i = 0; i < v.size(); ++i)
      c.points.push_back({static_cast<double>(o.kernel_sizes[i]), flat[at++]});
    if (key == "copy")
      out.table.compute.copy = std::move(c);
    else
      out.table.compute.kernels[key] = std::move(c);
  }

  sample();

  // 4. The memory probe: rank 0 copies alone, then every rank of its host at
  // once.
  const double mb = static_cast<double>(o.memory_bytes);
  std::vector<std::byte> src(o.memory_bytes, std::byte{3}), dst(o.memory_bytes, std::byte{0});
  std::memcpy(dst.data(), src.data(), o.memory_bytes);  // first touch, outside the timing
  double alone = 0;
  if (rank == 0) alone = time_runs(3, [&] { std::memcpy(dst.data(), src.data(), o.memory_bytes); });
  std::vector<double> together(n, 0);
  for (int k = 0; k < 3; ++k) {
    ex.barrier();
    const auto s = Clock::now();
    std::memcpy(dst.data(), src.data(), o.memory_bytes);
    together[static_cast<size_t>(rank)] =
        std::max(together[static_cast<size_t>(rank)], k == 0 ? 0.0 : seconds_since(s));
  }
  sample();
  const int my_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int my_local = 0;
  for (size_t r = 0; r < n; ++r)
    my_local += out.host_of[r] == out.host_of[static_cast<size_t>(rank)] ? 1 : 0;
  std::vector<double> agreed = together;
  agreed.push_back(alone);
  agreed.push_back(static_cast<double>(my_cores));
  // The load: whether this rank's host was busy, its others running, loadavg.
  agreed.push_back(host_busy(running, my_local, my_cores) ? 1 : 0);
  agreed.push_back(median_others_running(running, my_local));
  agreed.push_back(loadavg);
  ex.agree_max(agreed);
  CalibrationLoad load;
  load.provisional = agreed[n + 2] > 0;
  load.others_running = agreed[n + 3];
  load.loadavg = agreed[n + 4];
  load.cores = static_cast<int>(agreed[n + 1]);
  load.samples = static_cast<int>(running.size());
  out.table.calibration = load;
  alone = agreed[n];
  const int cores = static_cast<int>(agreed[n + 1]);
  int local = 0;
  double slowest = 0;
  for (size_t r = 0; r < n; ++r)
    if (out.host_of[r] == out.host_of[0]) {
      ++local;
      slowest = std::max(slowest, agreed[r]);
    }
  out.table.host.cores = cores;
  out.table.host.memory = fit_memory(mb, local, cores, alone, slowest);
  out.table.gamma = kDefaultGamma;
  if (const RateCurve* k = out.table.compute.kernel(DataType::float32, ReduceOp::sum))
    out.table.gamma = k->points.empty() ? kDefaultGamma : k->points.front().s_per_byte;
  out.table.links[cls] = std::move(link);
  out.seconds = seconds_since(start);
  return out;
}

}  // namespace chorus
