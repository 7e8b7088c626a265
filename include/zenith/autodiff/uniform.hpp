#pragma once
// A cotangent built from constants alone is one value at every element: the seed 1 of a scalar
// loss, times an op's constant partial (neg's -1), divided by a mean's count, broadcast back
// over what a sum reduced. The reverse pass folds such a cotangent, whatever the nodes that
// built it, to that value broadcast to its shape before handing it on (backward.hpp). So the
// expressions below it hold one constant instead of a chain of scalar nodes, views and sums:
// no reduction is evaluated for them, and one cotangent type serves every loss that starts
// with a different chain of constants (sum, mean, a scale, a sign).
#include <cstddef>
#include <type_traits>

#include "../expr/node.hpp"
#include "../expr/reduce.hpp"
#include "../expr/reshape.hpp"
#include "../expr/views.hpp"
#include "adjoint_nodes.hpp"
#include "sum_to.hpp"

namespace zenith::autodiff {

// uniform<E>::value(e): the one value of every element of E, in E's compute type, as its
// evaluator's scalar path computes it (a sum of n copies of v is v * n), for an E whose every
// element has one value, known from its scalar nodes alone. Every view keeps a uniform value
// uniform (a slice or transpose of one value is that value); a pad does not (zeros around it),
// nor does a node without a specialization here.
template <class E>
struct uniform {
  static constexpr bool holds = false;
};
template <class E>
inline constexpr bool uniform_v = uniform<E>::holds;

template <class T>
struct uniform<scalar_node<T>> {
  static constexpr bool holds = true;
  static compute_t<T> value(scalar_node<T> const& e) { return compute_t<T>(e.value); }
};
template <class Op, class... Cs>
struct uniform<map_node<Op, Cs...>> {
  static constexpr bool holds = (uniform_v<Cs> && ...);
  static auto value(map_node<Op, Cs...> const& e) {
    using C = compute_t<value_t<map_node<Op, Cs...>>>;
    return zenith::detail::apply(
        [](Cs const&... c) { return C(Op::apply(uniform<Cs>::value(c)...)); }, e.children);
  }
};
// Views and reshapes: the child's value.
template <class V, class C>
struct uniform<view_node<V, C>> : uniform<C> {
  static auto value(view_node<V, C> const& e) { return uniform<C>::value(e.child); }
};
template <class C>
struct uniform<reshape_node<C>> : uniform<C> {
  static auto value(reshape_node<C> const& e) { return uniform<C>::value(e.child); }
};
template <class C>
struct uniform<shared_ref<C>> : uniform<C> {
  static auto value(shared_ref<C> const& e) { return uniform<C>::value(e.child()); }
};
template <class C>
struct uniform<sum_to_node<C>> : uniform<C> {
  static auto value(sum_to_node<C> const& e) {
    auto v = uniform<C>::value(e.child);
    zenith::shape out = e.shape();
    std::size_t n = out.numel() == 0 ? 0 : e.child.shape().numel() / out.numel();
    return n == 1 ? v : decltype(v)(v * decltype(v)(n));
  }
};
template <class Op, class C>
struct uniform<reduce_node<Op, C>> {
  static constexpr bool holds =
      uniform_v<C> &&
      (std::is_same_v<Op, ops::reduce_sum> || std::is_same_v<Op, ops::reduce_mean> ||
       std::is_same_v<Op, ops::reduce_max> || std::is_same_v<Op, ops::reduce_min>);
  static auto value(reduce_node<Op, C> const& e) {
    using R = compute_t<value_t<reduce_node<Op, C>>>;
    R v = R(uniform<C>::value(e.child));
    if constexpr (std::is_same_v<Op, ops::reduce_sum>)
      return e.count() == 1 ? v : R(v * R(e.count()));
    else
      return v;
  }
};

// Already folded: one scalar, or one broadcast to a shape.
template <class E>
inline constexpr bool folded_uniform_v = is_scalar_node_v<E>;
template <class T>
inline constexpr bool folded_uniform_v<view_node<views::broadcast_to, scalar_node<T>>> = true;

// ct folded to its one value broadcast to its shape.
template <class G>
requires uniform_v<G>
auto fold_uniform(G const& ct) {
  using T = value_t<G>;
  return broadcast_to(scalar_node<T>(T(uniform<G>::value(ct))), ct.shape());
}

}  // namespace zenith::autodiff
