#pragma once
// Memory on CUDA devices: each device's caching allocator (core/caching_allocator.hpp, the same
// policy and statistics as the CPU's) over the driver's cuMemAlloc, and copies between devices
// and the host. Installed as the core's CUDA memory (core/device_memory.hpp) when a program first
// asks for a device, zenith::cuda(i), defined here.
//
//   zn::array<float> a = x.to(zn::cuda(0));     // host -> device
//   zn::array<float> h = a.to(zn::cpu);         // device -> host, into page-locked memory
//   zn::memory_stats s = zn::cuda_memory_stats(0);
//
// Work on a device runs on one stream, the driver's default, in order; so a block freed into the
// cache may be handed out again at once: whatever reads it later is ordered after whatever used
// it before.
#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "../../core/caching_allocator.hpp"
#include "../../core/device_memory.hpp"
#include "driver.hpp"

namespace zenith {

namespace cuda_backend {

inline constexpr int max_devices = 64;

namespace detail {

[[noreturn]] inline void fail(std::string const& what, int r) {
  throw device_error(what + " failed (" + detail::driver_error_text(driver(), r) + ")");
}

// Device i's primary context, retained on first use and made current on the calling thread
// before each driver call.
struct device_context {
  int index = 0;
  driver_api::context ctx = nullptr;

  void make_current() const {
    if (int r = driver().ctx_set_current(ctx); r != 0) fail(where() + ": cuCtxSetCurrent", r);
  }
  std::string where() const { return "cuda:" + std::to_string(index); }
};

inline constexpr int out_of_memory = 2;  // CUDA_ERROR_OUT_OF_MEMORY

inline driver_api::deviceptr dptr(void const* p) {
  return static_cast<driver_api::deviceptr>(reinterpret_cast<std::uintptr_t>(p));
}

inline void* device_allocate(std::size_t bytes, void* c) {
  auto const& dc = *static_cast<device_context const*>(c);
  dc.make_current();
  driver_api::deviceptr p = 0;
  int r = driver().mem_alloc(&p, bytes);
  if (r == out_of_memory) return nullptr;  // the caching allocator empties its cache and retries
  if (r != 0) fail(dc.where() + ": cuMemAlloc of " + std::to_string(bytes) + " bytes", r);
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));  // dptr's inverse
}

inline void device_release(void* p, std::size_t, void* c) {
  auto const& dc = *static_cast<device_context const*>(c);
  if (driver().ctx_set_current(dc.ctx) != 0) return;  // called from destructors: never throws
  driver().mem_free(dptr(p));
}

[[noreturn]] inline void device_out_of_memory(std::size_t bytes, memory_stats const& s, void* c) {
  auto const& dc = *static_cast<device_context const*>(c);
  std::size_t free = 0, total = 0;
  driver().mem_get_info(&free, &total);
  throw device_error(dc.where() + ": out of memory: " + std::to_string(bytes) +
                     " bytes requested, " + std::to_string(s.bytes_in_use) + " in use by zenith, " +
                     std::to_string(free) + " free of " + std::to_string(total));
}

struct device_state {
  device_context context;
  int ordinal = 0;  // the driver's CUdevice
  std::unique_ptr<caching_allocator> allocator;
};

// Device i's state, made on first use (cuda(i) has checked that the device exists). Every
// allocation and copy asks for it, so only its making takes the lock.
inline device_state& state_of(int index) {
  static std::array<std::atomic<device_state*>, max_devices> states{};
  static std::mutex mu;
  if (index < 0 || index >= max_devices)
    throw device_error("cuda:" + std::to_string(index) + ": zenith handles devices 0 to " +
                       std::to_string(max_devices - 1));
  auto& slot = states[std::size_t(index)];
  if (device_state* made = slot.load(std::memory_order_acquire)) return *made;
  std::lock_guard lock(mu);
  if (device_state* made = slot.load(std::memory_order_relaxed)) return *made;
  driver_api const& d = driver();
  if (!d.missing.empty()) throw device_error("cuda:" + std::to_string(index) + ": " + d.missing);
  auto made = std::make_unique<device_state>();
  made->context.index = index;
  int& dev = made->ordinal;
  if (int r = d.device_get(&dev, index); r != 0) fail(made->context.where() + ": cuDeviceGet", r);
  if (int r = d.primary_ctx_retain(&made->context.ctx, dev); r != 0)
    fail(made->context.where() + ": cuDevicePrimaryCtxRetain", r);
  made->allocator = std::make_unique<caching_allocator>(
      memory_source{&device_allocate, &device_release, &device_out_of_memory, &made->context});
  // Owned here and destroyed at exit, when its allocator gives its cache back to the driver.
  static std::array<std::unique_ptr<device_state>, max_devices> owned;
  device_state* p = made.get();
  owned[std::size_t(index)] = std::move(made);
  slot.store(p, std::memory_order_release);
  return *p;
}

// Page-locked host memory, portable to every context (CU_MEMHOSTALLOC_PORTABLE), cached as
// device memory is; allocated while device 0's context is current (one must be).
inline void* host_allocate(std::size_t bytes, void*) {
  state_of(0).context.make_current();
  void* p = nullptr;
  int r = driver().mem_host_alloc(&p, bytes, 0x01);
  if (r == out_of_memory) return nullptr;
  if (r != 0) fail("cuMemHostAlloc of " + std::to_string(bytes) + " bytes", r);
  return p;
}
inline void host_release(void* p, std::size_t, void*) { driver().mem_free_host(p); }
[[noreturn]] inline void host_out_of_memory(std::size_t bytes, memory_stats const& s, void*) {
  throw device_error("zenith: out of page-locked host memory: " + std::to_string(bytes) +
                     " bytes requested, " + std::to_string(s.bytes_in_use) + " in use");
}
inline caching_allocator& pinned_allocator() {
  static caching_allocator a(memory_source{&host_allocate, &host_release, &host_out_of_memory});
  return a;
}

inline void* allocate(device d, std::size_t bytes) {
  if (d == cpu) return pinned_allocator().allocate(bytes);
  return state_of(d.index).allocator->allocate(bytes);
}
inline void deallocate(device d, void* p, std::size_t bytes) {
  if (d == cpu) return pinned_allocator().deallocate(p, bytes);
  state_of(d.index).allocator->deallocate(p, bytes);
}

inline void copy(void* dst, device to, void const* src, device from, std::size_t bytes) {
  driver_api const& drv = driver();
  int r = 0;
  std::string what;
  if (from == cpu) {
    state_of(to.index).context.make_current();
    r = drv.memcpy_htod(dptr(dst), src, bytes);
    what = "copy to " + to.str();
  } else if (to == cpu) {
    state_of(from.index).context.make_current();
    r = drv.memcpy_dtoh(dst, dptr(src), bytes);
    what = "copy from " + from.str();
  } else if (to == from) {
    state_of(to.index).context.make_current();
    r = drv.memcpy_dtod(dptr(dst), dptr(src), bytes);
    what = "copy on " + to.str();
  } else {
    auto& a = state_of(to.index);
    auto& b = state_of(from.index);
    a.context.make_current();
    r = drv.memcpy_peer(dptr(dst), a.context.ctx, dptr(src), b.context.ctx, bytes);
    what = "copy from " + from.str() + " to " + to.str();
  }
  if (r != 0) fail(what + " of " + std::to_string(bytes) + " bytes", r);
}

inline constexpr device_memory driver_memory{&allocate, &deallocate, &copy};

// Installs the driver's memory as the CUDA devices' unless another is installed (a test's
// stand-in). zenith::cuda(i) calls it: a program that never names a device does not compile it.
inline void install_driver_memory() {
  if (!zenith::detail::cuda_memory_slot()) install_cuda_memory(&driver_memory);
}

// What runs work on a device (kernels compiled by NVRTC and launched by the driver, GEMMs by
// cuBLAS, convolutions by cuDNN) is installed by the program's first zenith::cuda(i), through an
// overload of install_runtime that each one's header adds for its tag (runner.hpp, cublas.hpp,
// cudnn.hpp). zenith::cuda is a template so that those overloads are found where it is used, after
// every header: a program that never asks for a device compiles none of their code (it was a
// third of a small program's build), and one built without a library (no NVRTC) finds only the
// fallback below, which installs nothing.
struct kernel_runtime {};
struct blas_runtime {};
struct conv_runtime {};
template <class Tag, class I>
void install_runtime(Tag, I, long) {}

// Device i, checked: what zenith::cuda(i) does besides installing.
inline device open_device(int index) {
  std::string where = "zenith::cuda(" + std::to_string(index) + "): ";
  driver_api const& d = driver();
  if (!d.missing.empty()) throw device_error(where + d.missing);
  int n = 0;
  if (int r = d.device_count(&n); r != 0)
    throw device_error(where + "cannot count devices (" + driver_error_text(d, r) + ")");
  if (index < 0 || index >= n)
    throw device_error(where + (n == 0 ? std::string("no CUDA device on this machine")
                                       : "there are " + std::to_string(n) + " CUDA devices"));
  install_driver_memory();
  return device{device::kind::cuda, index};
}

}  // namespace detail

}  // namespace cuda_backend

// CUDA device i. Throws device_error, with a one-line message, when there is no usable driver or
// no device i. The first call installs what runs work on devices (above; before the checks, so
// that it is in place whether or not this machine has a device) and the driver's memory for
// arrays on them.
template <std::integral I = int>
device cuda(I index = 0) {
  namespace cd = cuda_backend::detail;
  install_runtime(cd::kernel_runtime{}, index, 0);
  install_runtime(cd::blas_runtime{}, index, 0);
  install_runtime(cd::conv_runtime{}, index, 0);
  return cd::open_device(int(index));
}

// Waits until every kernel launched on device d has finished (launches return at once; copies
// to and from the host wait by themselves). For timing, and before reading device memory that
// code outside zenith wrote.
inline void synchronize(device d) {
  if (d == cpu) return;
  auto& s = cuda_backend::detail::state_of(d.index);
  s.context.make_current();
  if (int r = cuda_backend::driver().ctx_synchronize(); r != 0)
    cuda_backend::detail::fail(d.str() + ": cuCtxSynchronize", r);
}

// The statistics of the page-locked host memory that to(zenith::cpu) of device arrays returns.
inline memory_stats pinned_memory_stats() {
  return cuda_backend::detail::pinned_allocator().stats();
}

// The caching allocator statistics of CUDA device i (zeros before it is first used).
inline memory_stats cuda_memory_stats(int index) {
  (void)cuda(index);  // a device_error, one line, where there is no such device
  return cuda_backend::detail::state_of(index).allocator->stats();
}

}  // namespace zenith
