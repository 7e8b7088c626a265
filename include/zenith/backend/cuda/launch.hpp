#pragma once
// Evaluating an expression on a CUDA device: its device plan recorded (lower.hpp,
// device_plan.hpp), its kernel printed from the plan (kernel_source.hpp) and cached by the plan's
// steps and types, its launch arguments packed (kernel_args.hpp), and the kernel run by the
// installed kernel_runner. Only the walk that records the plan is compiled per expression type.
// This header needs neither NVRTC nor the driver: the runner that compiles with NVRTC and launches
// with cuLaunchKernel (backend/cuda/runner.hpp) is installed where the build has NVRTC, and tests
// install one that runs the same source on the host (tests/cuda/host_grid_shim.hpp), so the whole
// path is checked without a GPU.
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
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
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
#include "kernel_runner.hpp"
#include "kernel_source.hpp"
#include "layer_norm.hpp"
#include "lower.hpp"
#include "reduce_kernel.hpp"
#include "softmax.hpp"

namespace zenith::cuda_backend {

namespace detail {

// Every generated kernel, made once and kept for the program's life. A kernel's text is a
// function of its kind, a tag (a reduction's text), a number (the output type and the variant)
// and the steps and types of the plan it computes: the key, compared in full on a hash's hit.
class generated_kernels {
 public:
  struct key {
    char kind;
    void const* tag;
    std::uint64_t variant;
    device_plan const* plan;  // null for a kernel that reads no plan
  };

  template <class Make>
  kernel_source const& get(key const& k, Make&& make) {
    std::uint64_t h = (k.plan ? k.plan->hash() : 0) ^ std::uint64_t(k.kind) << 56 ^
                      reinterpret_cast<std::uintptr_t>(k.tag) ^ k.variant * 0x9e3779b97f4a7c15ull;
    std::lock_guard lock(mu_);
    for (auto [it, end] = made_.equal_range(h); it != end; ++it)
      if (it->second.matches(k)) return it->second.source;
    entry e{k.kind, k.tag, k.variant, {}, make()};
    if (k.plan) copy_text(*k.plan, e.plan);
    return made_.emplace(h, std::move(e))->second.source;
  }

 private:
  struct entry {
    char kind;
    void const* tag;
    std::uint64_t variant;
    device_plan plan;  // its steps and types only
    kernel_source source;
    bool matches(key const& k) const {
      return kind == k.kind && tag == k.tag && variant == k.variant &&
             (k.plan ? k.plan->same_text(plan) : plan.steps.size() == 0);
    }
  };
  static void copy_text(device_plan const& from, device_plan& to) {
    for (auto const& s : from.steps) to.steps.push_back(s);
    for (auto const& t : from.leaf_types) to.leaf_types.push_back(t);
  }
  std::mutex mu_;
  std::unordered_multimap<std::uint64_t, entry> made_;
};
inline generated_kernels& the_generated_kernels() {
  static generated_kernels c;
  return c;
}

// The kernel of variant v for out (of type o) = plan p.
inline kernel_source const& elementwise_kernel_for(device_plan const& p, output_type const& o,
                                                   kernel_variant const& v) {
  std::uint64_t variant = std::uint64_t(o.dtype) << 48 | std::uint64_t(v.kind) << 40 |
                          std::uint64_t(v.index64) << 32 | v.broadcast;
  return the_generated_kernels().get({'E', nullptr, variant, &p},
                                     [&] { return elementwise_kernel(p, o, v); });
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

// The installed runner, for a launch on d. A launch is not a recorded step (core/recording.hpp):
// a jit recording of it would replay without it, so such a function is called afresh instead.
inline kernel_runner const& runner_for(device d) {
  kernel_runner const* runner = runner_slot();
  if (!runner) no_kernel_compiler(d);
  zenith::detail::note_unreplayable("a CUDA kernel launch");
  return *runner;
}

// out (of type o and shape s) = plan p, as one elementwise kernel: in the variant that fits the
// arrays at hand, or, with out_stride, in the strided one writing out at those strides (a slice
// of a larger array).
inline void launch_elementwise(device d, void* out, zenith::shape const& s, device_plan const& p,
                               output_type const& o,
                               std::array<std::int64_t, max_rank> const* out_stride = nullptr) {
  kernel_runner const& runner = runner_for(d);
  if (s.numel() == 0) return;
  std::int64_t n = std::int64_t(s.numel());
  kernel_variant v = choose_variant(out, s, p.operands);
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
  kernel_source const& k = elementwise_kernel_for(p, o, v);
  kernel_args a = launch_args(v, out, s, p.operands, out_stride);
  runner.run(d, k, a, {256, (n + 255) / 256, false});
}

// A reduction (its text r, from reduction_text_of, whose address the kernel cache keys on;
// partial states of state_bytes each) of plan p, a child of shape s,
// over the axes in mask into out (nout elements, count reduced into each): one kernel, or split,
// a second combining each output's partial states.
inline void launch_reduction(kernel_runner const& runner, device d, reduction_text const& r,
                             std::size_t state_bytes, void* out, std::int64_t nout,
                             zenith::shape const& s, std::uint32_t axes, std::int64_t count,
                             device_plan const& p) {
  // 32-bit indices only where the threads' strides past the last element fit too (a step is
  // at most a block per split).
  bool wide = needs_index64(s, p.operands) ||
              std::int64_t(s.numel()) > std::numeric_limits<std::int32_t>::max() -
                                            reduction_split_blocks * reduction_block;
  kernel_source const& k = the_generated_kernels().get(
      {'R', &r, wide, &p}, [&] { return reduction_kernel(p, r, wide); });
  std::int64_t const splits = reduction_splits(nout, count);
  if (splits == 1) {
    kernel_args a = reduction_args(wide, out, s, axes, p.operands);
    runner.run(d, k, a, {unsigned(reduction_block), nout, true});
    return;
  }
  // Split: each block's partial state, then one block per output combines them.
  std::size_t const bytes = std::size_t(nout * splits) * state_bytes;
  auto part = array<std::int64_t>::empty({(bytes + 7) / 8}, d);
  kernel_args a = reduction_args(wide, out, s, axes, p.operands, splits, part.data());
  runner.run(d, k, a, {unsigned(reduction_block), nout * splits, true});
  kernel_args f = reduction_finish_args(nout, count, splits, out, part.data());
  kernel_source const& fin = the_generated_kernels().get(
      {'F', &r, 0, nullptr}, [&] { return reduction_finish_kernel(r); });
  runner.run(d, fin, f, {unsigned(reduction_block), nout, true});
}

}  // namespace detail

namespace detail {

// A new array of shape s on d computed by plan p. Per T, not per expression.
template <element T>
array<T> run_plan(device d, zenith::shape const& s, device_plan const& p) {
  auto out = array<T>::empty(s, d);
  launch_elementwise(d, out.data(), s, p, output_type_of<T>());
  return out;
}

// A reduction by Op of a child of shape s (whose device plan is p) over the axes in mask, into
// a new array of shape out_shape on d. Per (Op, T, A), not per expression.
template <class Op, element T, class A>
array<T> reduce_on_device(device d, zenith::shape const& s, zenith::shape const& out_shape,
                          std::uint32_t axes, std::int64_t count, device_plan const& p) {
  kernel_runner const& runner = runner_for(d);
  if (count == 0) {  // as the CPU: the identity, or an error where there is none
    if constexpr (!Op::has_identity)
      throw value_error(std::string(Op::name) + ": zero-size reduction of shape " + s.str() +
                        " has no identity");
    else
      return full<T>(out_shape, T(Op::finalize(Op::template identity<A>(), 0)), d);
  }
  auto out = array<T>::empty(out_shape, d);
  launch_reduction(runner, d, reduction_text_of<Op, T, A>(), reduction_state_bytes<Op, A>(),
                   out.data(), std::int64_t(out.size()), s, axes, count, p);
  return out;
}

}  // namespace detail

// e (lowered, of shape s) written on device d at out with the given strides (in elements): a
// slice of a larger array, as the adjoint of slice and concatenate write.
template <element T, expression E>
void run_into_on_device(device d, T* out, std::array<std::int64_t, max_rank> const& stride,
                        zenith::shape const& s, E const& e) {
  device_plan p = make_device_plan(e, d);
  detail::launch_elementwise(d, out, s, p, detail::output_type_of<T>(), &stride);
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
    using A = compute_t<value_t<typename D::child_type>>;
    device_plan p = make_device_plan(e.child, d);
    return detail::reduce_on_device<typename D::op_type, T, A>(d, e.child.shape(), e.shape(),
                                                               e.axes, std::int64_t(e.count()), p);
  } else if constexpr (requires { requires D::barrier; } && has_value_on_device<D>() &&
                       std::is_same_v<value_t<D>, T>) {
    return value_on_device(d, e);  // a barrier's own result, as on the CPU
  } else {
    return detail::run_plan<T>(d, e.shape(), make_device_plan(e, d));
  }
}

}  // namespace zenith::cuda_backend

namespace zenith::detail {
// The CPU backend's way to a device (core/device_of.hpp), where the program has a kernel
// compiler (kernel_runner.hpp has the error where it has none).
#ifdef ZENITH_WITH_NVRTC
template <element T, expression E>
array<T> evaluate_on_device_backend(device d, E const& e) {
  return cuda_backend::evaluate_on_device<T>(d, e);
}
#endif
}  // namespace zenith::detail
