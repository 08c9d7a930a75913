// MPI_Gather or MPI_Scatter sweep (argv: gather | scatter, then -b -e -f -n
// -w) with chorus-perf's columns, built with Open MPI's mpicxx
// (gather_scatter.sh). float32, root 0; size = the root's buffer (N blocks),
// as chorus-perf counts it; time = slowest rank's mean over -n iterations;
// out of place and in place (MPI_IN_PLACE on the root). Every element of a
// fresh call is checked.
#include "compare_common.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<std::string> rest;
  const compare::Sweep s = compare::parse_sweep(argc, argv, &rest);
  const bool gather = rest.empty() || rest[0] != "scatter";
  const size_t max_count = s.max_bytes / sizeof(float);
  std::vector<float> whole(max_count), block(max_count);
  if (rank == 0) {
    std::printf("# mpi %s float32, %d ranks, root 0\n", gather ? "gather" : "scatter", n);
    std::printf("#%11s %12s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "time", "algbw",
                "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  }
  // Element i of rank r's block: r * 1000 + i % 1000, exact in float32.
  auto value = [](int r, size_t i) {
    return static_cast<float>(r * 1000 + static_cast<int>(i % 1000));
  };
  size_t total_wrong = 0;
  for (size_t bytes = s.min_bytes; bytes <= s.max_bytes;
       bytes = std::max(bytes + 1, static_cast<size_t>(static_cast<double>(bytes) * s.factor))) {
    const size_t count = bytes / sizeof(float) / static_cast<size_t>(n);  // per rank
    const int c = static_cast<int>(count);
    double seconds[2] = {0, 0};
    size_t wrongs[2] = {0, 0};
    for (int in_place = 0; in_place < 2; ++in_place) {
      const bool root_in_place = in_place && rank == 0;
      auto call = [&] {
        if (gather)
          MPI_Gather(root_in_place ? MPI_IN_PLACE : block.data(), c, MPI_FLOAT, whole.data(), c,
                     MPI_FLOAT, 0, MPI_COMM_WORLD);
        else
          MPI_Scatter(whole.data(), c, MPI_FLOAT, root_in_place ? MPI_IN_PLACE : block.data(), c,
                      MPI_FLOAT, 0, MPI_COMM_WORLD);
      };
      auto fill = [&] {
        for (size_t i = 0; i < count; ++i) block[i] = value(rank, i);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            whole[static_cast<size_t>(r) * count + i] =
                rank == 0 && (!gather || (in_place && r == 0)) ? value(r, i) : -1.0f;
      };
      fill();
      for (int i = 0; i < s.warmup; ++i) call();
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < s.iters; ++i) call();
      double t = (MPI_Wtime() - t0) / s.iters;
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      fill();
      if (!gather && rank != 0) std::fill(block.begin(), block.begin() + c, -1.0f);
      call();
      unsigned long long wrong = 0;
      if (gather && rank == 0)
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            wrong += whole[static_cast<size_t>(r) * count + i] != value(r, i);
      if (!gather && !root_in_place)
        for (size_t i = 0; i < count; ++i) wrong += block[i] != value(rank, i);
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      seconds[in_place] = t;
      wrongs[in_place] = wrong;
      total_wrong += wrong;
    }
    const size_t root_bytes = count * static_cast<size_t>(n) * sizeof(float);
    const double factor = static_cast<double>(n - 1) / n;
    auto bw = [&](double sec) { return sec > 0 ? static_cast<double>(root_bytes) / sec / 1e9 : 0; };
    if (rank == 0)
      std::printf("%12zu %12zu %8.2f %7.2f %7.2f %6zu %8.2f %7.2f %7.2f %6zu\n", root_bytes, count,
                  seconds[0] * 1e6, bw(seconds[0]), bw(seconds[0]) * factor, wrongs[0],
                  seconds[1] * 1e6, bw(seconds[1]), bw(seconds[1]) * factor, wrongs[1]);
    std::fflush(stdout);
  }
  if (rank == 0)
    std::printf("# Out of bounds values : %zu %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
