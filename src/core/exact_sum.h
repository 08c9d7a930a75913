// Exact sums of floating-point numbers through integers: the arithmetic of
// deterministic reductions (CallOptions::deterministic; the collectives that
// use it are engine/deterministic.cc's, the method and its bound are in
// docs/ALGORITHMS.md, "Deterministic reductions").
//
// Each element becomes an integer on a fixed point (its "fixed form"): the
// value divided by a power of two that depends only on that element's own
// scale, the largest exponent among its contributions over all ranks.
// Integers add exactly and in any order, so the sum over ranks of the fixed
// forms is the same whatever the algorithm; converting it back rounds once.
//
//   scale     one uint8 per element: the largest exponent code of the
//             element over every rank (an AllReduce(max) of uint8, a quarter
//             of float32's bytes); float32 and bfloat16 code the exponent
//             field (0 for zero and subnormals), float64 its top 8 bits
//             (field / 8); float16 needs none
//   fixed     q = round(x * 2^(kFraction - exponent of the scale)), |q| < 2^46
//             (float32, bfloat16); float64 carries 92 bits in two int64 lanes
//             (low 46 bits, then the rest); float16 q = x * 2^24 exactly
//             (every float16 is a whole multiple of 2^-24 below 2^16)
//   back      the exact integer sum (times 2^..., divided by the rank count for
//             avg) rounded once to the element type, ties to even
//
// An element's result is a function of its own contributions only: nothing
// of another element (its neighbours, the call's length, how it is cut)
// reaches it. A sum of up to kMaxRanks fixed forms cannot overflow an int64
// lane. A contribution more than exact_binades(type) binades below the
// element's largest loses low bits when it becomes fixed; it loses them the
// same way on every path.
//
// Infinities and NaNs take no part in the fixed forms (their scale code is
// 0): each counts into an int64 per element (special_counts), which sums like
// the rest, and the result becomes NaN or an infinity as IEEE summation would
// make it.
#pragma once

#include <chorus/types.h>

#include <cstddef>
#include <cstdint>

namespace chorus::exact {

// 128-bit integers (a GCC and Clang extension): the exact sums of float64.
__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

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
// Whether the type's fixed form needs scales (all but float16).
bool has_scales(DataType type);
// Binades below an element's largest contribution within which every value
// of `type` is exact in its fixed form (22 float32, 38 bfloat16, 32 float64;
// all of float16's range).
int exact_binades(DataType type);

// scales[i] = max(scales[i], scale code of x[i]) for i in [0, count) (one
// uint8 per element; nothing for float16). Sets *special where x holds an
// infinity or a NaN (and leaves it otherwise).
void max_scales(DataType type, const void* x, size_t count, uint8_t* scales, bool* special);

// The fixed form of x[0, count) on the grids of scales[0, count): out gets
// lanes(type) int64 per element; with `accumulate` it is added to what out
// holds. Infinities and NaNs count as 0; `specials` false says x holds none
// (as max_scales found), which spares looking for them. scales may be null
// for float16.
void to_fixed(DataType type, const void* x, size_t count, const uint8_t* scales, int64_t* out,
              bool accumulate, bool specials = true);

// Per element, the infinities and NaNs of x as one int64 that sums over
// ranks: +inf counts 1, -inf 2^21, NaN 2^42. With `accumulate`, added.
void special_counts(DataType type, const void* x, size_t count, int64_t* out, bool accumulate);

// out[i] = sums[i] (lanes(type) int64 per element) back in the element type
// on the grid of scales[i], divided by `divisor` (1 for sum, the rank count
// for avg), rounded once to nearest, ties to even. An exact zero is +0; a
// result beyond the largest finite value is an infinity. `specials` (per
// element, summed special_counts; null: none) turn the element into NaN or an
// infinity.
void from_fixed(DataType type, const int64_t* sums, size_t count, const uint8_t* scales,
                uint32_t divisor, const int64_t* specials, void* out);

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
