// Splitting a vector of elements into blocks and segments. Every algorithm uses
// these, so that uneven splits (count % parts != 0, count < parts, count == 0)
// are handled in exactly one place.
#pragma once

#include <cstddef>
#include <vector>

namespace chorus {

// A contiguous run of elements [offset, offset + count).
struct Chunk {
  size_t offset = 0;
  size_t count = 0;
  size_t end() const { return offset + count; }
  friend bool operator==(const Chunk&, const Chunk&) = default;
};

// Block i of `count` elements split into `parts` nearly equal blocks: the first
// count % parts blocks hold one element more. Blocks are contiguous, in order,
// and cover [0, count) exactly; with count < parts the last blocks are empty.
//   count = 10, parts = 4  ->  [0,3) [3,6) [6,8) [8,10)
Chunk block(size_t count, size_t parts, size_t i);

// The union of blocks [first, first + n) of that split, as one chunk.
Chunk block_range(size_t count, size_t parts, size_t first, size_t n);

// Splits `chunk` into segments of at most `segment` elements (segment >= 1).
// An empty chunk gives one empty segment, so that a pipelined schedule still
// has one step to carry its messages.
std::vector<Chunk> segments(Chunk chunk, size_t segment);

// Number of segments of at most `segment` elements that cover `count` (>= 1).
size_t segment_count(size_t count, size_t segment);

// Segment length in elements for a requested segment size in bytes, at least 1.
size_t segment_elements(size_t segment_bytes, size_t elem_size, size_t default_bytes);

// Sub-chunk of `chunk`: block i of it split into `parts`.
Chunk sub_block(Chunk chunk, size_t parts, size_t i);

}  // namespace chorus

namespace chorus {

// Pipelining segment of the segmented algorithms (trees, chains) when the call
// names none: large enough that the per-message cost alpha is small against
// the segment's transfer time on shared memory and TCP, small enough that a
// pipeline of a few MiB has tens of segments in flight.
inline constexpr size_t kDefaultSegmentBytes = size_t{64} * 1024;

}  // namespace chorus
