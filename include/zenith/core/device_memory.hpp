#pragma once
// Memory on a device other than the CPU, as the core sees it: a table of functions that a
// backend installs (backend/cuda/device_memory.hpp installs the CUDA driver's). The core layer
// allocates, frees and copies arrays through it without depending on any backend; where no
// backend is installed, asking for such memory is a device_error that says so.
#include <atomic>
#include <cstddef>
#include <string>

#include "device.hpp"
#include "error.hpp"

namespace zenith {

struct device_memory {
  // Memory on device d, or with d the CPU, page-locked host memory that transfers to and from
  // the backend's devices run at full speed on (what to(cpu) of a device array returns).
  void* (*allocate)(device d, std::size_t bytes) = nullptr;  // throws device_error on failure
  void (*deallocate)(device d, void* p, std::size_t bytes) = nullptr;
  // Copies bytes from src on device `from` to dst on device `to` (either may be the CPU), and
  // returns when dst holds them.
  void (*copy)(void* dst, device to, void const* src, device from, std::size_t bytes) = nullptr;
};

namespace detail {

// The installed table for CUDA devices (null: none).
inline device_memory const*& cuda_memory_slot() {
  static device_memory const* m = nullptr;
  return m;
}

// Whether any memory has been asked of a device other than the CPU. Until then no array lives
// on one, and the library's internal evaluations skip looking for device arrays (one load).
inline std::atomic<bool>& device_memory_used() {
  static std::atomic<bool> used{false};
  return used;
}

}  // namespace detail

// The memory functions of device d's backend (d is not the CPU).
inline device_memory const& memory_of(device d) {
  device_memory const* m = d.type == device::kind::cuda ? detail::cuda_memory_slot() : nullptr;
  if (!m)
    throw device_error("zenith: memory on " + d.str() + " needs its backend, which this program " +
                       "does not include");
  detail::device_memory_used().store(true, std::memory_order_relaxed);
  return *m;
}

// Installs m as the CUDA devices' memory (null removes it) and returns what was installed, so
// that a test can put a stand-in in place and restore the real one after.
inline device_memory const* install_cuda_memory(device_memory const* m) {
  device_memory const* old = detail::cuda_memory_slot();
  detail::cuda_memory_slot() = m;
  return old;
}

}  // namespace zenith
