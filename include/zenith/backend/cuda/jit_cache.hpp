#pragma once
// The cache of compiled kernels: a bounded in-memory LRU in front of an on-disk cache, both
// keyed by a hash of the kernel's source, the target architecture and NVRTC's version, so that
// a kernel is compiled once per machine rather than once per process.
//
//   zn::cuda_backend::jit_cache cache;                     // ZENITH_CACHE_DIR, else
//   ~/.cache/zenith auto k = cache.get(src.text, src.name, 90);    // memory, else disk, else NVRTC
//
// - A hit in memory costs a hash and a map lookup; no NVRTC call.
// - Disk files are written to a temporary name and renamed into place, so a reader never sees
//   half a file. A file that is truncated, corrupt, or holds another key (checked by its length,
//   a checksum and the key it stores) is not loaded: the kernel is compiled again and the file
//   rewritten.
// - A cache directory that cannot be created or written leaves the memory cache working.
// - Thread-safe. NVRTC runs outside the lock; two threads missing on the same kernel at once
//   may both compile it, and the first to finish is kept.
// - ZENITH_LOG_COMPILES=1 prints one line per compilation to stderr, with its time.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernel_source.hpp"
#include "nvrtc.hpp"

namespace zenith::cuda_backend {

// What a kernel is cached under.
struct cache_key {
  std::uint64_t hash = 0;  // of the source, the architecture and NVRTC's version
  std::string file;        // its disk file's name: the hash in hex and the architecture
  friend bool operator==(cache_key const& a, cache_key const& b) { return a.hash == b.hash; }
};

inline cache_key make_cache_key(std::string_view source, int arch, int nvrtc = nvrtc_version()) {
  std::string salt = "\n// sm_" + std::to_string(arch) + " nvrtc " + std::to_string(nvrtc);
  std::uint64_t h = detail::fnv1a(salt, detail::fnv1a(source));
  return {h, detail::hex64(h) + ".sm" + std::to_string(arch) + ".cubin"};
}

// The cache directory: $ZENITH_CACHE_DIR, else $XDG_CACHE_HOME/zenith, else ~/.cache/zenith
// (empty when none of them is set: memory only).
inline std::filesystem::path default_cache_dir() {
  if (char const* d = std::getenv("ZENITH_CACHE_DIR"); d && *d) return d;
  if (char const* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::filesystem::path(d) / "zenith";
  if (char const* d = std::getenv("HOME"); d && *d)
    return std::filesystem::path(d) / ".cache" / "zenith";
  return {};
}

namespace detail {

// A disk file: a fixed header, then the image.
struct cache_file_header {
  char magic[8] = {'Z', 'N', 'K', 'E', 'R', 'N', 'E', 'L'};
  std::uint32_t format = 1;
  std::uint32_t arch = 0;
  std::uint64_t key = 0;       // cache_key::hash
  std::uint64_t size = 0;      // bytes of image that follow
  std::uint64_t checksum = 0;  // FNV-1a of the image
};

inline std::uint64_t checksum(std::vector<char> const& v) {
  return fnv1a(std::string_view(v.data(), v.size()));
}

// The image stored in path for key, or nothing if the file is missing or not a whole, intact
// file for that key (rejected is set then, except for a missing file).
inline std::shared_ptr<compiled_kernel const> read_cache_file(std::filesystem::path const& path,
                                                              cache_key const& key, int arch,
                                                              bool& rejected) {
  rejected = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  cache_file_header h, want;
  bool ok = bytes.size() >= sizeof h;
  if (ok) std::memcpy(&h, bytes.data(), sizeof h);
  ok = ok && std::memcmp(h.magic, want.magic, sizeof h.magic) == 0 && h.format == want.format &&
       h.key == key.hash && h.arch == std::uint32_t(arch) && h.size == bytes.size() - sizeof h;
  if (!ok) {
    rejected = true;
    return nullptr;
  }
  auto k = std::make_shared<compiled_kernel>();
  k->image.assign(bytes.begin() + sizeof h, bytes.end());
  if (checksum(k->image) != h.checksum) {
    rejected = true;
    return nullptr;
  }
  return k;
}

// Writes the image to path through a temporary file in the same directory; false on failure
// (nothing is left behind).
inline bool write_cache_file(std::filesystem::path const& path, cache_key const& key, int arch,
                             compiled_kernel const& k) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return false;
  cache_file_header h;
  h.arch = std::uint32_t(arch);
  h.key = key.hash;
  h.size = k.image.size();
  h.checksum = checksum(k.image);
  // Unique per process and call, so that concurrent writers never share a temporary file.
  static std::atomic<unsigned> counter{0};
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<char const*>(&h), sizeof h);
    out.write(k.image.data(), std::streamsize(k.image.size()));
    if (!out.flush()) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return !ec;
}

}  // namespace detail

class jit_cache {
 public:
  struct statistics {
    std::size_t memory_hits = 0;
    std::size_t disk_hits = 0;
    std::size_t compiles = 0;
    std::size_t evictions = 0;       // from memory (the disk keeps them)
    std::size_t rejected_files = 0;  // truncated, corrupt or foreign disk files
  };

  // capacity: kernels kept in memory (at least 1). dir: the disk cache ("" for none).
  explicit jit_cache(std::size_t capacity = 256, std::filesystem::path dir = default_cache_dir())
      : capacity_(capacity ? capacity : 1), dir_(std::move(dir)) {}

  // The cubin of source (a kernel named name) for sm_<arch>.
  std::shared_ptr<compiled_kernel const> get(std::string const& source, std::string_view name,
                                             int arch) {
    cache_key key = make_cache_key(source, arch);
    {
      std::lock_guard lock(mutex_);
      if (auto it = index_.find(key.hash); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);  // now the most recent
        ++stats_.memory_hits;
        return it->second->second;
      }
    }
    std::shared_ptr<compiled_kernel const> k;
    bool from_disk = false, rejected = false;
    if (!dir_.empty()) {
      k = detail::read_cache_file(dir_ / key.file, key, arch, rejected);
      from_disk = k != nullptr;
    }
    if (!k) {
      auto t0 = std::chrono::steady_clock::now();
      auto compiled = std::make_shared<compiled_kernel>(nvrtc_compile(source, name, arch));
      if (log_compiles()) {
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        std::fprintf(stderr, "zenith: compiled %.*s for sm_%d in %.1f ms\n", int(name.size()),
                     name.data(), arch, ms);
      }
      if (!dir_.empty()) detail::write_cache_file(dir_ / key.file, key, arch, *compiled);
      k = std::move(compiled);
    }
    std::lock_guard lock(mutex_);
    stats_.rejected_files += rejected;
    if (auto it = index_.find(key.hash); it != index_.end()) {  // another thread was first
      ++stats_.memory_hits;
      return it->second->second;
    }
    ++(from_disk ? stats_.disk_hits : stats_.compiles);
    lru_.emplace_front(key.hash, k);
    index_[key.hash] = lru_.begin();
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
      ++stats_.evictions;
    }
    return k;
  }

  statistics stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
  }
  std::filesystem::path const& directory() const { return dir_; }

 private:
  static bool log_compiles() {
    static bool const on = [] {
      char const* v = std::getenv("ZENITH_LOG_COMPILES");
      return v && *v && std::string_view(v) != "0";
    }();
    return on;
  }

  using entry = std::pair<std::uint64_t, std::shared_ptr<compiled_kernel const>>;
  std::size_t capacity_;
  std::filesystem::path dir_;
  mutable std::mutex mutex_;
  std::list<entry> lru_;  // most recent first
  std::unordered_map<std::uint64_t, std::list<entry>::iterator> index_;
  statistics stats_;
};

}  // namespace zenith::cuda_backend
