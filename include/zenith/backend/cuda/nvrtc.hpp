#pragma once
// NVRTC: CUDA C++ source to a cubin for one GPU architecture, at run time. NVRTC needs no GPU
// and no driver, so every kernel zenith generates is compiled (and tested) on any machine with
// the CUDA toolkit; nvcc is never needed.
//
//   auto k = zn::cuda_backend::nvrtc_compile(source, "fused_3f1a", 90);   // sm_90
//   k.image;   // the cubin, for cuModuleLoadData
//
// A compile that fails throws cuda_backend::compile_error with the kernel's name, the architecture
// and NVRTC's log.
#include <nvrtc.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "../../core/error.hpp"

namespace zenith::cuda_backend {

struct compile_error : error {
  using error::error;
};

// NVRTC's version, as major * 1000 + minor * 10 (13.0 -> 13000, as CUDA_VERSION). Asked once:
// every kernel cache lookup keys on it.
inline int nvrtc_version() {
  static int const version = [] {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    return major * 1000 + minor * 10;
  }();
  return version;
}

// What NVRTC produces: a cubin (machine code for exactly that architecture, ready to load), or
// PTX (the virtual ISA, which the driver compiles on load; also what a newer GPU can run).
enum class image_kind { cubin, ptx };

struct compiled_kernel {
  std::vector<char> image;  // the cubin, or the PTX text with its terminating NUL
  std::string log;          // NVRTC's warnings, usually empty
};

namespace detail {
// Releases an NVRTC program on every path out of nvrtc_compile.
struct nvrtc_program {
  nvrtcProgram p = nullptr;
  ~nvrtc_program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

inline void check_nvrtc(nvrtcResult r, char const* what, std::string_view name) {
  if (r != NVRTC_SUCCESS)
    throw compile_error("zenith CUDA: " + std::string(what) + " failed for kernel '" +
                        std::string(name) + "': " + nvrtcGetErrorString(r));
}
}  // namespace detail

// Compiles source for sm_<arch> (80 for A100, 90 for H100) into a cubin, or for compute_<arch>
// into PTX.
inline compiled_kernel nvrtc_compile(std::string const& source, std::string_view name, int arch,
                                     image_kind kind = image_kind::cubin) {
  detail::nvrtc_program prog;
  std::string file = std::string(name) + ".cu";
  detail::check_nvrtc(
      nvrtcCreateProgram(&prog.p, source.c_str(), file.c_str(), 0, nullptr, nullptr),
      "nvrtcCreateProgram", name);
  std::string gpu =
      (kind == image_kind::cubin ? "--gpu-architecture=sm_" : "--gpu-architecture=compute_") +
      std::to_string(arch);
  // No fast-math: the device computes what the CPU backend computes, to the ulps of each libm.
  char const* options[] = {gpu.c_str(), "--std=c++17", "--fmad=true"};
  nvrtcResult r = nvrtcCompileProgram(prog.p, 3, options);
  compiled_kernel out;
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(prog.p, &log_size);
  if (log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(prog.p, out.log.data());
    out.log.resize(log_size - 1);  // the terminating NUL
  }
  if (r != NVRTC_SUCCESS)
    throw compile_error("zenith CUDA: kernel '" + std::string(name) + "' does not compile for " +
                        gpu.substr(gpu.find('=') + 1) + " (" + nvrtcGetErrorString(r) + "):\n" +
                        out.log);
  std::size_t size = 0;
  if (kind == image_kind::cubin) {
    detail::check_nvrtc(nvrtcGetCUBINSize(prog.p, &size), "nvrtcGetCUBINSize", name);
    out.image.resize(size);
    detail::check_nvrtc(nvrtcGetCUBIN(prog.p, out.image.data()), "nvrtcGetCUBIN", name);
  } else {
    detail::check_nvrtc(nvrtcGetPTXSize(prog.p, &size), "nvrtcGetPTXSize", name);
    out.image.resize(size);
    detail::check_nvrtc(nvrtcGetPTX(prog.p, out.image.data()), "nvrtcGetPTX", name);
  }
  return out;
}

}  // namespace zenith::cuda_backend
