// Copies that bypass the caches, for outputs too large to stay cached.
//
// A store to a line that is not in the cache first reads the line from memory
// (write-allocate), so writing M bytes of untouched output moves 2M bytes
// through DRAM. A non-temporal store writes whole lines without reading them,
// and leaves the caches to the data the call still reads. What it costs: the
// line is not in the cache afterwards, so it pays only where the output is
// larger than the caches could hold anyway (WriteMode::streaming is chosen per
// call by size: exec/executor.h, CHORUS_STREAM_BYTES).
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus {

// How a kernel writes its destination.
enum class WriteMode : uint8_t {
  cached,     // ordinary stores
  streaming,  // non-temporal stores for the aligned body, ordered before return
};

// dst[0, bytes) = src[0, bytes). The ranges must not overlap. With
// WriteMode::streaming the body is written with non-temporal stores and a store
// fence ends the copy, so that a flag or index published after it (a release
// store) is seen after the data by every other core, as after memcpy.
void copy_bytes(void* dst, const void* src, size_t bytes, WriteMode store);

namespace detail {
// The streaming body of copy_bytes without its fence, for kernels that write
// a destination piece by piece (reduce_kernels.cc) and fence once at the end.
void stream_bytes(void* dst, const void* src, size_t bytes);
// Orders the non-temporal stores before it before every later store.
void store_fence();
}  // namespace detail

}  // namespace chorus
