#include "schedule/chunking.h"

#include <gtest/gtest.h>

namespace chorus {
namespace {

// Blocks tile [0, count) in order, sizes differ by at most one, larger first.
TEST(Chunking, BlocksTileTheRangeEvenly) {
  for (size_t count : {0u, 1u, 2u, 7u, 10u, 64u, 1000003u})
    for (size_t parts : {1u, 2u, 3u, 4u, 7u, 16u, 1000u}) {
      size_t next = 0, lo = count, hi = 0;
      for (size_t i = 0; i < parts; ++i) {
        const Chunk c = block(count, parts, i);
        EXPECT_EQ(c.offset, next) << count << "/" << parts << " block " << i;
        next = c.end();
        lo = std::min(lo, c.count);
        hi = std::max(hi, c.count);
        if (i > 0) {
          EXPECT_LE(c.count, block(count, parts, i - 1).count);
        }
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(hi - std::min(lo, hi), 1u);
    }
}

TEST(Chunking, ExampleSplit) {
  EXPECT_EQ(block(10, 4, 0), (Chunk{0, 3}));
  EXPECT_EQ(block(10, 4, 1), (Chunk{3, 3}));
  EXPECT_EQ(block(10, 4, 2), (Chunk{6, 2}));
  EXPECT_EQ(block(10, 4, 3), (Chunk{8, 2}));
  EXPECT_EQ(block(2, 4, 3), (Chunk{2, 0}));
}

TEST(Chunking, BlockRangeIsTheUnion) {
  EXPECT_EQ(block_range(10, 4, 1, 2), (Chunk{3, 5}));
  EXPECT_EQ(block_range(10, 4, 0, 4), (Chunk{0, 10}));
  EXPECT_EQ(block_range(10, 4, 2, 0).count, 0u);
}

TEST(Chunking, SegmentsCoverTheChunk) {
  const auto s = segments(Chunk{5, 10}, 4);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], (Chunk{5, 4}));
  EXPECT_EQ(s[1], (Chunk{9, 4}));
  EXPECT_EQ(s[2], (Chunk{13, 2}));
  // An empty chunk still yields one (empty) segment.
  const auto e = segments(Chunk{3, 0}, 4);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].count, 0u);
  EXPECT_EQ(segment_count(0, 4), 1u);
  EXPECT_EQ(segment_count(8, 4), 2u);
  EXPECT_EQ(segment_count(9, 4), 3u);
}

TEST(Chunking, SegmentElementsFromBytes) {
  EXPECT_EQ(segment_elements(0, 4, 1024), 256u);
  EXPECT_EQ(segment_elements(4096, 8, 1024), 512u);
  EXPECT_EQ(segment_elements(2, 8, 1024), 1u);
}

TEST(Chunking, SubBlockIsOffset) {
  EXPECT_EQ(sub_block(Chunk{100, 10}, 4, 1), (Chunk{103, 3}));
}

}  // namespace
}  // namespace chorus
