// Reduction kernel throughput against memcpy of the same size, in one run.
//   build/bench/reduce_kernels_benchmark
// bytes_per_second counts the bytes the operation touches in memory: memcpy
// reads one array and writes one (2 x 64 MiB); sum reads two and writes one
// (3 x 64 MiB). The comparison is on the array size processed per
// second, reported as the "array" counter.
#include "core/reduce_kernels.h"

#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

namespace {

constexpr size_t kBytes = size_t{64} << 20;

void BM_Memcpy(benchmark::State& state) {
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kBytes);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.counters["array_GBps"] = benchmark::Counter(
      static_cast<double>(kBytes) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Reduce(benchmark::State& state, chorus::DataType type, chorus::ReduceOp op) {
  const size_t es = chorus::dtype_size(type);
  std::vector<char> a(kBytes, 0), b(kBytes, 0);
  for (auto _ : state) {
    // dst = a (+) b written into a: the in-place accumulate the algorithms use.
    chorus::reduce_into(type, op, a.data(), a.data(), b.data(), kBytes / es);
    benchmark::DoNotOptimize(a.data());
    benchmark::ClobberMemory();
  }
  state.counters["array_GBps"] = benchmark::Counter(
      static_cast<double>(kBytes) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_Reduce, float32_sum, chorus::DataType::float32, chorus::ReduceOp::sum)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reduce, float64_sum, chorus::DataType::float64, chorus::ReduceOp::sum)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reduce, int32_max, chorus::DataType::int32, chorus::ReduceOp::max)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reduce, float16_sum, chorus::DataType::float16, chorus::ReduceOp::sum)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reduce, bfloat16_sum, chorus::DataType::bfloat16, chorus::ReduceOp::sum)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
