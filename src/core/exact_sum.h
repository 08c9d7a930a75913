// Exact sums of floating-point numbers through integers: the arithmetic of
// deterministic reductions (CallOptions::deterministic; the collectives that
// use it are engine/deterministic.cc's, the method and its bound are in
// docs/ALGORITHMS.md, "Deterministic reductions").
//
// Each element becomes an integer on a fixed point (its "fixed form"): the
// value divided by a power of two that depends only on its block's scale.
// Integers add exactly and in any order, so the sum over ranks of the fixed
// forms is the same whatever the algorithm; converting it back rounds once.
//
//   elements  [ x0 ... x63 | x64 ... x127 | ... ]   blocks of kBlock, by the
//              block 0        block 1               element's index in the call
//   scale     the largest exponent of the block over every rank (a max-reduction
//             of one int32 per block); 0 for a block of zeros
//   fixed     q = round(x * 2^(kFraction - exponent of the scale)), |q| <= 2^46
//             (float32, bfloat16); float64 carries 92 bits in two int64 lanes
//             (low 46 bits, then the rest); float16 needs no scale: every
//             float16 is a whole multiple of 2^-24 below 2^16, so q = x * 2^24
//             exactly
//   back      the exact integer sum (times 2^..., divided by the rank count for
//             avg) rounded once to the element type, ties to even
//
// A sum of up to kMaxRanks fixed forms cannot overflow an int64 lane. A value
// more than kExactBinades(type) binades below its block's largest exponent
// loses low bits when it becomes fixed; it loses them the same way on every
// path, so the result still depends only on the contributions.
//
// Infinities and NaNs take no part in the fixed forms: each counts into an
// int64 per element (special_counts), which sums like the rest, and the
// result becomes NaN or an infinity as IEEE summation would make it.
#pragma once

#include <chorus/types.h>

#include <cstddef>
#include <cstdint>

namespace chorus::exact {

// 128-bit integers (a GCC and Clang extension): the exact sums of float64.
__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

// Elements that share a scale. Blocks are counted from the call's element 0,
// so that an element's block, and its result, do not depend on how a call is
// chunked or how long it is beyond the block.
inline constexpr size_t kBlock = 64;
// The most ranks whose fixed forms an int64 lane sums without overflow.
inline constexpr int kMaxRanks = 65536;

// Whether deterministic mode changes how (type, op) reduces: sum and avg on
// the four floating types. Integer types and min and max are already order
// independent, and prod on floats has no fixed form.
bool applies(DataType type, ReduceOp op);
// Whether a deterministic call of `type` may use `op` at all (applies(), or an
// order-independent pair that keeps the ordinary path). prod on a floating
// type is the one it refuses.
bool order_independent(DataType type, ReduceOp op);
// int64 words of one element's fixed form: 2 for float64, else 1.
size_t lanes(DataType type);
// Whether the type's fixed form needs block scales (all but float16).
bool has_scales(DataType type);
// Blocks of elements [0, count).
inline size_t block_count(size_t count) {
  return (count + kBlock - 1) / kBlock;
}
// Binades below a block's largest exponent within which every value of
// `type` is exact in its fixed form (22 float32, 38 bfloat16, 39 float64; all
// of float16's range).
int exact_binades(DataType type);

// scales[b] = max(scales[b], scale of block b of x) for the blocks that
// elements first .. first + count - 1 touch (scales is indexed by the call's
// block: element i is in block i / kBlock). Sets *special where x holds an
// infinity or a NaN (and leaves it otherwise).
void max_scales(DataType type, const void* x, size_t count, size_t first, int32_t* scales,
                bool* special);

// The fixed form of x[0, count) (elements first ...): out gets lanes(type)
// int64 per element; with `accumulate` it is added to what out holds.
// Infinities and NaNs count as 0; `specials` false says x holds none (as
// max_scales found), which spares looking for them.
void to_fixed(DataType type, const void* x, size_t count, size_t first, const int32_t* scales,
              int64_t* out, bool accumulate, bool specials = true);

// Per element, the infinities and NaNs of x as one int64 that sums over
// ranks: +inf counts 1, -inf 2^21, NaN 2^42. With `accumulate`, added.
void special_counts(DataType type, const void* x, size_t count, int64_t* out, bool accumulate);

// out[i] = sums[i] (lanes(type) int64 per element) back in the element type,
// divided by `divisor` (1 for sum, the rank count for avg), rounded once to
// nearest, ties to even. An exact zero is +0; a result beyond the largest
// finite value is an infinity. `specials` (per element, summed
// special_counts; null: none) turn the element into NaN or an infinity.
void from_fixed(DataType type, const int64_t* sums, size_t count, size_t first,
                const int32_t* scales, uint32_t divisor, const int64_t* specials, void* out);

// The deterministic sum of n contributions that lie side by side in `all`
// (contribution r at all + r * count elements), divided by `divisor`, into
// out: bitwise what the max-reduction of scales, the integer sum of fixed
// forms and from_fixed give.
void sum_gathered(DataType type, const void* all, size_t count, int n, uint32_t divisor, void* out);

// Rounds value * 2^exponent / divisor (value an integer of up to 127 bits
// with its sign) once to the nearest of the format with `mantissa_bits`
// stored bits and `exponent_bits`, ties to even; returns its bits. The one
// rounding every path of from_fixed agrees with (exposed for tests).
uint64_t round_to_format(Int128 value, int exponent, uint32_t divisor, int mantissa_bits,
                         int exponent_bits);

}  // namespace chorus::exact
