#include "core/stream_copy.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace chorus {

namespace detail {

void stream_bytes(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  {
    auto* d = static_cast<std::byte*>(dst);
    const auto* s = static_cast<const std::byte*>(src);
    // Ordinary stores up to the first 16-byte boundary of dst, non-temporal
    // ones (SSE2, which every x86-64 has) for the whole 64-byte lines after
    // it, and ordinary ones for the tail.
    const size_t head = std::min(bytes, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & size_t{15});
    std::memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= bytes; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    std::memcpy(d + i, s + i, bytes - i);
  }
#else
  std::memcpy(dst, src, bytes);
#endif
}

void store_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace detail

void copy_bytes(void* dst, const void* src, size_t bytes, WriteMode store) {
  // Below a few lines the fence costs more than the read it saves.
  constexpr size_t kMinStreaming = 256;
  if (store == WriteMode::streaming && bytes >= kMinStreaming) {
    detail::stream_bytes(dst, src, bytes);
    detail::store_fence();
  } else if (bytes > 0) {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace chorus
