#pragma once
// zenith::cuda(i), and the CUDA driver it needs, loaded at run time.
//
//   zn::device dev = zn::cuda(0);   // device_error, one line, where there is no GPU or driver
//
// The driver (libcuda.so.1) comes with the GPU's kernel driver, not with the toolkit, so zenith
// never links it: it is opened with dlopen on first use. A program using zenith then starts
// on any machine, and asking for a GPU where there is none is an error that says why, not a
// loader failure. This header needs no CUDA header or library.
#include <dlfcn.h>

#include <cstddef>
#include <string>
#include <type_traits>

#include "../../core/device.hpp"
#include "../../core/error.hpp"

namespace zenith {

namespace cuda_backend {

// The driver entry points zenith uses (CUresult is an int; CUdevice an int).
struct driver_api {
  using result = int;
  result (*init)(unsigned flags) = nullptr;
  result (*device_count)(int* count) = nullptr;
  result (*error_name)(result r, char const** name) = nullptr;
  result (*error_string)(result r, char const** text) = nullptr;
  // Contexts and memory (CUcontext is a pointer, CUdeviceptr a 64-bit integer).
  using context = void*;
  using deviceptr = unsigned long long;
  result (*device_get)(int* dev, int ordinal) = nullptr;
  result (*primary_ctx_retain)(context* ctx, int dev) = nullptr;
  result (*ctx_set_current)(context ctx) = nullptr;
  result (*ctx_synchronize)() = nullptr;
  result (*mem_alloc)(deviceptr* p, std::size_t bytes) = nullptr;
  result (*mem_free)(deviceptr p) = nullptr;
  result (*mem_get_info)(std::size_t* free, std::size_t* total) = nullptr;
  result (*mem_host_alloc)(void** p, std::size_t bytes, unsigned flags) = nullptr;
  result (*mem_free_host)(void* p) = nullptr;
  result (*memcpy_htod)(deviceptr dst, void const* src, std::size_t bytes) = nullptr;
  result (*memcpy_dtoh)(void* dst, deviceptr src, std::size_t bytes) = nullptr;
  result (*memcpy_dtod)(deviceptr dst, deviceptr src, std::size_t bytes) = nullptr;
  result (*memcpy_peer)(deviceptr dst, context dst_ctx, deviceptr src, context src_ctx,
                        std::size_t bytes) = nullptr;
  // Kernels (CUmodule and CUfunction are pointers; a null stream is the default one).
  result (*device_get_attribute)(int* value, int attribute, int dev) = nullptr;
  result (*module_load_data)(void** module, void const* image) = nullptr;
  result (*module_get_function)(void** function, void* module, char const* name) = nullptr;
  result (*launch_kernel)(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                          unsigned block_x, unsigned block_y, unsigned block_z,
                          unsigned shared_bytes, void* stream, void** params,
                          void** extra) = nullptr;
  std::string missing;  // why the driver is unusable; empty when it is usable
};

namespace detail {

inline std::string driver_error_text(driver_api const& d, int r) {
  char const* name = nullptr;
  char const* text = nullptr;
  if (d.error_name) d.error_name(r, &name);
  if (d.error_string) d.error_string(r, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(r)) +
         (text ? std::string(": ") + text : std::string());
}

inline driver_api load_driver() {
  driver_api d;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    char const* why = dlerror();
    d.missing = "no CUDA driver on this machine (" + std::string(why ? why : "libcuda.so.1") + ")";
    return d;
  }
  // Kept open for the life of the process, as the driver expects.
  auto sym = [&](auto& fn, char const* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn && d.missing.empty())
      d.missing = std::string("the CUDA driver lacks ") + name + " (too old?)";
  };
  sym(d.init, "cuInit");
  sym(d.device_count, "cuDeviceGetCount");
  sym(d.error_name, "cuGetErrorName");
  sym(d.error_string, "cuGetErrorString");
  sym(d.device_get, "cuDeviceGet");
  sym(d.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  sym(d.ctx_set_current, "cuCtxSetCurrent");
  sym(d.ctx_synchronize, "cuCtxSynchronize");
  sym(d.mem_alloc, "cuMemAlloc_v2");
  sym(d.mem_free, "cuMemFree_v2");
  sym(d.mem_get_info, "cuMemGetInfo_v2");
  sym(d.mem_host_alloc, "cuMemHostAlloc");
  sym(d.mem_free_host, "cuMemFreeHost");
  sym(d.memcpy_htod, "cuMemcpyHtoD_v2");
  sym(d.memcpy_dtoh, "cuMemcpyDtoH_v2");
  sym(d.memcpy_dtod, "cuMemcpyDtoD_v2");
  sym(d.memcpy_peer, "cuMemcpyPeer");
  sym(d.device_get_attribute, "cuDeviceGetAttribute");
  sym(d.module_load_data, "cuModuleLoadData");
  sym(d.module_get_function, "cuModuleGetFunction");
  sym(d.launch_kernel, "cuLaunchKernel");
  if (!d.missing.empty()) return d;
  if (int r = d.init(0); r != 0) {
    d.missing = "the CUDA driver did not initialize (" + driver_error_text(d, r) + ")";
    return d;
  }
  return d;
}

}  // namespace detail

// The driver, loaded and initialized once per process.
inline driver_api const& driver() {
  static driver_api const d = detail::load_driver();
  return d;
}

// The number of CUDA devices, 0 where there is no usable driver.
inline int device_count() {
  driver_api const& d = driver();
  if (!d.missing.empty()) return 0;
  int n = 0;
  if (d.device_count(&n) != 0) return 0;
  return n;
}

}  // namespace cuda_backend

}  // namespace zenith
