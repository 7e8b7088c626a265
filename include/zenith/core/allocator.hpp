#pragma once
// A caching allocator for CPU memory: 64-byte aligned blocks, recycled by size class, with the
// statistics tests and benchmarks read (bytes in use, peak, number of fresh allocations).
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace zenith {

struct memory_stats {
  std::size_t bytes_in_use = 0;        // bytes handed out and not yet returned
  std::size_t peak_bytes = 0;          // highest bytes_in_use since the last reset_peak()
  std::size_t allocations = 0;         // number of allocate() calls (cached or fresh)
  std::size_t system_allocations = 0;  // of those, how many went to the system allocator
  std::size_t cached_bytes = 0;        // bytes held in the cache, free for reuse
};

class cpu_allocator {
 public:
  static constexpr std::size_t alignment = 64;

  static cpu_allocator& instance() {
    static cpu_allocator a;  // leaked-by-design order is fine: blocks are freed in the dtor
    return a;
  }

  void* allocate(std::size_t bytes) {
    std::size_t cls = size_class(bytes);
    std::lock_guard lock(mu_);
    ++stats_.allocations;
    stats_.bytes_in_use += cls;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= cls;
      return p;
    }
    ++stats_.system_allocations;
    void* p = std::aligned_alloc(alignment, cls);
    if (!p) {
      stats_.bytes_in_use -= cls;
      throw std::bad_alloc();
    }
    return p;
  }

  void deallocate(void* p, std::size_t bytes) {
    if (!p) return;
    std::size_t cls = size_class(bytes);
    std::lock_guard lock(mu_);
    stats_.bytes_in_use -= cls;
    free_[cls].push_back(p);
    stats_.cached_bytes += cls;
    if (stats_.cached_bytes > cache_limit_) trim_locked();
  }

  memory_stats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard lock(mu_);
    stats_.peak_bytes = stats_.bytes_in_use;
  }
  // Returns every cached block to the system.
  void empty_cache() {
    std::lock_guard lock(mu_);
    trim_locked();
  }

  ~cpu_allocator() { empty_cache(); }

 private:
  cpu_allocator() = default;

  // Small blocks round up to a power of two; large ones to a multiple of 1/8 of their power of
  // two, so a cached block is at most 12.5% bigger than asked.
  static std::size_t size_class(std::size_t bytes) {
    if (bytes < alignment) return alignment;
    std::size_t p = 1;
    while (p < bytes) p <<= 1;
    if (p <= 4096) return p;
    std::size_t step = p / 16;
    return (bytes + step - 1) / step * step;
  }

  void trim_locked() {
    for (auto& [cls, blocks] : free_) {
      for (void* p : blocks) std::free(p);
      stats_.cached_bytes -= cls * blocks.size();
      blocks.clear();
    }
  }

  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;
  memory_stats stats_;
  std::size_t cache_limit_ = std::size_t(1) << 31;
};

// Statistics of the CPU allocator.
inline memory_stats cpu_memory_stats() { return cpu_allocator::instance().stats(); }
inline void reset_peak_memory() { cpu_allocator::instance().reset_peak(); }

}  // namespace zenith
