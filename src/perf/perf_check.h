// Exact test data for collectives, the one implementation chorus-perf's
// checks and the test grid (tests/support/grid.h) share: input values whose
// exact result is representable whatever the reduction order, the expected
// output of every rank, and a count of the output elements that differ from
// it. Closed forms make the expected value O(1) per element (O(N) for min and
// max), so that the check of a 256 MiB call stays a small fraction of the
// sweep.
//
// Inputs are small integers that depend on (rank, element):
//   sum, avg: (i + r) mod m, m = 61 for the integer types (they wrap, which is
//             exact in any order) and for the float types the largest m <= 61
//             with N (m-1) below the type's exact-integer limit;
//   prod:     2 where (i + r) % P == 0, else 1 (P = 4, wider above N = 60 so
//             that the product stays <= 2^15);
//   min, max and the collectives that do not reduce: (37 r + 11 i + 5) mod 101.
#pragma once

#include "schedule/collective.h"

#include <chorus/types.h>

#include <cstddef>
#include <vector>

namespace chorus::perf {

// What one rank's check is about: the call as chorus-perf issues it.
struct CheckCase {
  Collective collective = Collective::allreduce;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int nranks = 1;
  int rank = 0;
  size_t count = 0;  // as the API counts it (per rank block where blocked)
  int root = 0;
};

// Element i of rank `rank`'s input, as a double holding a small integer.
double input_value(const CheckCase& c, int rank, size_t i);

// Writes this rank's input (buffer_counts(...).input elements) into `input`.
void fill_input(const CheckCase& c, void* input);

// Fills `count` elements with a pattern that an element left unwritten keeps:
// a NaN for the float types (no check value equals it), 0xA5 bytes otherwise
// (no check value of the wider integers; a wrapped 8-bit sum can be 0xA5).
void poison(DataType type, void* data, size_t count);

// This rank's exact output (buffer_counts(...).output elements, as bytes of
// the type); empty for ranks that get no output (non-roots of reduce).
std::vector<std::byte> expected_output(const CheckCase& c);

// Number of elements of this rank's output that differ, bit for bit, from the
// exact result (0 for ranks that get no output).
size_t count_wrong(const CheckCase& c, const void* output);

}  // namespace chorus::perf
