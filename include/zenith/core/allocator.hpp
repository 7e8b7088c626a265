#pragma once
// The CPU's caching allocator (core/caching_allocator.hpp): 64-byte aligned blocks from the
// system allocator.
#include <cstddef>
#include <cstdlib>
#include <new>

#include "caching_allocator.hpp"

namespace zenith {

class cpu_allocator {
 public:
  static constexpr std::size_t alignment = caching_allocator::alignment;

  static caching_allocator& instance() {
    static caching_allocator a(memory_source{&system_allocate, &system_release, &out_of_memory});
    return a;
  }

 private:
  static void* system_allocate(std::size_t bytes, void*) {
    return std::aligned_alloc(alignment, bytes);  // bytes: a size class, a multiple of 64
  }
  static void system_release(void* p, std::size_t, void*) { std::free(p); }
  [[noreturn]] static void out_of_memory(std::size_t, memory_stats const&, void*) {
    throw std::bad_alloc();
  }
};

// Statistics of the CPU allocator.
inline memory_stats cpu_memory_stats() { return cpu_allocator::instance().stats(); }
inline void reset_peak_memory() { cpu_allocator::instance().reset_peak(); }

}  // namespace zenith
