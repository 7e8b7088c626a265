#pragma once
// The static reverse pass. backward(e, ct, sink) sends the cotangent ct (an expression of e's
// shape) down the expression type of e, building the cotangent of each child as an expression,
// and calls sink(leaf, ct_leaf) at every array leaf. Nothing is evaluated on the way down: the
// cotangent reaching a leaf is one expression for the whole path to it, and it fuses into one
// pass when the sink evaluates it. Only reductions that really reduce, and barriers, evaluate.
//
// Every elementwise op takes its rule from its tag (expr/ops.hpp, partial<I>); reductions and
// views have theirs here, and each barrier op (matmul, conv2d, softmax, layer_norm, concatenate)
// its own header in autodiff/rules/, with its forward and IR rules. An expression type with no
// rule fails to compile with a message naming it: a derivative that cannot be taken is an
// error, never zeros.
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/cpu/evaluate.hpp"
#include "../core/apply.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "../expr/reshape.hpp"
#include "../expr/views.hpp"
#include "adjoint_nodes.hpp"
#include "memoize.hpp"
#include "sum_to.hpp"
#include "uniform.hpp"

namespace zenith::autodiff {

// reverse<E>::run(e, ct, sink): the rule of node type E. Class specializations rather than
// overloads, so that rules may call each other whatever their order in this file.
template <class E>
struct reverse {
  static_assert(sizeof(E) == 0,
                "zenith autodiff: this expression node has no reverse-mode rule yet");
};

// ct is passed down the chain by forwarding reference and moved into the one node that takes it
// over: a cotangent expression holds its arrays by shared handle, and copying it at every node
// made a small gradient's fixed cost mostly reference counting; moving it by value at every
// call made it mostly copying (a cotangent deep in a chain is several hundred bytes).
template <class E, class G, class Sink>
void backward(E const& e, G&& ct, Sink& sink) {
  if constexpr (E::fixed) {
    // Only tensors and scalars below: no array, so nothing an array gradient reaches. (Tensor
    // functions are differentiated by the fixed-size transforms, transforms/jacobian.hpp.)
  } else if constexpr (uniform_v<std::remove_cvref_t<G>> &&
                       !folded_uniform_v<std::remove_cvref_t<G>>) {
    reverse<E>::run(e, fold_uniform(ct), sink);  // constants alone: one value (uniform.hpp)
  } else {
    reverse<E>::run(e, std::forward<G>(ct), sink);
  }
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

// Whether a cotangent enters a barrier's rule as it is: an array, or one folded value.
template <class G>
inline constexpr bool rule_ready_v = folded_uniform_v<G>;
template <element T>
inline constexpr bool rule_ready_v<array<T>> = true;

// A barrier evaluated once (autodiff/memoize.hpp): the barrier's own rule. The cotangent of a
// barrier op (matmul, conv2d, softmax, layer_norm, concatenate) is evaluated into an array
// first, unless it is one or a folded constant: the rule, and every cotangent it builds for the
// op's operands, are then compiled once per op and operand types, not once for each expression
// that reaches the op. That pass is one a kernel's operand needs anyway, and small beside the
// rule's own (a softmax's reads the cotangent twice). A reduction's cotangent is its own: it is
// the size of the reduced result, often a scalar whose broadcast the loops below read best.
template <class B>
struct reverse<memo_node<B>> {
  template <class G, class Sink>
  static void run(memo_node<B> const& e, G&& ct, Sink& sink) {
    using T = value_t<B>;
    if constexpr (!is_reduce_node_v<B> && !rule_ready_v<std::remove_cvref_t<G>>)
      run(e, zenith::detail::evaluate_for_rules<T, 1>(zenith::detail::convert<T>(ct)), sink);
    else if constexpr (requires { reverse<B>::run(e.node, std::forward<G>(ct), sink, &e.value); })
      reverse<B>::run(e.node, std::forward<G>(ct), sink, &e.value);  // a rule reading the value
    else
      backward(e.node, std::forward<G>(ct), sink);
  }
};

namespace detail {
template <class C>
inline constexpr bool differentiable_v = floating_element<value_t<C>>;

template <class C>
inline constexpr bool elementwise_node_v = false;
template <class Op, class... Cs>
inline constexpr bool elementwise_node_v<map_node<Op, Cs...>> = true;
// An elementwise node kept by memoize: elementwise too (it takes a broadcast cotangent as is).
template <class C>
inline constexpr bool elementwise_node_v<reuse_node<C>> = elementwise_node_v<C>;

// The cotangent of a child, in its element type. An elementwise child takes it as it is, even
// when it is broadcast to a larger shape: the child's own partials broadcast along, and summing
// commutes with multiplying by something constant along the summed axes. So the sum down to
// the child's shape happens once, where the chain meets a leaf or any other node, instead of
// once per broadcasting op: fewer reductions at run time, and far smaller cotangent types (a
// chain of d ops would otherwise nest d sum_to nodes, each compiled into its own loop).
template <class C, class G>
auto to_child(C const& c, G&& ct) {
  if constexpr (elementwise_node_v<C>)
    return zenith::detail::convert<value_t<C>>(std::forward<G>(ct));
  else
    return sum_to(zenith::detail::convert<value_t<C>>(std::forward<G>(ct)), c.shape());
}
}  // namespace detail

// Elementwise: child I gets ct * partial<I>, unbroadcast.
template <class Op, class... Cs>
struct reverse<map_node<Op, Cs...>> {
  template <std::size_t J>
  static constexpr bool takes_cotangent = operand_differentiable_v<Op, J, Cs...>;
  // The last operand that takes a cotangent: it gets ct itself, moved, the others a copy.
  static constexpr std::size_t last_taker = []<std::size_t... I>(std::index_sequence<I...>) {
    std::size_t last = sizeof...(Cs);
    ((last = takes_cotangent<I> ? I : last), ...);
    return last;
  }
  (std::index_sequence_for<Cs...>{});

  static constexpr std::size_t takers = []<std::size_t... I>(std::index_sequence<I...>) {
    return (std::size_t(takes_cotangent<I>) + ... + 0);
  }
  (std::index_sequence_for<Cs...>{});

  template <class G, class Sink>
  static void run(map_node<Op, Cs...> const& e, G&& ct, Sink& sink) {
    run_as(e, e, std::forward<G>(ct), sink);
  }
  // The same rule, with y standing for e's value in the partials: e's kept form (a reuse_node
  // from memoize), so that a rule reading the value (exp's is y itself) reads it stored.
  template <class Y, class G, class Sink>
  static void run_as(Y const& y, map_node<Op, Cs...> const& e, G&& ct, Sink& sink) {
    using Gv = std::remove_cvref_t<G>;
    if constexpr (piecewise_constant_op<Op>()) {
      // Zero almost everywhere: no cotangent flows (as in JAX).
    } else if constexpr (takers >= 2 && costly_v<Gv> && std::is_floating_point_v<value_t<Gv>>) {
      // Every operand's cotangent would recompute ct's transcendentals: evaluate ct once.
      each(y, e, reuse_node<Gv>(std::forward<G>(ct)), sink);
    } else if constexpr (takers >= 2 && tree_copy_v<Gv>) {
      // Each operand's cotangent holds ct: one tree behind a shared handle, not a copy each.
      each(y, e, shared_ref<Gv>(std::forward<G>(ct)), sink);
    } else {
      each(y, e, std::forward<G>(ct), sink);
    }
  }

 private:
  template <class Y, class G, class Sink>
  static void each(Y const& y, map_node<Op, Cs...> const& e, G&& ct, Sink& sink) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
        if constexpr (takes_cotangent<J>) {
          auto const& c = zenith::get<J>(e.children);
          auto local = zenith::detail::apply(
              [&](auto const&... xs) { return Op::template partial<J>(y, xs...); }, e.children);
          if constexpr (J == last_taker)
            backward(c, detail::to_child(c, std::forward<G>(ct) * std::move(local)), sink);
          else
            backward(c, detail::to_child(c, ct * std::move(local)), sink);
        }
      };
      (one(std::integral_constant<std::size_t, I>{}), ...);
    }
    (std::index_sequence_for<Cs...>{});
  }
};

// Reductions: sum and mean broadcast the cotangent back over the reduced axes.
namespace detail {
// The cotangent of a reduction's output, reshaped with the reduced axes as 1 and broadcast to
// the child's shape.
template <class Op, class C, class G>
auto spread(reduce_node<Op, C> const& e, G&& ct) {
  zenith::shape in = e.child.shape(), kept;
  for (std::size_t k = 0; k < in.size(); ++k) kept.push_back(e.reduces(k) ? 1 : in[k]);
  return broadcast_to(reshape(std::forward<G>(ct), kept), in);
}
}  // namespace detail

template <class Op, class C>
requires(std::is_same_v<Op, ops::reduce_sum> ||
         std::is_same_v<Op, ops::reduce_mean>) struct reverse<reduce_node<Op, C>> {
  template <class G, class Sink>
  static void run(reduce_node<Op, C> const& e, G&& ct, Sink& sink) {
    if constexpr (detail::differentiable_v<C>) {
      if constexpr (std::is_same_v<Op, ops::reduce_sum>)
        backward(e.child,
                 zenith::detail::convert<value_t<C>>(detail::spread(e, std::forward<G>(ct))), sink);
      else
        backward(e.child,
                 zenith::detail::convert<value_t<C>>(detail::spread(e, std::forward<G>(ct)) /
                                                     double(e.count())),
                 sink);
    }
  }
};

namespace detail {
// The child's shape with the reduced axes kept as 1.
template <class Op, class C>
zenith::shape kept_shape(reduce_node<Op, C> const& e) {
  zenith::shape in = e.child.shape(), kept;
  for (std::size_t k = 0; k < in.size(); ++k) kept.push_back(e.reduces(k) ? 1 : in[k]);
  return kept;
}
// The reduction's result with the reduced axes kept as 1: the forward value (memoized) under
// that shape, or computed here.
template <class Op, class C>
array<value_t<reduce_node<Op, C>>> kept_value(reduce_node<Op, C> const& e,
                                              array<value_t<reduce_node<Op, C>>> const* value) {
  using T = value_t<reduce_node<Op, C>>;
  if (value)
    return array<T>::from_buffer(value->storage(), const_cast<T*>(value->data()), kept_shape(e));
  return zenith::detail::evaluate_unrecorded<T>(reduce_node<Op, C>(e.child, e.axes, true),
                                                Op::name);
}
}  // namespace detail

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
      array<T> m = detail::kept_value(e, value);
      auto hit = zenith::detail::as_number<C>(e.child == broadcast_to(m, e.child.shape()));
      // Piecewise constant: its derivative is zero, so it needs no recording.
      array<T> count = zenith::detail::evaluate_untraced<T>(
          reduce_node<ops::reduce_sum, decltype(hit)>(hit, e.axes, true));
      backward(e.child, zenith::detail::convert<T>(detail::spread(e, ct) * hit / count), sink);
    }
  }
};

// prod: d/dx_i = the product of the others. With no zero in a group that is prod / x_i; with
// exactly one zero it is the product of the non-zeros at the zero and 0 elsewhere; with more
// zeros it is 0 everywhere. The groups' zero counts and non-zero products are computed only
// when the forward result has a zero (or NaN). Forward mode (autodiff/forward.hpp) shares it.
namespace detail {
template <class C>
auto prod_partial(reduce_node<ops::reduce_prod, C> const& e, array<value_t<C>> const* value) {
  using T = value_t<C>;
  array<T> p = kept_value(e, value);
  // Which rule applies depends on the values: a replay could not take the other one.
  zenith::detail::note_unreplayable("the derivative of prod");
  array<T> ph = p.device() == cpu ? p : p.to(cpu);  // read here, from a device array's copy
  bool plain = true;
  for (std::size_t i = 0; i < ph.size(); ++i)
    plain = plain && ph.data()[i] == ph.data()[i] && ph.data()[i] != T(0);
  array<T> zeros_in, nonzero_prod;  // per group, kept shape
  if (plain) {
    zeros_in = zeros<T>(zenith::shape{}, p.device());  // no x is 0 (else p would be 0 or NaN)
    nonzero_prod = p;
  } else {
    auto is_zero = zenith::detail::as_number<C>(e.child == T(0));
    zeros_in = zenith::detail::evaluate_untraced<T>(  // piecewise constant
        reduce_node<ops::reduce_sum, decltype(is_zero)>(is_zero, e.axes, true));
    auto nonzero = where(e.child == T(0), T(1), e.child);
    nonzero_prod = zenith::detail::evaluate_unrecorded<T>(
        reduce_node<ops::reduce_prod, decltype(nonzero)>(nonzero, e.axes, true),
        "prod over a group with a zero");
  }
  return where(e.child == T(0), where(zeros_in == T(1), nonzero_prod, T(0)),
               where(zeros_in == T(0), nonzero_prod / e.child, T(0)));
}
}  // namespace detail

template <class C>
struct reverse<reduce_node<ops::reduce_prod, C>> {
  using T = value_t<C>;
  template <class G, class Sink>
  static void run(reduce_node<ops::reduce_prod, C> const& e, G const& ct, Sink& sink,
                  array<T> const* value = nullptr) {
    if constexpr (detail::differentiable_v<C>)
      backward(e.child,
               zenith::detail::convert<T>(detail::spread(e, ct) * detail::prod_partial(e, value)),
               sink);
  }
};

// logsumexp: d/dx = exp(x - logsumexp(x)), reading the forward result.
template <class C>
struct reverse<reduce_node<ops::reduce_logsumexp, C>> {
  using T = value_t<C>;
  template <class G, class Sink>
  static void run(reduce_node<ops::reduce_logsumexp, C> const& e, G const& ct, Sink& sink,
                  array<T> const* value = nullptr) {
    if constexpr (detail::differentiable_v<C>) {
      array<T> lse = detail::kept_value(e, value);
      backward(e.child,
               zenith::detail::convert<T>(detail::spread(e, ct) *
                                          exp(e.child - broadcast_to(lse, e.child.shape()))),
               sink);
    }
  }
};

// The reverse pass's own nodes, so that a backward pass can itself be differentiated: sum_to
// and fold_to broadcast back, pad slices, shared passes through.
template <class C>
struct reverse<sum_to_node<C>> {
  template <class G, class Sink>
  static void run(sum_to_node<C> const& e, G const& ct, Sink& sink) {
    backward(e.child, broadcast_to(ct, e.child.shape()), sink);
  }
};
template <class C>
struct reverse<fold_to_node<C>> {
  template <class G, class Sink>
  static void run(fold_to_node<C> const& e, G const& ct, Sink& sink) {
    backward(e.child, broadcast_to(reshape(ct, e.full), e.child.shape()), sink);
  }
};
template <class C>
struct reverse<pad_node<C>> {
  template <class G, class Sink>
  static void run(pad_node<C> const& e, G const& ct, Sink& sink) {
    backward(e.child, view_node<views::slice, G>(ct, e.view), sink);
  }
};
template <class C>
struct reverse<shared_node<C>> {
  template <class G, class Sink>
  static void run(shared_node<C> const& e, G const& ct, Sink& sink) {
    backward(e.child, ct, sink);
  }
};
template <class C>
struct reverse<shared_ref<C>> {
  template <class G, class Sink>
  static void run(shared_ref<C> const& e, G&& ct, Sink& sink) {
    backward(e.child(), std::forward<G>(ct), sink);
  }
};
template <class C>
struct reverse<reuse_node<C>> {
  template <class G, class Sink>
  static void run(reuse_node<C> const& e, G&& ct, Sink& sink) {
    if constexpr (detail::elementwise_node_v<C>)
      reverse<C>::run_as(e, e.child(), std::forward<G>(ct), sink);  // its partials read e, kept
    else
      backward(e.child(), std::forward<G>(ct), sink);
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
// slice: the cotangent written into zeros of the child's shape.
template <class C>
struct reverse<view_node<views::slice, C>> {
  template <class G, class Sink>
  static void run(view_node<views::slice, C> const& e, G const& ct, Sink& sink) {
    backward(e.child, pad_node<G>(ct, e.child.shape(), e.view), sink);
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

}  // namespace zenith::autodiff
