// Simulator throughput for ring AllReduce at 1024 ranks (about 2 million
// messages) and halving-doubling AllReduce at 65536 ranks:
//   Run*       what chorus-sim runs: simulate_algorithm, each rank's Program
//              built (or its class's renamed) as the simulator reads it,
//              inside the timer;
//   Build*     build_all alone, all N Programs at once;
//   Simulate*  the simulator alone, on Programs built outside the timer.
// Reports events per second and messages per second.
//
//   build-x/bench/sim_benchmark --benchmark_filter=Run
#include "algorithms/algorithm.h"
#include "algorithms/simulate.h"
#include "sim/simulator.h"
#include "sim/topology.h"

#include <benchmark/benchmark.h>

namespace chorus {
namespace {

const LinkParams kLink{"link", 2e-6, 25e9};

CollectiveSpec allreduce_spec(int n) {
  // 64 elements per rank and block: chunking is even, sizes are realistic.
  return CollectiveSpec{Collective::allreduce, n, 0, static_cast<size_t>(n) * 64, 4, 0};
}

void build(benchmark::State& state, const char* algo_name) {
  const Algorithm* algo = find_algorithm(Collective::allreduce, algo_name);
  if (algo == nullptr) {
    state.SkipWithError("algorithm not registered");
    return;
  }
  const int n = static_cast<int>(state.range(0));
  size_t ops = 0;
  for (auto _ : state) {
    auto programs = build_all(*algo, allreduce_spec(n));
    ops = 0;
    for (const Program& p : programs) ops += p.ops.size();
    benchmark::DoNotOptimize(programs);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops/s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}

void simulate_only(benchmark::State& state, const char* algo_name, const char* topology) {
  const Algorithm* algo = find_algorithm(Collective::allreduce, algo_name);
  if (algo == nullptr) {
    state.SkipWithError("algorithm not registered");
    return;
  }
  const int n = static_cast<int>(state.range(0));
  const auto programs = build_all(*algo, allreduce_spec(n));
  const auto topo = make_topology(topology, n, kLink, kLink);
  SimResult r;
  for (auto _ : state) {
    r = simulate(programs, *topo, SimOptions{1, 1e-10, 4});
    benchmark::DoNotOptimize(r.time);
  }
  state.counters["events"] = static_cast<double>(r.events);
  state.counters["messages"] = static_cast<double>(r.messages);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(r.events),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["messages/s"] = benchmark::Counter(static_cast<double>(r.messages),
                                                    benchmark::Counter::kIsIterationInvariantRate);
  state.counters["sim_us"] = r.time * 1e6;
}

// As chorus-sim runs it: the Programs are built while the simulator reads
// them.
void run(benchmark::State& state, const char* algo_name, const char* topology) {
  const Algorithm* algo = find_algorithm(Collective::allreduce, algo_name);
  if (algo == nullptr) {
    state.SkipWithError("algorithm not registered");
    return;
  }
  const int n = static_cast<int>(state.range(0));
  const auto topo = make_topology(topology, n, kLink, kLink);
  SimResult r;
  for (auto _ : state) {
    r = simulate_algorithm(*algo, allreduce_spec(n), *topo, SimOptions{1, 1e-10, 4});
    benchmark::DoNotOptimize(r.time);
  }
  state.counters["events"] = static_cast<double>(r.events);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(r.events),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["sim_us"] = r.time * 1e6;
}

void BM_RunRing(benchmark::State& s) {
  run(s, "ring", "switch");
}
void BM_RunHalvingDoubling(benchmark::State& s) {
  run(s, "halving_doubling", "switch");
}
void BM_BuildRing(benchmark::State& s) {
  build(s, "ring");
}
void BM_SimulateRing(benchmark::State& s) {
  simulate_only(s, "ring", "switch");
}
void BM_SimulateRingOnRing(benchmark::State& s) {
  simulate_only(s, "ring", "ring");
}
void BM_BuildHalvingDoubling(benchmark::State& s) {
  build(s, "halving_doubling");
}
void BM_SimulateHalvingDoubling(benchmark::State& s) {
  simulate_only(s, "halving_doubling", "switch");
}

BENCHMARK(BM_RunRing)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RunHalvingDoubling)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildRing)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateRing)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateRingOnRing)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildHalvingDoubling)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateHalvingDoubling)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace chorus

BENCHMARK_MAIN();
