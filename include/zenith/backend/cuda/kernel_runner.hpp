#pragma once
// What runs a generated kernel (launch.hpp prints and packs it): the installed kernel runner and
// how a launch is shaped. This is all of the CUDA backend that a program without a kernel
// compiler includes (zenith.hpp without ZENITH_WITH_NVRTC): a device expression is then an error
// that says what is missing, and the printer, the plans and their lowering are not parsed.
#include <cstdint>
#include <string>

#include "../../core/device.hpp"
#include "../../core/device_of.hpp"
#include "../../core/error.hpp"

namespace zenith::cuda_backend {

struct kernel_source;
class kernel_args;

// How a kernel is launched: threads per block, the blocks it could use (its grid-stride loops
// take any grid), and whether a block's threads synchronize (a reduction's shared-memory tree).
struct launch_shape {
  unsigned block = 256;
  std::int64_t blocks = 1;
  bool cooperative = false;
};

// Runs kernel k with arguments a on device d.
struct kernel_runner {
  void (*run)(device d, kernel_source const& k, kernel_args& a, launch_shape const& s) = nullptr;
};

namespace detail {
inline kernel_runner const*& runner_slot() {
  static kernel_runner const* r = nullptr;
  return r;
}
}  // namespace detail

// Installs r as the kernel runner (null removes it) and returns the one it replaces.
inline kernel_runner const* install_kernel_runner(kernel_runner const* r) {
  kernel_runner const* old = detail::runner_slot();
  detail::runner_slot() = r;
  return old;
}

[[noreturn]] inline void no_kernel_compiler(device d) {
  throw device_error("zenith: evaluating on " + d.str() +
                     ": this program has no CUDA kernel compiler (zenith is built without NVRTC: "
                     "configure with ZENITH_CUDA on)");
}

}  // namespace zenith::cuda_backend

#ifndef ZENITH_WITH_NVRTC
namespace zenith::detail {
// The CPU backend's way to a device (core/device_of.hpp) in a program without a kernel compiler
// (launch.hpp defines it where the program has one).
template <element T, expression E>
array<T> evaluate_on_device_backend(device d, E const&) {
  cuda_backend::no_kernel_compiler(d);
}
}  // namespace zenith::detail
#endif
