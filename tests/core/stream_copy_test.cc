// Non-temporal copies and reductions (core/stream_copy.h): the bytes are
// those of the ordinary forms at every size around the thresholds where the
// streaming body starts (256 B for a copy, two 4 KiB pieces for a reduction)
// and at every alignment of source and destination, and nothing outside the
// destination is written.
#include "core/stream_copy.h"
#include "core/reduce_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace chorus {
namespace {

// Bytes unique per position and seed, so that a misplaced block cannot pass.
std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 gen(seed);
  for (auto& b : v) b = static_cast<std::byte>(gen());
  return v;
}

constexpr size_t kGuard = 64;

TEST(StreamCopy, EverySizeAndAlignmentAroundTheThresholds) {
  const std::vector<size_t> sizes = {0,   1,   15,  16,  17,   63,   64,   65,   255,
                                     256, 257, 319, 320, 4095, 4096, 8191, 8193, 65536 + 37};
  for (size_t bytes : sizes)
    for (size_t dst_off = 0; dst_off < 17; dst_off += 1)
      for (size_t src_off : {size_t{0}, size_t{3}, size_t{16}}) {
        const auto src = pattern(bytes + src_off, static_cast<uint32_t>(bytes + 7 * src_off));
        const auto before = pattern(bytes + dst_off + 2 * kGuard, 99);
        for (WriteMode mode : {WriteMode::cached, WriteMode::streaming}) {
          auto dst = before;
          copy_bytes(dst.data() + kGuard + dst_off, src.data() + src_off, bytes, mode);
          ASSERT_TRUE(std::equal(src.begin() + static_cast<std::ptrdiff_t>(src_off), src.end(),
                                 dst.begin() + static_cast<std::ptrdiff_t>(kGuard + dst_off)))
              << bytes << " B, dst +" << dst_off << ", src +" << src_off;
          // The bytes around the destination are untouched.
          ASSERT_EQ(std::memcmp(dst.data(), before.data(), kGuard + dst_off), 0);
          ASSERT_EQ(std::memcmp(dst.data() + kGuard + dst_off + bytes,
                                before.data() + kGuard + dst_off + bytes, kGuard),
                    0);
        }
      }
}

TEST(StreamCopy, ALargeCopyIntoUntouchedMemory) {
  const size_t bytes = (size_t{24} << 20) + 11;
  const auto src = pattern(bytes, 5);
  std::vector<std::byte> dst(bytes + 1);
  copy_bytes(dst.data() + 1, src.data(), bytes, WriteMode::streaming);
  EXPECT_EQ(std::memcmp(dst.data() + 1, src.data(), bytes), 0);
  EXPECT_EQ(dst[0], std::byte{0});
}

// Streaming reductions give the bits of the cached form, for every type and
// op, at element counts that leave partial pieces and at unaligned addresses,
// out of place and in place (dst == a).
TEST(StreamCopy, StreamingReductionsMatchTheCachedForm) {
  for (int t = 0; t < kDataTypeCount; ++t)
    for (int o = 0; o < kReduceOpCount; ++o) {
      const auto type = static_cast<DataType>(t);
      const auto op = static_cast<ReduceOp>(o);
      const size_t elem = dtype_size(type);
      for (size_t count : {size_t{1}, 8191 / elem, 8192 / elem + 1, 3 * 4096 / elem + 5}) {
        const size_t bytes = count * elem;
        const size_t off = elem;  // the destination off its alignment by one element
        const auto a = pattern(bytes, static_cast<uint32_t>(t * 31 + o));
        const auto b = pattern(bytes, static_cast<uint32_t>(t * 37 + o + 1));
        std::vector<std::byte> want(bytes), got(bytes + off);
        reduce_into(type, op, want.data(), a.data(), b.data(), count);
        reduce_into(type, op, got.data() + off, a.data(), b.data(), count, WriteMode::streaming);
        ASSERT_EQ(std::memcmp(got.data() + off, want.data(), bytes), 0)
            << to_string(type) << " " << to_string(op) << " count " << count;
        auto in_place = a;
        reduce_into(type, op, in_place.data(), in_place.data(), b.data(), count,
                    WriteMode::streaming);
        ASSERT_EQ(std::memcmp(in_place.data(), want.data(), bytes), 0)
            << "in place: " << to_string(type) << " " << to_string(op) << " count " << count;
      }
    }
}

}  // namespace
}  // namespace chorus
