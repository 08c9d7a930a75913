#include "schedule/chunking.h"

#include "core/check.h"

#include <algorithm>

namespace chorus {

Chunk block(size_t count, size_t parts, size_t i) {
  CHORUS_CHECK(parts > 0);
  CHORUS_CHECK(i < parts);
  const size_t base = count / parts;
  const size_t extra = count % parts;
  // Blocks before i: i of them hold `base`, min(i, extra) hold one more.
  const size_t offset = i * base + std::min(i, extra);
  return {offset, base + (i < extra ? 1 : 0)};
}

Chunk block_range(size_t count, size_t parts, size_t first, size_t n) {
  if (n == 0) return {block(count, parts, std::min(first, parts - 1)).offset, 0};
  const Chunk a = block(count, parts, first);
  const Chunk b = block(count, parts, first + n - 1);
  return {a.offset, b.end() - a.offset};
}

size_t segment_count(size_t count, size_t segment) {
  CHORUS_CHECK(segment > 0);
  return count == 0 ? 1 : (count + segment - 1) / segment;
}

std::vector<Chunk> segments(Chunk chunk, size_t segment) {
  std::vector<Chunk> out;
  const size_t n = segment_count(chunk.count, segment);
  out.reserve(n);
  if (chunk.count == 0) {
    out.push_back(chunk);
    return out;
  }
  for (size_t off = 0; off < chunk.count; off += segment)
    out.push_back({chunk.offset + off, std::min(segment, chunk.count - off)});
  return out;
}

size_t segment_elements(size_t segment_bytes, size_t elem_size, size_t default_bytes) {
  const size_t bytes = segment_bytes ? segment_bytes : default_bytes;
  return std::max<size_t>(1, bytes / std::max<size_t>(1, elem_size));
}

Chunk sub_block(Chunk chunk, size_t parts, size_t i) {
  Chunk b = block(chunk.count, parts, i);
  b.offset += chunk.offset;
  return b;
}

}  // namespace chorus
