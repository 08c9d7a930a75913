// STREAM's copy kernel (c[i] = a[i], doubles) on T threads, each on its own
// contiguous part of arrays far larger than the caches: the host's memory
// bandwidth for a copy, the rate chorus's memory-traffic floor divides by.
// Each thread copies its part with memcpy, which for parts this large uses
// non-temporal stores (no read of the destination before it is written), as
// the best STREAM builds do: the highest copy rate this host reaches, hence
// the strictest floor.
// Counts bytes as STREAM does (read + written, 16 B per element); prints the
// best of R repetitions.
//
//   stream_copy [--threads T] [--bytes B] [--reps R]
//   -> "stream copy: T threads, B B per array, best X GB/s (median Y GB/s)"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int threads = 2;
  size_t bytes = size_t{512} << 20;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (flag == "--bytes")
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--reps")
      reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: stream_copy [--threads T] [--bytes B] [--reps R]\n");
      return 2;
    }
  }
  if (threads < 1 || reps < 1 || bytes < 4096) {
    std::fprintf(stderr, "stream_copy: threads and reps must be >= 1, bytes >= 4096\n");
    return 2;
  }
  const size_t n = bytes / sizeof(double);
  std::vector<double> a(n, 1.0), c(n, 0.0);  // written once: the pages are in
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    std::vector<std::thread> pool;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t lo = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
        const size_t hi = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
        std::memcpy(c.data() + lo, a.data() + lo, (hi - lo) * sizeof(double));
      });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(2.0 * static_cast<double>(n * sizeof(double)) / s / 1e9);
  }
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  std::printf("stream copy: %d threads, %zu B per array, best %.2f GB/s (median %.2f GB/s)\n",
              threads, n * sizeof(double), sorted.back(), sorted[sorted.size() / 2]);
  return c[n / 2] == 1.0 ? 0 : 1;
}
