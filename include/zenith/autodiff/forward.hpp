#pragma once
// Forward mode over an expression type: tangent_of(e, ts) is the tangent of e (an expression of
// e's shape) given the tangents of the arrays it reads, built down the type as the reverse pass
// is (autodiff/backward.hpp) and evaluated in one fused pass. Elementwise ops take their rule from
// the same partial<I> on their tags: the tangent is the sum of partial_I * tangent(child_I).
// The barrier ops' rules are in autodiff/rules/, beside their reverse ones. An array with no
// tangent (not traced by jvp) contributes zero.
//
// Runtime code (materialized intermediates) is handled eagerly: under jvp each materialization
// computes its tangent at once (autodiff/tape.hpp), so forward mode needs no tape.
#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/cpu/evaluate.hpp"
#include "../core/apply.hpp"
#include "../core/creation.hpp"
#include "../core/small_map.hpp"
#include "../core/trace.hpp"
#include "backward.hpp"
#include "memoize.hpp"

namespace zenith::autodiff {

// The tangent of each traced buffer (one map per floating element type). Holds the buffers, so
// their identities stay unique while the tangents are in use.
class tangents {
 public:
  template <class T>
  array<T> const* find(buffer const* b) const {
    return std::get<map<T>>(maps_).find(b);
  }
  template <class T>
  void set(std::shared_ptr<buffer> const& b, array<T> t) {
    std::get<map<T>>(maps_).insert_or_assign(b.get(), std::move(t));
    held_.push_back(b);
  }

 private:
  template <class T>
  using map = zenith::detail::small_map<buffer const*, array<T>>;
  std::tuple<map<float>, map<double>, map<bfloat16>, map<float16>> maps_;
  std::vector<std::shared_ptr<buffer>> held_;
};

// forward<E>::run(e, ts): the tangent of node type E. Like reverse<E>, a node with no rule fails
// to compile with a message saying so.
template <class E>
struct forward {
  static_assert(sizeof(E) == 0,
                "zenith autodiff: this expression node has no forward-mode rule yet");
};

namespace detail {
// A zero tangent shaped like e, as a stride-0 view of one zero held in an array on e's device:
// an array leaf's tangent, which is either its tangent array or this, one type.
template <class E>
auto zero_tangent(E const& e) {
  using T = value_t<E>;
  return broadcast_to(zeros<T>(zenith::shape{}, zenith::detail::device_of(e)), e.shape());
}
// A zero tangent shaped like e, as a stride-0 view of the number zero: for any other node whose
// tangent is zero. It fits an expression on any device (a node of numbers alone, a seed, has no
// array to take a device from) and allocates nothing.
template <class E>
auto constant_zero_tangent(E const& e) {
  using T = value_t<E>;
  return broadcast_to(scalar_node<T>(T(0)), e.shape());
}
}  // namespace detail

template <class E>
auto tangent_of(E const& e, tangents const& ts) {
  if constexpr (E::fixed || !detail::differentiable_v<E>)
    return detail::constant_zero_tangent(e);  // tensors, scalars, integers: constants here
  else
    return forward<E>::run(e, ts);
}

// Leaves: an array's tangent, or zero. Both are the same expression type.
template <element T>
struct forward<array<T>> {
  static auto run(array<T> const& a, tangents const& ts) {
    if (array<T> const* t = ts.find<T>(a.storage().get())) return broadcast_to(*t, a.shape());
    return detail::zero_tangent(a);
  }
};

template <class B>
struct forward<memo_node<B>> {
  static auto run(memo_node<B> const& e, tangents const& ts) {
    if constexpr (requires { forward<B>::run(e.node, ts, &e.value); })
      return forward<B>::run(e.node, ts, &e.value);
    else
      return forward<B>::run(e.node, ts);
  }
};

// Elementwise: sum over operands of partial<I> * tangent(operand I).
template <class Op, class... Cs>
struct forward<map_node<Op, Cs...>> {
  using E = map_node<Op, Cs...>;
  using T = value_t<E>;

  static auto run(E const& e, tangents const& ts) { return run_as(e, e, ts); }
  // With y standing for e's value in the partials (see reverse<map_node>::run_as).
  template <class Y>
  static auto run_as(Y const& y, E const& e, tangents const& ts) {
    if constexpr (piecewise_constant_op<Op>()) {
      return detail::constant_zero_tangent(e);
    } else {
      auto terms = [&]<std::size_t... I>(std::index_sequence<I...>) {
        return std::tuple_cat(term<I>(y, e, ts)...);
      }
      (std::index_sequence_for<Cs...>{});
      if constexpr (std::tuple_size_v<decltype(terms)> == 0)
        return detail::constant_zero_tangent(e);
      else
        return zenith::detail::apply(
            [&](auto const&... t) {
              return broadcast_to(zenith::detail::convert<T>((t + ...)), e.shape());
            },
            terms);
    }
  }

 private:
  template <std::size_t J, class Y>
  static auto term(Y const& y, E const& e, tangents const& ts) {
    if constexpr (!operand_differentiable_v<Op, J, Cs...>) {
      return std::tuple<>{};
    } else {
      auto local = zenith::detail::apply(
          [&](auto const&... xs) { return Op::template partial<J>(y, xs...); }, e.children);
      return std::tuple{
          zenith::detail::convert<T>(local * tangent_of(zenith::get<J>(e.children), ts))};
    }
  }
};

// Reductions.
template <class Op, class C>
requires(std::is_same_v<Op, ops::reduce_sum> ||
         std::is_same_v<Op, ops::reduce_mean>) struct forward<reduce_node<Op, C>> {
  static auto run(reduce_node<Op, C> const& e, tangents const& ts,
                  array<value_t<C>> const* = nullptr) {
    auto t = tangent_of(e.child, ts);
    return reduce_node<Op, decltype(t)>(t, e.axes, e.keepdims);
  }
};

template <class Op, class C>
requires(std::is_same_v<Op, ops::reduce_max> ||
         std::is_same_v<Op, ops::reduce_min>) struct forward<reduce_node<Op, C>> {
  using T = value_t<C>;
  static auto run(reduce_node<Op, C> const& e, tangents const& ts,
                  array<T> const* value = nullptr) {
    array<T> m = detail::kept_value(e, value);
    auto hit = zenith::detail::as_number<C>(e.child == broadcast_to(m, e.child.shape()));
    array<T> count = zenith::detail::evaluate_untraced<T>(  // piecewise constant
        reduce_node<ops::reduce_sum, decltype(hit)>(hit, e.axes, true));
    auto w = zenith::detail::convert<T>(tangent_of(e.child, ts) * hit / count);
    return reduce_node<ops::reduce_sum, decltype(w)>(w, e.axes, e.keepdims);
  }
};

template <class C>
struct forward<reduce_node<ops::reduce_prod, C>> {
  using T = value_t<C>;
  static auto run(reduce_node<ops::reduce_prod, C> const& e, tangents const& ts,
                  array<T> const* value = nullptr) {
    auto w = zenith::detail::convert<T>(tangent_of(e.child, ts) * detail::prod_partial(e, value));
    return reduce_node<ops::reduce_sum, decltype(w)>(w, e.axes, e.keepdims);
  }
};

template <class C>
struct forward<reduce_node<ops::reduce_logsumexp, C>> {
  using T = value_t<C>;
  static auto run(reduce_node<ops::reduce_logsumexp, C> const& e, tangents const& ts,
                  array<T> const* value = nullptr) {
    array<T> lse = detail::kept_value(e, value);
    auto w = zenith::detail::convert<T>(tangent_of(e.child, ts) *
                                        exp(e.child - broadcast_to(lse, e.child.shape())));
    return reduce_node<ops::reduce_sum, decltype(w)>(w, e.axes, e.keepdims);
  }
};

// Views and reshapes: the same view of the tangent.
template <class V, class C>
struct forward<view_node<V, C>> {
  static auto run(view_node<V, C> const& e, tangents const& ts) {
    auto t = tangent_of(e.child, ts);
    return view_node<V, decltype(t)>(t, e.view);
  }
};
template <class C>
struct forward<reshape_node<C>> {
  static auto run(reshape_node<C> const& e, tangents const& ts) {
    auto t = tangent_of(e.child, ts);
    return reshape_node<decltype(t)>(t, e.shape());
  }
};

// The reverse pass's own nodes are linear: the same node over the tangent.
template <class C>
struct forward<sum_to_node<C>> {
  static auto run(sum_to_node<C> const& e, tangents const& ts) {
    return sum_to(tangent_of(e.child, ts), e.shape());
  }
};
template <class C>
struct forward<fold_to_node<C>> {
  static auto run(fold_to_node<C> const& e, tangents const& ts) {
    auto t = tangent_of(e.child, ts);
    return fold_to_node<decltype(t)>(t, e.full, e.shape());
  }
};
template <class C>
struct forward<pad_node<C>> {
  static auto run(pad_node<C> const& e, tangents const& ts) {
    auto t = tangent_of(e.child, ts);
    return pad_node<decltype(t)>(t, e.shape(), e.view);
  }
};
template <class C>
struct forward<shared_node<C>> {
  static auto run(shared_node<C> const& e, tangents const& ts) { return tangent_of(e.child, ts); }
};
template <class C>
struct forward<shared_ref<C>> {
  static auto run(shared_ref<C> const& e, tangents const& ts) { return tangent_of(e.child(), ts); }
};
template <class C>
struct forward<reuse_node<C>> {
  static auto run(reuse_node<C> const& e, tangents const& ts) {
    if constexpr (detail::elementwise_node_v<C>)
      return forward<C>::run_as(e, e.child(), ts);  // its partials read e, kept
    else
      return tangent_of(e.child(), ts);
  }
};

}  // namespace zenith::autodiff
