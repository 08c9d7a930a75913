// chorus-perf's data checker: input values whose exact result is representable
// whatever the reduction order, and a count of the output elements that differ
// from it. Closed forms make the expected value O(1) per element, so that the
// check of a 256 MiB call stays a small fraction of the sweep.
#pragma once

#include "schedule/collective.h"

#include <chorus/types.h>

#include <cstddef>

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

// Writes this rank's input (buffer_counts(...).input elements) into `input`.
void fill_input(const CheckCase& c, void* input);

// Fills `count` elements with a pattern no check value equals (a NaN for the
// float types, 0xA5 bytes otherwise), so that an element left unwritten counts.
void poison(DataType type, void* data, size_t count);

// Number of elements of this rank's output that differ from the exact result
// (0 for ranks that get no output, e.g. non-roots of reduce).
size_t count_wrong(const CheckCase& c, const void* output);

}  // namespace chorus::perf
