// MPI_Allreduce sweep with chorus-perf's columns, built once with Open MPI's
// and once with MPICH's mpicxx (see run.sh). float32 sum, out of place and
// in place (MPI_IN_PLACE); time = slowest rank's mean over -n iterations.
#include "compare_common.h"

#include <mpi.h>

#include <algorithm>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const compare::Sweep s = compare::parse_sweep(argc, argv, nullptr);
  const size_t max_count = s.max_bytes / sizeof(float);
  std::vector<float> send(max_count), recv(max_count);
  if (rank == 0) compare::print_header("mpi", n);
  size_t total_wrong = 0;
  for (size_t bytes = s.min_bytes; bytes <= s.max_bytes;
       bytes = std::max(bytes + 1, static_cast<size_t>(static_cast<double>(bytes) * s.factor))) {
    const size_t count = bytes / sizeof(float);
    const int c = static_cast<int>(count);
    compare::Cell cells[2];
    for (int in_place = 0; in_place < 2; ++in_place) {
      auto call = [&] {
        if (in_place)
          MPI_Allreduce(MPI_IN_PLACE, recv.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else
          MPI_Allreduce(send.data(), recv.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      };
      compare::fill(send, count, rank);
      compare::fill(recv, count, rank);
      for (int i = 0; i < s.warmup; ++i) call();
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < s.iters; ++i) call();
      double t = (MPI_Wtime() - t0) / s.iters;
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      // Check one fresh call.
      compare::fill(send, count, rank);
      compare::fill(recv, count, rank);
      call();
      unsigned long long wrong = compare::count_wrong(recv, count, n);
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      cells[in_place] = {t, static_cast<size_t>(wrong)};
      total_wrong += wrong;
    }
    if (rank == 0) compare::print_row(count * sizeof(float), n, cells[0], cells[1]);
  }
  if (rank == 0)
    std::printf("# Out of bounds values : %zu %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
