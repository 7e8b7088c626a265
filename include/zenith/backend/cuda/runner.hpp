#pragma once
// The kernel runner of a build with NVRTC (backend/cuda/launch.hpp): a generated kernel is
// compiled for the device's architecture through the kernel cache (jit_cache.hpp: memory, then
// disk, then NVRTC), loaded into the device's context once, and launched with cuLaunchKernel on
// the default stream, where the copies and the allocator's reuse are ordered too
// (device_memory.hpp). Installed by the program's first zenith::cuda(i) where this header is
// included, which zenith/zenith.hpp does where the build defines ZENITH_WITH_NVRTC (the
// zenith::zenith target does when ZENITH_CUDA is on).
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "device_memory.hpp"
#include "jit_cache.hpp"
#include "launch.hpp"

namespace zenith::cuda_backend {

// The process's kernel cache (ZENITH_CACHE_DIR, see jit_cache.hpp).
inline jit_cache& kernel_cache() {
  static jit_cache c;
  return c;
}

namespace detail {

inline constexpr int attribute_sm_count = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
inline constexpr int attribute_cc_major = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
inline constexpr int attribute_cc_minor = 76;  // ..._MINOR

struct device_facts {
  int arch = 0;  // 10 * major + minor: 80 for A100, 90 for H100
  int sm_count = 0;
};

inline device_facts facts_of(int index) {
  static std::mutex mu;
  static std::map<int, device_facts> known;
  std::lock_guard lock(mu);
  if (auto it = known.find(index); it != known.end()) return it->second;
  device_state& s = state_of(index);
  driver_api const& d = driver();
  int major = 0, minor = 0, sms = 0;
  std::string where = s.context.where() + ": cuDeviceGetAttribute";
  if (int r = d.device_get_attribute(&major, attribute_cc_major, s.ordinal); r != 0) fail(where, r);
  if (int r = d.device_get_attribute(&minor, attribute_cc_minor, s.ordinal); r != 0) fail(where, r);
  if (int r = d.device_get_attribute(&sms, attribute_sm_count, s.ordinal); r != 0) fail(where, r);
  return known[index] = device_facts{10 * major + minor, std::max(sms, 1)};
}

// Kernel k's function in device index's context: compiled (or found in the cache) and loaded
// on first use, then kept for the life of the process.
inline void* function_of(int index, kernel_source const& k, int arch) {
  static std::mutex mu;
  static std::map<std::pair<int, std::string>, void*> loaded;
  {
    std::lock_guard lock(mu);
    if (auto it = loaded.find({index, k.name}); it != loaded.end()) return it->second;
  }
  auto image = kernel_cache().get(k.text, k.name, arch);  // NVRTC outside the lock
  device_state& s = state_of(index);
  s.context.make_current();
  driver_api const& d = driver();
  void* module = nullptr;
  void* function = nullptr;
  if (int r = d.module_load_data(&module, image->image.data()); r != 0)
    fail(s.context.where() + ": cuModuleLoadData of " + k.name, r);
  if (int r = d.module_get_function(&function, module, k.name.c_str()); r != 0)
    fail(s.context.where() + ": cuModuleGetFunction " + k.name, r);
  std::lock_guard lock(mu);
  return loaded.emplace(std::make_pair(index, k.name), function).first->second;
}

inline void run_on_driver(device dev, kernel_source const& k, kernel_args& a,
                          launch_shape const& shape) {
  device_facts f = facts_of(dev.index);
  void* function = function_of(dev.index, k, f.arch);
  // Grid-stride kernels: enough blocks to fill the device several times over, no more.
  auto grid = unsigned(std::clamp<std::int64_t>(shape.blocks, 1, std::int64_t(f.sm_count) * 32));
  state_of(dev.index).context.make_current();
  auto params = a.pointers();
  if (int r = driver().launch_kernel(function, grid, 1, 1, shape.block, 1, 1, 0, nullptr,
                                     params.data(), nullptr);
      r != 0)
    fail(dev.str() + ": cuLaunchKernel " + k.name, r);
}

inline constexpr kernel_runner driver_runner{&run_on_driver};

// Installed by the first zenith::cuda(i) (device_memory.hpp).
template <class I>
void install_runtime(kernel_runtime, I, int) {
  if (!runner_slot()) install_kernel_runner(&driver_runner);
}

}  // namespace detail

}  // namespace zenith::cuda_backend
