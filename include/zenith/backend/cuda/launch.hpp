#pragma once
// Evaluating an expression on a CUDA device: its kernel generated from the evaluator type
// (kernel_source.hpp), its launch arguments packed (kernel_args.hpp), and the kernel run by the
// installed kernel_runner. This header needs neither NVRTC nor the driver: the runner that
// compiles with NVRTC and launches with cuLaunchKernel (backend/cuda/runner.hpp) is installed
// where the build has NVRTC, and tests install one that runs the same source on the host
// (tests/cuda/host_grid_shim.hpp), so the whole path is checked without a GPU.
//
// So far elementwise expressions run on a device: arrays, numbers, elementwise ops and views.
// Anything else over device arrays (a reduction, a matmul, a gradient) is a device_error that
// says so.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "../../core/array.hpp"
#include "../../core/trace.hpp"
#include "../../expr/node.hpp"
#include "../../expr/views.hpp"
#include "kernel_args.hpp"
#include "kernel_source.hpp"

namespace zenith::cuda_backend {

// Runs kernel k over n elements with arguments a on device d (a ready launch: n > 0).
struct kernel_runner {
  void (*run)(device d, kernel_source const& k, kernel_args& a, std::int64_t n) = nullptr;
};

namespace detail {

inline kernel_runner const*& runner_slot() {
  static kernel_runner const* r = nullptr;
  return r;
}

// Expressions a generated elementwise kernel computes: nothing in them evaluates anything
// before the kernel runs.
template <class E>
struct elementwise_on_device : std::false_type {};
template <class T>
struct elementwise_on_device<array<T>> : std::true_type {};
template <class T>
struct elementwise_on_device<scalar_node<T>> : std::true_type {};
template <class Op, class... Cs>
struct elementwise_on_device<map_node<Op, Cs...>>
    : std::bool_constant<(elementwise_on_device<std::remove_cvref_t<Cs>>::value && ...)> {};
template <class V, class C>
struct elementwise_on_device<view_node<V, C>> : elementwise_on_device<std::remove_cvref_t<C>> {};

// The kernel of variant v for out (T) = an evaluator of type Ev: generated once per type and
// variant, as its text depends on nothing else.
template <element T, class Ev>
kernel_source const& kernel_for(kernel_variant const& v) {
  static std::mutex mu;
  static std::map<std::tuple<int, bool, std::uint32_t>, kernel_source> made;
  std::lock_guard lock(mu);
  auto key = std::make_tuple(int(v.kind), v.index64, v.broadcast);
  auto it = made.find(key);
  if (it == made.end()) it = made.emplace(key, elementwise_kernel<T, Ev>(v)).first;
  return it->second;
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

// out = e, on device d where every array e reads lives.
template <element T, expression E>
array<T> evaluate_on_device(device d, E const& e) {
  std::string where = "zenith: evaluating on " + d.str() + ": ";
  if constexpr (!detail::elementwise_on_device<std::remove_cvref_t<E>>::value) {
    throw device_error(where +
                       "only elementwise expressions (arrays, numbers, elementwise ops, "
                       "views) run on CUDA devices so far; bring the arrays to the CPU "
                       "with .to(zenith::cpu)");
  } else {
    if (zenith::detail::active_trace())
      throw device_error(where +
                         "transforms (grad, jvp, ...) of device arrays are not "
                         "supported yet");
    kernel_runner const* runner = detail::runner_slot();
    if (!runner) no_kernel_compiler(d);
    auto out = array<T>::empty(e.shape(), d);
    std::int64_t n = std::int64_t(out.size());
    if (n == 0) return out;
    zenith::detail::kernel_device_scope scope(d);  // the leaves may live on d
    auto ev = make_evaluator(e);
    using Ev = decltype(ev);
    kernel_variant v = choose_variant(out.data(), out.shape(), ev);
    kernel_source const& k = detail::kernel_for<T, Ev>(v);
    kernel_args a = launch_args(v, out.data(), out.shape(), ev);
    runner->run(d, k, a, n);
    return out;
  }
}

}  // namespace zenith::cuda_backend
