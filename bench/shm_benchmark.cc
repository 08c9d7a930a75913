// The shm transport between forked processes: ping-pong latency,
// streaming bandwidth and ring AllReduce bus bandwidth, each through slots
// only (cma=0) and with the process_vm_readv single-copy path (cma=1).
//   build/bench/shm_benchmark --benchmark_filter=PingPong
// Each benchmark run forks a partner process; rank 0 (this process) tells it
// how many iterations to run, then both run them in lock step. CHORUS_SPIN_US
// sets the spin budget (through Config). Figures:
//   PingPong: one_way_us = round trip / 2.
//   Stream:   bytes_per_second over a window of back-to-back sends, acked.
//   AllReduce: busbw_GBps = 2 (N-1)/N * bytes / time, N = 2 and 4.
#include "core/check.h"
#include "core/config.h"
#include "engine/communicator_impl.h"
#include "store/file_store.h"
#include "transport/shm/shm_transport.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

namespace chorus {
namespace {

using namespace std::chrono_literals;

// Set-up under test: --slot_bytes=N, --slots=N (ShmOptions defaults
// otherwise) and --bind=0|1 (pin rank r to CPU r mod ncpu; default 1).
struct Geometry {
  size_t slot_bytes = ShmOptions{}.slot_bytes;
  size_t slots = ShmOptions{}.slots;
  bool bind = true;  // --bind=0 leaves the ranks to the scheduler
};

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

// Pins the calling process to the (rank mod count)-th CPU it may run on, as
// mpirun --bind-to core does: unpinned, the scheduler often puts both ranks
// of a pair on one core, where every wait is a context switch.
void bind_to_cpu(int rank) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  const int count = CPU_COUNT(&allowed);
  int index = rank % std::max(count, 1);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (index-- == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ::sched_setaffinity(0, sizeof one, &one);
      return;
    }
  }
}

// Forks ranks 1..n-1, builds the n transports, sends each child the
// iteration count and runs `body` on every rank; returns after the children
// exited.
void with_group(benchmark::State& state, int n, const Geometry& geometry, bool cma,
                const std::function<void(int rank, std::unique_ptr<Transport>&, uint64_t)>& body) {
  const bool bind = geometry.bind;
  char templ[] = "/tmp/chorus-shm-bench-XXXXXX";
  if (::mkdtemp(templ) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string dir = templ;
  ShmOptions opt;
  opt.spin = Config::from_env().spin;
  opt.slot_bytes = geometry.slot_bytes;
  opt.slots = geometry.slots;
  opt.cma_threshold = cma ? size_t{256} << 10 : 0;
  opt.deadline = Clock::now() + 30s;
  std::vector<pid_t> children;
  for (int r = 1; r < n; ++r) {
    const pid_t child = ::fork();
    if (child == 0) {
      int code = 0;
      try {
        if (bind) bind_to_cpu(r);
        FileStore store(dir);
        auto t = make_shm_transport(store, r, n, opt);
        Command cmd;
        wait_ids(*t, {t->irecv(0, &cmd, sizeof cmd, nullptr)});
        body(r, t, cmd.iterations);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "shm benchmark rank %d: %s\n", r, e.what());
        code = 1;
      }
      ::_exit(code);
    }
    children.push_back(child);
  }
  {
    // Rank 0 is this process: bind it for the run, then restore its mask.
    cpu_set_t saved;
    CPU_ZERO(&saved);
    ::sched_getaffinity(0, sizeof saved, &saved);
    if (bind) bind_to_cpu(0);
    FileStore store(dir);
    auto t = make_shm_transport(store, 0, n, opt);
    Command cmd{static_cast<uint64_t>(state.max_iterations)};
    std::vector<RequestId> ids;
    for (int r = 1; r < n; ++r) ids.push_back(t->isend(r, &cmd, sizeof cmd));
    wait_ids(*t, ids);
    body(0, t, cmd.iterations);
    ::sched_setaffinity(0, sizeof saved, &saved);
  }
  bool ok = true;
  for (pid_t c : children) {
    int status = 0;
    ::waitpid(c, &status, 0);
    ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::filesystem::remove_all(dir);
  if (!ok) state.SkipWithError("a partner rank failed");
}

void with_pair(benchmark::State& state, const Geometry& geometry, bool cma,
               const std::function<void(int rank, std::unique_ptr<Transport>&, uint64_t)>& body) {
  with_group(state, 2, geometry, cma, body);
}

void BM_PingPong(benchmark::State& state, Geometry geometry) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  auto* st = &state;
  with_pair(state, geometry, state.range(1) != 0,
            [&](int rank, std::unique_ptr<Transport>& t, uint64_t n) {
              // Buffers are made after fork(), so no copy-on-write fault lands in a timed loop.
              std::vector<std::byte> buf(bytes, std::byte{1});
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
  state.counters["one_way_us"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 *
                          static_cast<int64_t>(bytes));
}

void BM_Stream(benchmark::State& state, Geometry geometry) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t window = bytes <= (size_t{1} << 20) ? 16 : 4;
  auto* st = &state;
  with_pair(state, geometry, state.range(1) != 0,
            [&](int rank, std::unique_ptr<Transport>& t, uint64_t n) {
              std::vector<std::vector<std::byte>> bufs(window,
                                                       std::vector<std::byte>(bytes, std::byte{2}));
              uint64_t ack = 0;
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

void BM_AllReduceRing(benchmark::State& state, Geometry geometry) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / sizeof(float);
  auto* st = &state;
  const int nranks = static_cast<int>(state.range(2));
  with_group(state, nranks, geometry, state.range(1) != 0,
             [&](int, std::unique_ptr<Transport>& t, uint64_t n) {
               std::vector<float> in(count, 1.0f), out(count, 0.0f);
               Config config;
               const bool parent = t->rank() == 0;
               Communicator comm = make_communicator(std::move(t), config);
               CallOptions options;
               options.algorithm = "ring";
               auto once = [&] {
                 comm.allreduce(in.data(), out.data(), count, DataType::float32, ReduceOp::sum,
                                options);
               };
               if (parent) {
                 for (auto _ : *st) once();
               } else {
                 for (uint64_t i = 0; i < n; ++i) once();
               }
             });
  state.counters["busbw_GBps"] =
      benchmark::Counter(2.0 * (nranks - 1) / nranks * static_cast<double>(bytes) *
                             static_cast<double>(state.iterations()) / 1e9,
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

}  // namespace
}  // namespace chorus

int main(int argc, char** argv) {
  using namespace chorus;
  Geometry geometry;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> std::optional<size_t> {
      const std::string f = std::string(flag) + "=";
      if (arg.rfind(f, 0) != 0) return std::nullopt;
      return static_cast<size_t>(std::stoull(arg.substr(f.size())));
    };
    if (auto v = value("--slot_bytes")) {
      geometry.slot_bytes = *v;
    } else if (auto w = value("--slots")) {
      geometry.slots = *w;
    } else if (auto b = value("--bind")) {
      geometry.bind = *b != 0;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::AddCustomContext("slot_bytes", std::to_string(geometry.slot_bytes));
  benchmark::AddCustomContext("slots", std::to_string(geometry.slots));
  benchmark::RegisterBenchmark("BM_PingPong", BM_PingPong, geometry)->Apply([](auto* b) {
    sizes(b, 8, int64_t{64} << 20, 8);
  });
  benchmark::RegisterBenchmark("BM_Stream", BM_Stream, geometry)->Apply([](auto* b) {
    sizes(b, 8, int64_t{64} << 20, 8);
  });
  benchmark::RegisterBenchmark("BM_AllReduceRing", BM_AllReduceRing, geometry)->Apply([](auto* b) {
    for (int64_t ranks : {2, 4})
      for (int64_t cma : {0, 1}) {
        b->Args({8, cma, ranks});
        for (int64_t s = int64_t{64} << 10; s <= int64_t{256} << 20; s *= 4)
          b->Args({s, cma, ranks});
      }
    b->ArgNames({"bytes", "cma", "n"})->UseRealTime();
  });
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
