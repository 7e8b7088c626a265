#pragma once
// The static reverse pass. backward(e, ct, sink) sends the cotangent ct (an expression of e's
// shape) down the expression type of e, building the cotangent of each child as an expression,
// and calls sink(leaf, ct_leaf) at every array leaf. Nothing is evaluated on the way down: the
// cotangent reaching a leaf is one expression for the whole path to it, and it fuses into one
// pass when the sink evaluates it. Only reductions that really reduce, and barriers, evaluate.
//
// Every op takes its rule from its tag (expr/ops.hpp, partial<I>). An expression type with no
// rule here fails to compile with a message naming it: a derivative that cannot be taken is
// an error, never zeros.
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/cpu/evaluate.hpp"
#include "../backend/cpu/matmul.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/matmul.hpp"
#include "../expr/reduce.hpp"
#include "../expr/reshape.hpp"
#include "../expr/views.hpp"
#include "memoize.hpp"
#include "sum_to.hpp"

namespace zenith::autodiff {

// reverse<E>::run(e, ct, sink): the rule of node type E. Class specializations rather than
// overloads, so that rules may call each other whatever their order in this file.
template <class E>
struct reverse {
  static_assert(sizeof(E) == 0,
                "zenith autodiff: this expression node has no reverse-mode rule yet");
};

template <class E, class G, class Sink>
void backward(E const& e, G const& ct, Sink& sink) {
  reverse<E>::run(e, ct, sink);
}

// Leaves: an array hands its cotangent to the sink; a constant takes none.
template <element T>
struct reverse<array<T>> {
  template <class G, class Sink>
  static void run(array<T> const& a, G const& ct, Sink& sink) {
    sink(a, ct);
  }
};
template <class T>
struct reverse<scalar_node<T>> {
  template <class G, class Sink>
  static void run(scalar_node<T> const&, G const&, Sink&) {}
};

// A barrier evaluated once (autodiff/memoize.hpp): the barrier's own rule.
template <class B>
struct reverse<memo_node<B>> {
  template <class G, class Sink>
  static void run(memo_node<B> const& e, G const& ct, Sink& sink) {
    if constexpr (requires { reverse<B>::run(e.node, ct, sink, &e.value); })
      reverse<B>::run(e.node, ct, sink, &e.value);  // a rule that reads the node's value
    else
      backward(e.node, ct, sink);
  }
};

namespace detail {
template <class C>
inline constexpr bool differentiable_v = floating_element<value_t<C>>;

// The cotangent of a child: summed down to its shape, in its element type.
template <class C, class G>
auto to_child(C const& c, G&& ct) {
  return zenith::detail::convert<value_t<C>>(sum_to(std::forward<G>(ct), c.shape()));
}
}  // namespace detail

// Elementwise: child I gets ct * partial<I>, unbroadcast.
template <class Op, class... Cs>
struct reverse<map_node<Op, Cs...>> {
  template <class G, class Sink>
  static void run(map_node<Op, Cs...> const& e, G const& ct, Sink& sink) {
    if constexpr (requires { Op::piecewise_constant; }) {
      // Zero almost everywhere: no cotangent flows (as in JAX).
    } else {
      constexpr unsigned nondiff = [] {
        if constexpr (requires { Op::nondiff_operands; })
          return Op::nondiff_operands;
        else
          return 0u;
      }();
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
          using C = std::tuple_element_t<J, std::tuple<Cs...>>;
          if constexpr (!(nondiff >> J & 1) && detail::differentiable_v<C>) {
            auto const& c = std::get<J>(e.children);
            auto local = std::apply(
                [&](auto const&... xs) { return Op::template partial<J>(e, xs...); }, e.children);
            backward(c, detail::to_child(c, ct * local), sink);
          }
        };
        (one(std::integral_constant<std::size_t, I>{}), ...);
      }
      (std::index_sequence_for<Cs...>{});
    }
  }
};

// Reductions: sum and mean broadcast the cotangent back over the reduced axes.
namespace detail {
// The cotangent of a reduction's output, reshaped with the reduced axes as 1 and broadcast to
// the child's shape.
template <class Op, class C, class G>
auto spread(reduce_node<Op, C> const& e, G const& ct) {
  zenith::shape in = e.child.shape(), kept;
  for (std::size_t k = 0; k < in.size(); ++k) kept.push_back(e.reduces(k) ? 1 : in[k]);
  return broadcast_to(reshape(ct, kept), in);
}
}  // namespace detail

template <class Op, class C>
requires(std::is_same_v<Op, ops::reduce_sum> ||
         std::is_same_v<Op, ops::reduce_mean>) struct reverse<reduce_node<Op, C>> {
  template <class G, class Sink>
  static void run(reduce_node<Op, C> const& e, G const& ct, Sink& sink) {
    if constexpr (detail::differentiable_v<C>) {
      if constexpr (std::is_same_v<Op, ops::reduce_sum>)
        backward(e.child, zenith::detail::convert<value_t<C>>(detail::spread(e, ct)), sink);
      else
        backward(e.child,
                 zenith::detail::convert<value_t<C>>(detail::spread(e, ct) / double(e.count())),
                 sink);
    }
  }
};

// max / min: the cotangent goes to the elements equal to the result, shared evenly among ties
// (as in JAX). The result comes from the forward pass when the node was memoized.
template <class Op, class C>
requires(std::is_same_v<Op, ops::reduce_max> ||
         std::is_same_v<Op, ops::reduce_min>) struct reverse<reduce_node<Op, C>> {
  using T = value_t<C>;
  template <class G, class Sink>
  static void run(reduce_node<Op, C> const& e, G const& ct, Sink& sink,
                  array<T> const* value = nullptr) {
    if constexpr (detail::differentiable_v<C>) {
      zenith::shape in = e.child.shape(), kept;
      for (std::size_t k = 0; k < in.size(); ++k) kept.push_back(e.reduces(k) ? 1 : in[k]);
      // The result with the reduced axes kept as 1: the forward value under that shape.
      array<T> m =
          value ? array<T>::from_buffer(value->storage(), const_cast<T*>(value->data()), kept)
                : array<T>(reduce_node<Op, C>(e.child, e.axes, true));
      auto hit = zenith::detail::as_number<C>(e.child == broadcast_to(m, in));
      array<T> count = reduce_node<ops::reduce_sum, decltype(hit)>(hit, e.axes, true);
      backward(e.child, zenith::detail::convert<T>(detail::spread(e, ct) * hit / count), sink);
    }
  }
};

// Views: the adjoint view.
template <class C>
struct reverse<view_node<views::transpose, C>> {
  template <class G, class Sink>
  static void run(view_node<views::transpose, C> const& e, G const& ct, Sink& sink) {
    std::size_t r = e.shape().size();
    std::vector<int> inverse(r);
    for (std::size_t k = 0; k < r; ++k) inverse[e.view.perm[k]] = int(k);
    backward(e.child, transpose(ct, inverse), sink);
  }
};
template <class C>
struct reverse<view_node<views::broadcast_to, C>> {
  template <class G, class Sink>
  static void run(view_node<views::broadcast_to, C> const& e, G const& ct, Sink& sink) {
    backward(e.child, sum_to(ct, e.child.shape()), sink);
  }
};
template <class V, class C>
requires(std::is_same_v<V, views::expand_dims> ||
         std::is_same_v<V, views::squeeze>) struct reverse<view_node<V, C>> {
  template <class G, class Sink>
  static void run(view_node<V, C> const& e, G const& ct, Sink& sink) {
    backward(e.child, reshape(ct, e.child.shape()), sink);
  }
};
template <class C>
struct reverse<reshape_node<C>> {
  template <class G, class Sink>
  static void run(reshape_node<C> const& e, G const& ct, Sink& sink) {
    backward(e.child, reshape(ct, e.child.shape()), sink);
  }
};

// matmul of matrices: dA = ct B^T, dB = A^T ct. Matrix-vector products use outer products.
template <class A, class B>
struct reverse<matmul_node<A, B>> {
  template <class G, class Sink>
  static void run(matmul_node<A, B> const& e, G const& ct, Sink& sink) {
    auto const& a = e.lhs();
    auto const& b = e.rhs();
    std::size_t ra = a.shape().size(), rb = b.shape().size();
    if (ra == 2 && rb == 2) {
      if constexpr (detail::differentiable_v<A>)
        backward(a, zenith::detail::convert<value_t<A>>(matmul(ct, transpose(b))), sink);
      if constexpr (detail::differentiable_v<B>)
        backward(b, zenith::detail::convert<value_t<B>>(matmul(transpose(a), ct)), sink);
    } else if (ra == 2 && rb == 1) {  // (m, k) @ (k,) -> (m,)
      std::size_t m = a.shape()[0], k = a.shape()[1];
      if constexpr (detail::differentiable_v<A>)
        backward(a,
                 zenith::detail::convert<value_t<A>>(reshape(ct, zenith::shape{m, 1}) *
                                                     reshape(b, zenith::shape{1, k})),
                 sink);
      if constexpr (detail::differentiable_v<B>)
        backward(b, zenith::detail::convert<value_t<B>>(matmul(transpose(a), ct)), sink);
    } else if (ra == 1 && rb == 2) {  // (k,) @ (k, n) -> (n,)
      std::size_t k = b.shape()[0], n = b.shape()[1];
      if constexpr (detail::differentiable_v<A>)
        backward(a, zenith::detail::convert<value_t<A>>(matmul(b, ct)), sink);
      if constexpr (detail::differentiable_v<B>)
        backward(b,
                 zenith::detail::convert<value_t<B>>(reshape(a, zenith::shape{k, 1}) *
                                                     reshape(ct, zenith::shape{1, n})),
                 sink);
    } else {
      throw value_error("grad: matmul of shapes " + a.shape().str() + " and " + b.shape().str() +
                        " has no reverse rule yet (matrices and matrix-vector products have)");
    }
  }
};

}  // namespace zenith::autodiff
