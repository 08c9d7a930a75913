// chorus-demo: AllReduce on 4 in-process ranks from 8 B to 64 MiB, printing
// size, time, algbw and busbw (busbw = algbw * 2(N-1)/N, as nccl-tests).
#include <chorus/chorus.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  constexpr int kRanks = 4;
  constexpr size_t kMinBytes = 8;
  constexpr size_t kMaxBytes = size_t{64} << 20;
  std::printf("# chorus-demo: allreduce float32 sum, %d in-process ranks\n", kRanks);
  std::printf("%12s %12s %10s %10s %10s\n", "size(B)", "count", "time(us)", "algbw(GB/s)",
              "busbw(GB/s)");
  std::vector<double> results;
  chorus::testing::run_ranks(kRanks, [&](chorus::Communicator& comm) {
    std::vector<float> buf(kMaxBytes / sizeof(float));
    for (size_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 4) {
      const size_t count = bytes / sizeof(float);
      std::fill(buf.begin(), buf.begin() + static_cast<long>(count), 1.0f);
      const int iters = bytes <= (1 << 20) ? 50 : 5;
      comm.allreduce(buf.data(), buf.data(), count, chorus::DataType::float32, chorus::ReduceOp::sum);
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i)
        comm.allreduce(buf.data(), buf.data(), count, chorus::DataType::float32,
                       chorus::ReduceOp::sum);
      comm.barrier();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          iters;
      if (comm.rank() == 0) {
        const double algbw = static_cast<double>(bytes) / (us * 1e3);
        const double busbw = algbw * 2.0 * (kRanks - 1) / kRanks;
        std::printf("%12zu %12zu %10.1f %10.3f %10.3f\n", bytes, count, us, algbw, busbw);
        std::fflush(stdout);
      }
    }
  });
  return 0;
}
