// The local work of deterministic reductions (core/exact_sum.h), per element:
// scales per element, fixed forms, the way back, and the gather road's local sums,
// against the ordinary float32 sum kernel as the anchor.
//   build/bench/exact_sum_benchmark --benchmark_filter=Float32
#include "core/exact_sum.h"
#include "core/reduce_kernels.h"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace {

using namespace chorus;

std::vector<float> values(size_t n, int seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::normal_distribution<float> d(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void Float32Scales(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const std::vector<float> x = values(n, 1);
  std::vector<uint8_t> scales(n);
  bool special = false;
  for (auto _ : state) {
    exact::max_scales(DataType::float32, x.data(), n, scales.data(), &special);
    benchmark::DoNotOptimize(scales.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 4));
}

void Float32ToFixed(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const std::vector<float> x = values(n, 1);
  std::vector<uint8_t> scales(n, 127);
  std::vector<int64_t> q(n);
  for (auto _ : state) {
    exact::to_fixed(DataType::float32, x.data(), n, scales.data(), q.data(), false);
    benchmark::DoNotOptimize(q.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 4));
}

void Float32FromFixed(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> scales(n, 127);
  std::vector<int64_t> q(n);
  std::mt19937_64 rng(3);
  for (auto& v : q) v = static_cast<int64_t>(rng() >> 18) - (int64_t{1} << 45);
  std::vector<float> out(n);
  for (auto _ : state) {
    exact::from_fixed(DataType::float32, q.data(), n, scales.data(), 1, nullptr, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 4));
}

// Sums of two contributions side by side in one buffer, `n` each, by `sum`.
template <typename Sum>
void TwoContributions(benchmark::State& state, Sum sum) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<float> all = values(2 * n, 2);
  std::vector<float> out(n);
  for (auto _ : state) {
    sum(all.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 4));
}

// The gather road's local sums of two contributions, and the ordinary sum of
// two buffers (what a 2-rank AllReduce computes) as the anchor.
void Float32SumGathered(benchmark::State& state) {
  TwoContributions(state, [](const float* all, size_t n, float* out) {
    exact::sum_gathered(DataType::float32, all, n, 2, 1, out);
  });
}

// Four contributions (a 4-rank gather road, or a scatter road's block).
void Float32SumGathered4(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<float> all = values(4 * n, 3);
  std::vector<float> out(n);
  for (auto _ : state) {
    exact::sum_gathered(DataType::float32, all.data(), n, 4, 1, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 4));
}

void Float32OrdinarySum(benchmark::State& state) {
  TwoContributions(state, [](const float* all, size_t n, float* out) {
    reduce_into(DataType::float32, ReduceOp::sum, out, all, all + n, n);
  });
}

}  // namespace

BENCHMARK(Float32Scales)->Arg(1 << 10)->Arg(1 << 18);
BENCHMARK(Float32ToFixed)->Arg(1 << 10)->Arg(1 << 18);
BENCHMARK(Float32FromFixed)->Arg(1 << 10)->Arg(1 << 18);
BENCHMARK(Float32SumGathered)->Arg(1 << 10)->Arg(1 << 18);
BENCHMARK(Float32SumGathered4)->Arg(1 << 10)->Arg(1 << 18);
BENCHMARK(Float32OrdinarySum)->Arg(1 << 10)->Arg(1 << 18);
BENCHMARK_MAIN();
