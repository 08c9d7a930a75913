// chorus-perf overlap (overlap.h).
#include "perf/overlap.h"

#include "core/check.h"
#include "core/config.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace chorus::perf {

namespace {

using Seconds = std::chrono::duration<double>;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return Seconds(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The slowest rank's figure: what the job waits for.
double slowest(Communicator& comm, double mine) {
  double all = mine;
  comm.allreduce(&mine, &all, 1, DataType::float64, ReduceOp::max);
  return all;
}

}  // namespace

double compute_loop(long iterations) {
  // Four independent chains, so that the loop runs at the core's speed and
  // touches no memory: what it takes from a shared host is a core, nothing
  // else.
  double a = 1.0, b = 1.1, c = 1.2, d = 1.3;
  for (long i = 0; i < iterations; ++i) {
    a = a * 0.999999 + 1e-7;
    b = b * 0.999998 + 2e-7;
    c = c * 0.999997 + 3e-7;
    d = d * 0.999996 + 4e-7;
  }
  return a + b + c + d;
}

OverlapReport run_overlap(Communicator& comm, const PerfOptions& options) {
  OverlapReport report;
  report.transport = comm.transport();
  report.progress = std::string(to_string(Config::from_env().progress));
  report.nranks = comm.size();
  volatile double sink = 0;
  // The loop's rate, agreed on the slowest rank: iterations per second.
  constexpr long kProbe = 2'000'000;
  comm.barrier();
  auto t0 = std::chrono::steady_clock::now();
  sink = sink + compute_loop(kProbe);
  const double rate = kProbe / slowest(comm, seconds_since(t0));
  for (size_t bytes = options.min_bytes; bytes <= options.max_bytes;) {
    const size_t count = std::max<size_t>(1, bytes / sizeof(float));
    std::vector<float> send(count, 1.0f), recv(count);
    auto blocking = [&] {
      comm.allreduce(send.data(), recv.data(), count, DataType::float32, ReduceOp::sum);
    };
    for (int i = 0; i < options.warmup; ++i) blocking();
    // An estimate of A, the median of a few calls, sizes the compute loop.
    std::vector<double> probes;
    for (int i = 0; i < 5; ++i) {
      comm.barrier();
      t0 = std::chrono::steady_clock::now();
      blocking();
      probes.push_back(slowest(comm, seconds_since(t0)));
    }
    const double a0 = median(probes);
    const long iterations = std::max<long>(1, static_cast<long>(a0 * rate));
    std::vector<double> as, cs, ts;
    for (int round = 0; round < options.iters; ++round) {
      comm.barrier();
      t0 = std::chrono::steady_clock::now();
      blocking();
      as.push_back(slowest(comm, seconds_since(t0)));
      comm.barrier();
      t0 = std::chrono::steady_clock::now();
      sink = sink + compute_loop(iterations);
      cs.push_back(slowest(comm, seconds_since(t0)));
      comm.barrier();
      t0 = std::chrono::steady_clock::now();
      Work w =
          comm.allreduce_async(send.data(), recv.data(), count, DataType::float32, ReduceOp::sum);
      sink = sink + compute_loop(iterations);
      w.wait();
      ts.push_back(slowest(comm, seconds_since(t0)));
    }
    OverlapRow row;
    row.bytes = count * sizeof(float);
    row.allreduce_us = median(as) * 1e6;
    row.compute_us = median(cs) * 1e6;
    row.total_us = median(ts) * 1e6;
    row.overlap = (row.allreduce_us + row.compute_us - row.total_us) /
                  std::min(row.allreduce_us, row.compute_us);
    row.rounds = options.iters;
    report.rows.push_back(row);
    const auto next = static_cast<size_t>(static_cast<double>(bytes) * options.step_factor);
    if (next <= bytes) break;
    bytes = next;
  }
  return report;
}

std::string format_overlap(const OverlapReport& r) {
  std::string s = str_cat("# chorus-perf overlap: allreduce float32 sum on ", r.nranks,
                          " ranks over ", r.transport, ", CHORUS_PROGRESS=", r.progress,
                          "; medians over rounds, each the slowest rank's\n",
                          "# A = blocking allreduce, C = compute alone (sized to A), T = "
                          "allreduce_async + compute + wait; overlap = (A + C - T) / min(A, C)\n",
                          "#        size          A(us)          C(us)          T(us)  overlap\n");
  for (const OverlapRow& row : r.rows) {
    char line[160];
    std::snprintf(line, sizeof line, "%13zu %14.1f %14.1f %14.1f %8.2f\n", row.bytes,
                  row.allreduce_us, row.compute_us, row.total_us, row.overlap);
    s += line;
  }
  return s;
}

std::string overlap_json(const OverlapReport& r) {
  std::string s =
      str_cat("{\"mode\": \"overlap\", \"transport\": \"", r.transport, "\", \"progress\": \"",
              r.progress, "\", \"ranks\": ", r.nranks, ", \"rows\": [");
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const OverlapRow& row = r.rows[i];
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s{\"bytes\": %zu, \"allreduce_us\": %.3f, \"compute_us\": %.3f, "
                  "\"total_us\": %.3f, \"overlap\": %.4f, \"rounds\": %d}",
                  i == 0 ? "" : ", ", row.bytes, row.allreduce_us, row.compute_us, row.total_us,
                  row.overlap, row.rounds);
    s += line;
  }
  return s + "]}";
}

}  // namespace chorus::perf
