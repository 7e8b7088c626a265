#pragma once
// Evaluating an expression on a CUDA device: its kernel generated from its device plan's type
// (device_plan.hpp, kernel_source.hpp), its launch arguments packed (kernel_args.hpp), and the
// kernel run by the installed kernel_runner. This header needs neither NVRTC nor the driver: the
// runner that compiles with NVRTC and launches with cuLaunchKernel (backend/cuda/runner.hpp) is
// installed where the build has NVRTC, and tests install one that runs the same source on the host
// (tests/cuda/host_grid_shim.hpp), so the whole path is checked without a GPU.
//
// What runs on a device: elementwise expressions (arrays, numbers, elementwise ops and views) as
// one kernel, reductions along axes of them (reduce_kernel.hpp: the expression fused in), and
// anything lower.hpp can reduce to those by computing its barriers first: reductions inside
// larger expressions, reshapes, the library ops (matmul, conv2d, softmax, layer_norm,
// concatenate) and the autodiff layer's nodes, so that a gradient's forward and backward passes
// run there too. Anything else over device arrays is a device_error that names it.
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "../../core/array.hpp"
#include "../../core/creation.hpp"
#include "../../core/recording.hpp"
#include "../../core/trace.hpp"
#include "../../expr/node.hpp"
#include "../../expr/views.hpp"
#include "concat.hpp"
#include "conv.hpp"
#include "gemm.hpp"
#include "kernel_args.hpp"
#include "kernel_source.hpp"
#include "layer_norm.hpp"
#include "lower.hpp"
#include "reduce_kernel.hpp"
#include "softmax.hpp"

namespace zenith::cuda_backend {

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

// A reduction along axes of such an expression, by an op with a device kernel.
template <class E>
struct reduction_on_device : std::false_type {};
template <class Op, class C>
struct reduction_on_device<reduce_node<Op, C>>
    : std::bool_constant<device_reduction<Op> &&
                         elementwise_on_device<std::remove_cvref_t<C>>::value> {};

// The kernel make(arg) gives, made once per (make, key) and kept for the program's life: one
// cache for every generated kernel, so that each expression type compiles only its text.
template <class Arg>
kernel_source const& cached_kernel(kernel_source (*make)(Arg), Arg arg, std::uint64_t key) {
  static std::mutex mu;
  static std::map<std::pair<std::uintptr_t, std::uint64_t>, kernel_source> made;
  std::lock_guard lock(mu);
  auto k = std::make_pair(reinterpret_cast<std::uintptr_t>(make), key);
  auto it = made.find(k);
  if (it == made.end()) it = made.emplace(k, make(arg)).first;
  return it->second;
}

// The kernel of variant v for out (T) = a plan of type P: its text depends on nothing else.
template <element T, class P>
kernel_source const& kernel_for(kernel_variant const& v) {
  std::uint64_t key = std::uint64_t(v.kind) << 40 | std::uint64_t(v.index64) << 32 | v.broadcast;
  return cached_kernel<kernel_variant const&>(&elementwise_kernel<T, P>, v, key);
}

template <class Op, element T, class P>
kernel_source const& reduction_kernel_for(bool index64) {
  return cached_kernel<bool>(&reduction_kernel<Op, T, P>, index64, index64);
}
template <class Op, element T, class A>
kernel_source const& reduction_finish_kernel_for() {
  static kernel_source const made = reduction_finish_kernel<Op, T, A>();
  return made;
}

// Whether an index into the child of shape s, or any leaf's offset, needs 64 bits.
inline bool needs_index64(zenith::shape const& s, device_operands const& o) {
  constexpr std::int64_t max32 = std::numeric_limits<std::int32_t>::max();
  bool wide = std::int64_t(s.numel()) > max32;
  for (auto const& stride : o.strides) {
    std::int64_t reach = 0;
    for (std::size_t k = 0; k < s.size(); ++k)
      reach += (stride[k] < 0 ? -stride[k] : stride[k]) * (std::int64_t(s[k]) - 1);
    wide = wide || reach > max32;
  }
  return wide;
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

namespace detail {

// The installed runner, for a launch on d. A launch is not a recorded step (core/recording.hpp):
// a jit recording of it would replay without it, so such a function is called afresh instead.
inline kernel_runner const& runner_for(device d) {
  kernel_runner const* runner = runner_slot();
  if (!runner) no_kernel_compiler(d);
  zenith::detail::note_unreplayable("a CUDA kernel launch");
  return *runner;
}

// Launches the elementwise kernel that `kernel` gives for the variant that fits out (of shape
// s) and the operands o, or with out_stride the strided one writing out at those strides.
inline void launch_elementwise_of(kernel_runner const& runner, device d, void* out,
                                  zenith::shape const& s, device_operands const& o,
                                  kernel_source const& (*kernel)(kernel_variant const&),
                                  std::array<std::int64_t, max_rank> const* out_stride) {
  std::int64_t n = std::int64_t(s.numel());
  kernel_variant v = choose_variant(out, s, o);
  if (out_stride) {
    v.kind = layout::strided;
    v.broadcast = 0;
    constexpr std::int64_t max32 = std::numeric_limits<std::int32_t>::max();
    std::int64_t reach = 0;
    for (std::size_t k = 0; k < s.size(); ++k)
      reach +=
          ((*out_stride)[k] < 0 ? -(*out_stride)[k] : (*out_stride)[k]) * (std::int64_t(s[k]) - 1);
    v.index64 = v.index64 || reach > max32;
  }
  kernel_source const& k = kernel(v);
  kernel_args a = launch_args(v, out, s, o, out_stride);
  runner.run(d, k, a, {256, (n + 255) / 256, false});
}

// out (T, of shape s) = e, lowered, of shape s, as one elementwise kernel: in the variant that
// fits the arrays at hand, or, with out_stride, in the strided one writing out at those strides
// (a slice of a larger array). Only the kernel's text is compiled per expression type.
template <element T, expression E>
void launch_elementwise(device d, T* out, zenith::shape const& s, E const& e,
                        std::array<std::int64_t, max_rank> const* out_stride = nullptr) {
  static_assert(elementwise_on_device<std::remove_cvref_t<E>>::value,
                "zenith: a device expression must be lowered first (lower.hpp)");
  kernel_runner const& runner = runner_for(d);
  if (s.numel() == 0) return;
  auto p = make_device_plan(e, d);
  launch_elementwise_of(runner, d, out, s, operands_of(p), &kernel_for<T, decltype(p)>, out_stride);
}

// A reduction's launch, its kernel k made (for index64 = wide) from the child's plan: one
// kernel, or split, a second combining each output's partial states. Per (Op, T, A), not per
// expression.
template <class Op, element T, class A>
void launch_reduction(kernel_runner const& runner, device d, kernel_source const& k, bool wide,
                      array<T>& out, zenith::shape const& s, std::uint32_t axes, std::int64_t count,
                      device_operands const& o) {
  std::int64_t const nout = std::int64_t(out.size());
  std::int64_t const splits = reduction_splits(nout, count);
  if (splits == 1) {
    kernel_args a = reduction_args(wide, out.data(), s, axes, o);
    runner.run(d, k, a, {unsigned(reduction_block), nout, true});
    return;
  }
  // Split: each block's partial state, then one block per output combines them.
  std::size_t const bytes = std::size_t(nout * splits) * reduction_state_bytes<Op, A>();
  auto part = array<std::int64_t>::empty({(bytes + 7) / 8}, d);
  kernel_args a = reduction_args(wide, out.data(), s, axes, o, splits, part.data());
  runner.run(d, k, a, {unsigned(reduction_block), nout * splits, true});
  kernel_args f = reduction_finish_args(nout, count, splits, out.data(), part.data());
  runner.run(d, reduction_finish_kernel_for<Op, T, A>(), f,
             {unsigned(reduction_block), nout, true});
}

}  // namespace detail

namespace detail {

// A reduction by Op of a child of shape s (whose device plan's operands are o, its kernel
// kernel(wide)) over the axes in mask, into a new array of shape out_shape on d. Per (Op, T, A),
// not per expression.
template <class Op, element T, class A>
array<T> reduce_on_device(device d, zenith::shape const& s, zenith::shape const& out_shape,
                          std::uint32_t axes, std::int64_t count, device_operands const& o,
                          kernel_source const& (*kernel)(bool wide)) {
  kernel_runner const& runner = runner_for(d);
  if (count == 0) {  // as the CPU: the identity, or an error where there is none
    if constexpr (!Op::has_identity)
      throw value_error(std::string(Op::name) + ": zero-size reduction of shape " + s.str() +
                        " has no identity");
    else
      return full<T>(out_shape, T(Op::finalize(Op::template identity<A>(), 0)), d);
  }
  auto out = array<T>::empty(out_shape, d);
  // 32-bit indices only where the threads' strides past the last element fit too (a step is
  // at most a block per split).
  bool wide =
      needs_index64(s, o) || std::int64_t(s.numel()) > std::numeric_limits<std::int32_t>::max() -
                                                           reduction_split_blocks * reduction_block;
  launch_reduction<Op, T, A>(runner, d, kernel(wide), wide, out, s, axes, count, o);
  return out;
}

}  // namespace detail

// out (T) = e on device d, e lowered (lower.hpp): one elementwise kernel, or a reduction along
// axes with its elementwise child fused in.
template <element T, expression E>
array<T> run_on_device(device d, E const& e) {
  using D = std::remove_cvref_t<E>;
  if constexpr (detail::reduction_on_device<D>::value) {
    using Op = typename D::op_type;
    auto p = make_device_plan(e.child, d);
    using P = decltype(p);
    return detail::reduce_on_device<Op, T, typename P::compute_type>(
        d, e.child.shape(), e.shape(), e.axes, std::int64_t(e.count()), operands_of(p),
        &detail::reduction_kernel_for<Op, T, P>);
  } else {
    auto out = array<T>::empty(e.shape(), d);
    detail::launch_elementwise(d, out.data(), out.shape(), e);
    return out;
  }
}

// e (lowered, of shape s) written on device d at out with the given strides (in elements): a
// slice of a larger array, as the adjoint of slice and concatenate write.
template <element T, expression E>
void run_into_on_device(device d, T* out, std::array<std::int64_t, max_rank> const& stride,
                        zenith::shape const& s, E const& e) {
  detail::launch_elementwise(d, out, s, e, &stride);
}

// out (T) = e, on device d where every array e reads lives. Its barriers (reductions inside it,
// and the autodiff layer's nodes) run first as kernels of their own (lower.hpp); the rest is
// one kernel. A reduction at the top keeps its elementwise child fused in.
template <element T, expression E>
array<T> evaluate_on_device(device d, E const& e) {
  using D = std::remove_cvref_t<E>;
  if constexpr (!lowerable<D>) {
    throw device_error("zenith: evaluating on " + d.str() + ": " +
                       std::string(detail::off_device<D>::name) +
                       " does not run on CUDA devices yet; bring the arrays to the CPU with "
                       ".to(zenith::cpu)");
  } else if constexpr (is_reduce_node_v<D>) {
    using R = reduce_node<typename D::op_type, lowered_t<typename D::child_type>>;
    return run_on_device<T>(d, R(lower(d, e.child), e.axes, e.keepdims));
  } else if constexpr (requires { requires D::barrier; } &&
                       std::is_same_v<lowered_t<D>, array<T>>) {
    return lower(d, e);  // a barrier's own result, as on the CPU
  } else {
    return run_on_device<T>(d, lower(d, e));
  }
}

}  // namespace zenith::cuda_backend

namespace zenith::detail {
// The CPU backend's way to a device (core/device_of.hpp): this backend's evaluation where the
// program has a kernel compiler, else an error that says how to get one.
template <element T, expression E>
array<T> evaluate_on_device_backend(device d, E const& e) {
#ifdef ZENITH_WITH_NVRTC
  return cuda_backend::evaluate_on_device<T>(d, e);
#else
  (void)e;
  cuda_backend::no_kernel_compiler(d);
#endif
}
}  // namespace zenith::detail
