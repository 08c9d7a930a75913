// Deterministic reductions (CallOptions::deterministic) checked on one
// communicator: every rank runs the same cases, and every result must equal,
// bit for bit, the deterministic sum of the contributions computed on one
// rank without any communication (exact::sum_gathered), whatever the
// algorithm, the number of ranks and the ranks that hold the contributions.
// The in-process test runs it at N = 1 .. 16, mp_check over shm and tcp.
#pragma once

#include <chorus/chorus.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::test {

// Contribution `which` of a set of `contributions`: `count` elements of a
// floating `type` over its whole exponent range, with subnormals, +-0, the
// largest finite values (a set never sums past them) and values that cancel
// another contribution's. The same for every rank and run with the same
// seed.
std::vector<std::byte> wide_values(DataType type, size_t count, uint64_t seed, int which,
                                   int contributions);

struct DeterministicCase {
  Collective collective = Collective::allreduce;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  size_t count = 0;       // the call's count (reduce_scatter: per rank)
  int contributions = 1;  // ranks that hold data; the others hold zeros
  uint64_t seed = 1;
  // Which rank holds contribution j: (j * stride + offset) mod N, with
  // stride coprime to N (a permutation of the ranks).
  int stride = 1;
  int offset = 0;
  bool window = false;  // buffers in shared windows (shm and inproc)
  // The expectation is the deterministic sum of this many elements (of each
  // rank's part, for ReduceScatter; at least count), and the call's result
  // must be its first count elements: the prefix property. Cases of one
  // seed and reference_count with different counts hold the calls of
  // every length to the same bits.
  size_t reference_count = 0;
  std::string describe() const;
};

// Runs `c` on `comm` with every algorithm of its collective that serves the
// integer pass, and with none named; returns each mismatch in words.
std::vector<std::string> check_deterministic(Communicator& comm, const DeterministicCase& c);

// The suite mp_check and the in-process test run at one N: AllReduce,
// ReduceScatter and Reduce, the four floating types, sum (and avg on
// float64), counts 1, N - 1, N + 1 and a prime, contributions on permuted
// ranks; the counts of one collective, type and set of contributions share
// their data and one reference of the longest, so every call is held to the
// prefix property across lengths and roads. Prints nothing; returns the
// mismatches.
std::vector<std::string> check_deterministic_suite(Communicator& comm, bool windows);

}  // namespace chorus::test
