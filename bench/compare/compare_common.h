// Shared by the MPI and Gloo comparison programs: the sweep flags (-b -e -f -n
// -w, as chorus-perf spells them), float32-sum test data whose sum is exact,
// and a row printer with chorus-perf's (nccl-tests') columns, so that run.sh
// reads every system's output the same way.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace compare {

struct Sweep {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{32} << 20;
  double factor = 2;
  int iters = 20;
  int warmup = 5;
};

inline size_t parse_size(const char* s) {
  char* end = nullptr;
  size_t v = std::strtoull(s, &end, 10);
  if (*end == 'K') v <<= 10;
  if (*end == 'M') v <<= 20;
  if (*end == 'G') v <<= 30;
  return v;
}

// Reads -b -e -f -n -w; leaves other arguments to the caller.
inline Sweep parse_sweep(int argc, char** argv, std::vector<std::string>* rest) {
  Sweep s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "-b" && has_value)
      s.min_bytes = parse_size(argv[++i]);
    else if (a == "-e" && has_value)
      s.max_bytes = parse_size(argv[++i]);
    else if (a == "-f" && has_value)
      s.factor = std::atof(argv[++i]);
    else if (a == "-n" && has_value)
      s.iters = std::atoi(argv[++i]);
    else if (a == "-w" && has_value)
      s.warmup = std::atoi(argv[++i]);
    else if (rest)
      rest->push_back(a);
  }
  if (s.factor <= 1) s.factor = 2;
  if (s.iters < 1) s.iters = 1;
  if (s.min_bytes < sizeof(float)) s.min_bytes = sizeof(float);
  return s;
}

// (i + r) mod 61: the sum over N ranks is an exact integer in float32.
inline float input_value(int rank, size_t i) {
  return static_cast<float>((i + static_cast<size_t>(rank)) % 61);
}
inline float expected_sum(int nranks, size_t i) {
  double s = 0;
  for (int r = 0; r < nranks; ++r) s += input_value(r, i);
  return static_cast<float>(s);
}
inline void fill(std::vector<float>& v, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) v[i] = input_value(rank, i);
}
inline size_t count_wrong(const std::vector<float>& v, size_t count, int nranks) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += v[i] != expected_sum(nranks, i);
  return wrong;
}

inline void print_header(const char* system, int nranks) {
  std::printf("# %s allreduce float32 sum, %d ranks\n", system, nranks);
  std::printf("#%11s %12s %9s %6s %5s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "type",
              "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
              "#wrong");
}

struct Cell {
  double seconds = 0;
  size_t wrong = 0;
};

inline void print_row(size_t bytes, int nranks, const Cell& oop, const Cell& ip) {
  const double factor = 2.0 * (nranks - 1) / nranks;  // nccl-tests' allreduce busbw
  auto bw = [&](const Cell& c) {
    return c.seconds > 0 ? static_cast<double>(bytes) / c.seconds / 1e9 : 0;
  };
  std::printf("%12zu %12zu %9s %6s %5d %8.2f %7.2f %7.2f %6zu %8.2f %7.2f %7.2f %6zu\n", bytes,
              bytes / sizeof(float), "float32", "sum", -1, oop.seconds * 1e6, bw(oop),
              bw(oop) * factor, oop.wrong, ip.seconds * 1e6, bw(ip), bw(ip) * factor, ip.wrong);
  std::fflush(stdout);
}

}  // namespace compare
