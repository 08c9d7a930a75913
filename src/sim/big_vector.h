// BigVector: a std::vector whose large arrays live in huge-page mappings, for
// the simulator's per-op arrays (simulator.cc).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace chorus::sim_internal {

// Storage for the run's big per-op arrays (hundreds of MB at millions of
// ops): whole 2 MiB-aligned mappings that the kernel is asked to back with
// huge pages, since the run reaches into them at random and a 4 KiB page per
// access would miss the TLB nearly every time. Small arrays use the heap.
template <class T>
struct BigAllocator {
  using value_type = T;
  static constexpr size_t kHuge = size_t{2} << 20;

  BigAllocator() = default;
  template <class U>
  BigAllocator(const BigAllocator<U>&) {}

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge) return std::allocator<T>().allocate(n);
    const size_t size = round_up(bytes);
    // Map a huge page more than needed, then trim to an aligned range.
    void* p =
        mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const auto at = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (at + kHuge - 1) & ~(kHuge - 1);
    if (aligned > at) munmap(p, aligned - at);
    if (aligned + size < at + size + kHuge)
      munmap(reinterpret_cast<void*>(aligned + size), at + size + kHuge - (aligned + size));
#ifdef MADV_HUGEPAGE
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
#endif
    return reinterpret_cast<T*>(aligned);
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge)
      std::allocator<T>().deallocate(p, n);
    else
      munmap(p, round_up(bytes));
  }
  template <class U>
  bool operator==(const BigAllocator<U>&) const {
    return true;
  }

 private:
  static size_t round_up(size_t bytes) {
    return (bytes + kHuge - 1) & ~(kHuge - 1);
  }
};
template <class T>
using BigVector = std::vector<T, BigAllocator<T>>;

}  // namespace chorus::sim_internal
