// Element-wise reduction kernels for every DataType x ReduceOp.
//
// float16 and bfloat16 are widened to float32, combined, and rounded back with
// round-to-nearest-even. Integer sum and prod wrap modulo 2^bits. avg reduces
// as sum; divide_by() is the final pass that turns the sum into the average.
#pragma once

#include "core/stream_copy.h"

#include <chorus/types.h>

#include <cstddef>
#include <cstdint>

namespace chorus {

// dst[i] = a[i] (+) b[i] for i < count. dst may equal a or b (exactly, not a
// partial overlap).
void reduce_into(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count);
// The same, writing dst as `store` says (core/stream_copy.h): streaming
// reduces cache-sized pieces into a buffer of its own and streams each out,
// so the results are bitwise those of the cached form.
void reduce_into(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count,
                 WriteMode store);

// dst[i] = dst[i] / n (integers truncate toward zero), for avg.
void divide_by(DataType type, void* dst, size_t count, size_t n);

// Scalar conversions, exposed for tests and for building test data.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);  // round to nearest even

}  // namespace chorus
