#pragma once
// The device plan of a lowered expression (lower.hpp): what a generated kernel reads, with the
// shape work done. Views and broadcasts are pushed down into the leaves' strides, so three kinds
// of node remain, the input of the kernel printer (kernel_source.hpp) and of the argument packer
// (kernel_args.hpp):
//   device_leaf<T>         a strided read of an array: its base and one stride per axis (elements)
//   device_literal<T>      a number, passed to the kernel as an argument
//   device_map<Op, Ps...>  an elementwise op over its operands
//
//   auto p = zn::cuda_backend::make_device_plan(a * zn::sin(b) + 1.0f, zn::cuda(0));
//   // device_map<add, device_map<mul, device_leaf<float>, device_map<sin, device_leaf<float>>>,
//   //            device_literal<float>>
//
// The plan's type depends only on the expression's type, and the kernel's text only on the
// plan's type and the variant. This backend's own: the CPU evaluators do the same shape work for
// xsimd loops, but a kernel needs none of their row and SIMD machinery.
#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../../core/apply.hpp"
#include "../../core/array.hpp"
#include "../../core/error.hpp"
#include "../../expr/node.hpp"
#include "../../expr/views.hpp"

namespace zenith::cuda_backend {

template <class T>
struct device_leaf {
  using value_type = T;
  using compute_type = compute_t<T>;

  T const* base = nullptr;
  std::size_t rank = 0;
  std::array<std::int64_t, max_rank> stride{};

  device_leaf(T const* p, zenith::shape const& s)
      : base(p), rank(s.size()), stride(leaf_strides(s)) {}
  template <class F>
  void for_each_leaf(F&& f) {
    f(*this);
  }
  // Reads through m (a view or a broadcast of what the leaf read before).
  void apply(affine_map const& m) {
    base += map_strides(m, stride);
    rank = m.out_rank;
  }
};

template <class T>
struct device_literal {
  using value_type = T;
  using compute_type = compute_t<T>;
  compute_type value;
  template <class F>
  void for_each_leaf(F&&) {}
};

template <class Op, class... Ps>
struct device_map {
  using value_type = op_result_t<Op, typename Ps::value_type...>;
  using compute_type = compute_t<value_type>;
  std::tuple<Ps...> children;
  template <class F>
  void for_each_leaf(F&& f) {
    zenith::detail::apply([&](auto&... c) { (c.for_each_leaf(f), ...); }, children);
  }
};

// device_plan_for<E>: the plan type of a lowered expression type, and how to build one for a
// kernel on device d.
template <class E>
struct device_plan_for {
  static_assert(sizeof(E) == 0,
                "zenith CUDA: a kernel reads a lowered expression (arrays, numbers, elementwise "
                "ops and views; backend/cuda/lower.hpp)");
};

template <class E>
using device_plan_t = typename device_plan_for<std::remove_cvref_t<E>>::type;

template <class E>
device_plan_t<E> make_device_plan(E const& e, device d) {
  return device_plan_for<std::remove_cvref_t<E>>::build(e, d);
}

namespace detail {
[[noreturn]] inline void leaf_elsewhere(device d, device where, zenith::shape const& s) {
  throw device_error("zenith: a kernel on " + d.str() + " reads an array of shape " + s.str() +
                     " on " + where.str() + "; bring it to " + d.str() + " with .to(" + d.str() +
                     ")");
}
}  // namespace detail

template <element T>
struct device_plan_for<array<T>> {
  using type = device_leaf<T>;
  static type build(array<T> const& a, device d) {
    if (a.storage() && a.storage()->where() != d)
      detail::leaf_elsewhere(d, a.storage()->where(), a.shape());
    return type(a.data(), a.shape());
  }
};

template <class T>
struct device_plan_for<scalar_node<T>> {
  using type = device_literal<T>;
  static type build(scalar_node<T> const& e, device) { return type{compute_t<T>(e.value)}; }
};

template <class Op, class... Cs>
struct device_plan_for<map_node<Op, Cs...>> {
  using type = device_map<Op, device_plan_t<Cs>...>;
  static type build(map_node<Op, Cs...> const& e, device d) {
    zenith::shape s = e.shape();
    return zenith::detail::apply(
        [&](auto const&... c) { return type{std::tuple<device_plan_t<Cs>...>{child(c, s, d)...}}; },
        e.children);
  }
  // The child's plan, its leaves broadcast to the node's shape.
  template <class C>
  static device_plan_t<C> child(C const& c, zenith::shape const& s, device d) {
    auto p = make_device_plan(c, d);
    if (zenith::shape from = c.shape(); from != s) {
      affine_map m = views::broadcast_to{s}.map(from);
      p.for_each_leaf([&](auto& leaf) { leaf.apply(m); });
    }
    return p;
  }
};

template <class V, class C>
struct device_plan_for<view_node<V, C>> {
  using type = device_plan_t<C>;
  static type build(view_node<V, C> const& e, device d) {
    auto p = make_device_plan(e.child, d);
    affine_map m = e.view.map(e.child.shape());
    p.for_each_leaf([&](auto& leaf) { leaf.apply(m); });
    return p;
  }
};

}  // namespace zenith::cuda_backend
