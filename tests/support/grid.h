// The collective test grid, shared by the in-process, shared-memory and TCP
// test suites: the cases, and a runner that compares every rank's output bit
// for bit with the exact expected output.
//
// The test data and the expected outputs are perf/perf_check.h's (small
// integers, exact in every DataType whatever the reduction order; see there),
// computed serially from closed forms, not by chorus. Equality with the
// reference on every rank means all ranks agree bitwise.
#pragma once

#include <chorus/chorus.h>

#include "algorithms/algorithm.h"
#include "schedule/collective.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace chorus::test {

struct GridCase {
  Collective collective;
  size_t count;
  DataType type;
  ReduceOp op;
  int root;
  bool in_place;
  // The call's buffers lie in shared windows (Communicator::window), made
  // for the call by every rank alike.
  bool window = false;
  // CallOptions::deterministic (the deterministic reductions' mode).
  bool deterministic = false;
  std::string describe() const;
};

// Reference outputs shared by the ranks of one process: each distinct expected
// output is computed once (for AllReduce every rank expects the same bytes),
// which keeps the large cases cheap at N = 16. Thread-safe.
class ReferenceCache {
 public:
  std::shared_ptr<const std::vector<std::byte>> get(Collective c, DataType t, ReduceOp op,
                                                    int nranks, int rank, size_t count, int root);

 private:
  using Key = std::tuple<int, int, int, int, int, size_t, int>;
  std::mutex mu_;
  std::map<Key, std::shared_ptr<const std::vector<std::byte>>> entries_;
};

// Runs one case on `comm` with CallOptions{algorithm} and returns "" when the
// output matches the reference, else a description of the first mismatch.
std::string run_case(Communicator& comm, const GridCase& c, const std::string& algorithm,
                     ReferenceCache* cache = nullptr);

// The grid of the foundation issue for one collective at N ranks: counts
// {0, 1, N-1, N+1} x every dtype x every op that applies x in/out of place x a
// few roots, plus `large` (1000003 elements) on a slice of dtype/op pairs.
std::vector<GridCase> grid_cases(Collective c, int nranks, bool include_large);

// `cases` and each of them again with its buffers in shared windows.
std::vector<GridCase> with_window_buffers(const std::vector<GridCase>& cases);
// `cases` and, again in deterministic mode (CallOptions::deterministic),
// each of them that the mode changes: a floating sum or avg of AllReduce,
// ReduceScatter or Reduce. The grid's inputs are small integers, whose sums
// are exact, so the expected outputs are the same.
std::vector<GridCase> with_deterministic(const std::vector<GridCase>& cases);
// Whether `algorithm` runs only where the ranks share windows (one-sided).
bool needs_windows(const Algorithm& algorithm);
// The spec of a grid case on `comm`'s rank, with windows where `comm` has
// them.
CollectiveSpec case_spec(const Communicator& comm, const GridCase& c);

// Runs every case twice on `comm` (two calls per collective on one
// communicator); returns the mismatches found.
std::vector<std::string> run_grid(Communicator& comm, const std::vector<GridCase>& cases,
                                  const std::string& algorithm, ReferenceCache* cache = nullptr);

// Every registered algorithm (barriers aside) over the grid cases of its
// collective that `keep` accepts and it supports, then each barrier
// algorithm twice: what a multi-process job runs on every rank. Prints each
// mismatch ("MISMATCH ...") and "grid: rank R of N, A algorithms, C cases x
// 2 calls, M mismatches"; returns M.
size_t run_every_algorithm(Communicator& comm, bool include_large,
                           const std::function<bool(const GridCase&)>& keep,
                           ReferenceCache* cache = nullptr);

}  // namespace chorus::test
