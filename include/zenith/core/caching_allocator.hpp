#pragma once
// The caching policy every zenith allocator shares (the CPU's, each CUDA device's): blocks
// recycled by size class, with the statistics tests and benchmarks read (bytes in use, peak,
// number of fresh allocations). Where the memory comes from is a memory_source: the system
// allocator for the CPU, the CUDA driver for a device (backend/cuda/device_memory.hpp).
#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace zenith {

struct memory_stats {
  std::size_t bytes_in_use = 0;        // bytes handed out and not yet returned
  std::size_t peak_bytes = 0;          // highest bytes_in_use since the last reset_peak()
  std::size_t allocations = 0;         // number of allocate() calls (cached or fresh)
  std::size_t system_allocations = 0;  // of those, how many went to the memory source
  std::size_t cached_bytes = 0;        // bytes held in the cache, free for reuse
};

// Where a caching_allocator's blocks come from and go back to.
struct memory_source {
  // A fresh block of `bytes` (a size class), or null when the source has no room.
  void* (*allocate)(std::size_t bytes, void* context) = nullptr;
  void (*release)(void* p, std::size_t bytes, void* context) = nullptr;
  // Throws the source's own error for a request that failed even after the cache was emptied.
  void (*fail)(std::size_t bytes, memory_stats const& s, void* context) = nullptr;
  void* context = nullptr;
};

class caching_allocator {
 public:
  static constexpr std::size_t alignment = 64;  // every size class is a multiple of it

  explicit caching_allocator(memory_source src, std::size_t cache_limit = std::size_t(1) << 31)
      : src_(src), cache_limit_(cache_limit) {}
  caching_allocator(caching_allocator const&) = delete;
  caching_allocator& operator=(caching_allocator const&) = delete;
  ~caching_allocator() { empty_cache(); }

  void* allocate(std::size_t bytes) {
    std::size_t cls = size_class(bytes);
    std::lock_guard lock(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= cls;
      count_locked(cls);
      return p;
    }
    void* p = src_.allocate(cls, src_.context);
    if (!p && stats_.cached_bytes > 0) {  // the cache may hold what the source lacks
      trim_locked();
      p = src_.allocate(cls, src_.context);
    }
    if (!p) {
      if (src_.fail) src_.fail(cls, stats_, src_.context);
      throw std::bad_alloc();
    }
    ++stats_.system_allocations;
    count_locked(cls);
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
  // Returns every cached block to the source.
  void empty_cache() {
    std::lock_guard lock(mu_);
    trim_locked();
  }

  // Small blocks round up to a power of two; large ones to a multiple of 1/16 of their power of
  // two, so a cached block is at most 12.5% bigger than asked.
  static std::size_t size_class(std::size_t bytes) {
    if (bytes < alignment) return alignment;
    std::size_t p = 1;
    while (p < bytes) p <<= 1;
    if (p <= 4096) return p;
    std::size_t step = p / 16;
    return (bytes + step - 1) / step * step;
  }

 private:
  void count_locked(std::size_t cls) {
    ++stats_.allocations;
    stats_.bytes_in_use += cls;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
  }

  void trim_locked() {
    for (auto& [cls, blocks] : free_) {
      for (void* p : blocks) src_.release(p, cls, src_.context);
      stats_.cached_bytes -= cls * blocks.size();
      blocks.clear();
    }
  }

  memory_source src_;
  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;
  memory_stats stats_;
  std::size_t cache_limit_;
};

}  // namespace zenith
