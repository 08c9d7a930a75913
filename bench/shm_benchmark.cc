// The shm transport between two forked processes: ping-pong latency,
// streaming bandwidth and ring AllReduce bus bandwidth, each through slots
// only (cma=0) and with the process_vm_readv single-copy path (cma=1).
//   build/bench/shm_benchmark --benchmark_filter=PingPong
// Each benchmark run forks a partner process; rank 0 (this process) tells it
// how many iterations to run, then both run them in lock step. CHORUS_SPIN_US
// sets the spin budget (through Config). Figures:
//   PingPong: one_way_us = round trip / 2.
//   Stream:   bytes_per_second over a window of back-to-back sends, acked.
//   AllReduce: busbw_GBps = 2 (N-1)/N * bytes / time, N = 2.
#include "api/communicator_impl.h"
#include "bootstrap/file_store.h"
#include "core/check.h"
#include "core/config.h"
#include "transport/shm/shm_transport.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace chorus {
namespace {

using namespace std::chrono_literals;

struct Command {
  uint64_t iterations = 0;
};

void wait_ids(Transport& t, std::vector<RequestId> ids) {
  std::vector<RequestId> done;
  const Deadline deadline = Clock::now() + 120s;
  while (!ids.empty()) {
    done.clear();
    t.wait_some(done, deadline);
    if (done.empty() && Clock::now() >= deadline) fail(ErrorCode::timeout, "benchmark stalled");
    for (RequestId id : done) std::erase(ids, id);
  }
}

// Forks rank 1, builds both transports, sends it the iteration count and runs
// `body` on both sides; returns after the child exited.
void with_pair(benchmark::State& state, bool cma,
               const std::function<void(int rank, std::unique_ptr<Transport>&, uint64_t)>& body) {
  char templ[] = "/tmp/chorus-shm-bench-XXXXXX";
  if (::mkdtemp(templ) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string dir = templ;
  ShmOptions opt;
  opt.spin = Config::from_env().spin;
  if (!cma) opt.cma_threshold = 0;
  opt.deadline = Clock::now() + 30s;
  const pid_t child = ::fork();
  if (child == 0) {
    int code = 0;
    try {
      FileStore store(dir);
      auto t = make_shm_transport(store, 1, 2, opt);
      Command cmd;
      wait_ids(*t, {t->irecv(0, &cmd, sizeof cmd, nullptr)});
      body(1, t, cmd.iterations);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shm benchmark partner: %s\n", e.what());
      code = 1;
    }
    ::_exit(code);
  }
  {
    FileStore store(dir);
    auto t = make_shm_transport(store, 0, 2, opt);
    Command cmd{static_cast<uint64_t>(state.max_iterations)};
    wait_ids(*t, {t->isend(1, &cmd, sizeof cmd)});
    body(0, t, cmd.iterations);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  std::filesystem::remove_all(dir);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("partner failed");
}

void BM_PingPong(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<std::byte> buf(bytes, std::byte{1});
  auto* st = &state;
  with_pair(state, state.range(1) != 0, [&](int rank, std::unique_ptr<Transport>& t, uint64_t n) {
    const int peer = 1 - rank;
    if (rank == 0) {
      for (auto _ : *st) {
        wait_ids(*t, {t->isend(peer, buf.data(), bytes)});
        wait_ids(*t, {t->irecv(peer, buf.data(), bytes, nullptr)});
      }
    } else {
      for (uint64_t i = 0; i < n; ++i) {
        wait_ids(*t, {t->irecv(peer, buf.data(), bytes, nullptr)});
        wait_ids(*t, {t->isend(peer, buf.data(), bytes)});
      }
    }
  });
  state.counters["one_way_us"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2e-6,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 *
                          static_cast<int64_t>(bytes));
}

void BM_Stream(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t window = bytes <= (size_t{1} << 20) ? 16 : 4;
  std::vector<std::vector<std::byte>> bufs(window, std::vector<std::byte>(bytes, std::byte{2}));
  uint64_t ack = 0;
  auto* st = &state;
  with_pair(state, state.range(1) != 0, [&](int rank, std::unique_ptr<Transport>& t, uint64_t n) {
    const int peer = 1 - rank;
    std::vector<RequestId> ids;
    auto one_window = [&] {
      ids.clear();
      for (auto& b : bufs)
        ids.push_back(rank == 0 ? t->isend(peer, b.data(), bytes)
                                : t->irecv(peer, b.data(), bytes, nullptr));
      ids.push_back(rank == 0 ? t->irecv(peer, &ack, sizeof ack, nullptr)
                              : t->isend(peer, &ack, sizeof ack));
      wait_ids(*t, ids);
    };
    if (rank == 0) {
      for (auto _ : *st) one_window();
    } else {
      for (uint64_t i = 0; i < n; ++i) one_window();
    }
  });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(window * bytes));
}

void BM_AllReduceRing(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / sizeof(float);
  std::vector<float> in(count, 1.0f), out(count);
  auto* st = &state;
  with_pair(state, state.range(1) != 0, [&](int, std::unique_ptr<Transport>& t, uint64_t n) {
    Config config;
    const bool parent = t->rank() == 0;
    Communicator comm = make_communicator(std::move(t), config);
    CallOptions options;
    options.algorithm = "ring";
    auto once = [&] {
      comm.allreduce(in.data(), out.data(), count, DataType::float32, ReduceOp::sum, options);
    };
    if (parent) {
      for (auto _ : *st) once();
    } else {
      for (uint64_t i = 0; i < n; ++i) once();
    }
  });
  state.counters["busbw_GBps"] = benchmark::Counter(
      static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

// lo, lo*step, ... and hi itself, each through slots only and with CMA.
void sizes(benchmark::internal::Benchmark* b, int64_t lo, int64_t hi, int64_t step) {
  for (int64_t cma : {0, 1}) {
    int64_t s = lo;
    for (; s < hi; s *= step) b->Args({s, cma});
    b->Args({hi, cma});
  }
  b->ArgNames({"bytes", "cma"})->UseRealTime();
}

BENCHMARK(BM_PingPong)->Apply([](auto* b) { sizes(b, 8, int64_t{64} << 20, 8); });
BENCHMARK(BM_Stream)->Apply([](auto* b) { sizes(b, 8, int64_t{64} << 20, 8); });
BENCHMARK(BM_AllReduceRing)->Apply([](auto* b) {
  sizes(b, int64_t{64} << 10, int64_t{256} << 20, 4);
});

}  // namespace
}  // namespace chorus

BENCHMARK_MAIN();
