#pragma once
// The reverse pass of a staged fixed-size expression (expr/staged.hpp), part 1: the evaluator
// protocol, and the evaluators of constants, staged arguments, elementwise ops and index maps.
// The barriers' evaluators are in staged_barriers.hpp, user rules' in staged_custom.hpp, and
// the entry point, value_and_backward, in staged_reverse.hpp.
//
// The expression's type is the whole computation, so the pass is generated from it: every loop
// runs over compile-time bounds, nothing is recorded at run time, nothing touches the heap. An
// evaluator (eval<E>) mirrors each node and walks it in four steps:
//
//   forward()    evaluates the barriers below the node (reductions, matmul) into their own
//                arrays and zeroes their adjoints;
//   value(i)     the node's value at flat index i, in the forward direction;
//   back(i, a)   adds adjoint a at element i: an elementwise node passes a times its op's
//                partial (the op tag's rule, expr/ops.hpp) to each child at the child's
//                (broadcast) index; a barrier adds a into its adjoint array;
//   finish()     once its parent's loop has added every adjoint: each barrier below runs its
//                own rule over its input (a sum hands its adjoint to every input element, a
//                matmul takes two products) and that input's backward loop.
//
// Elementwise intermediates are recomputed in the backward loops rather than stored (again(i)),
// like the array path's fused backward: except a costly op's value (exp, sin, ...; Op::costly),
// which its node keeps from the forward loop, so log(sum(exp(x))) evaluates exp once per element.
// The two directions of one barrier's input so cost about what hand-written loops cost.
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../backend/cpu/fixed_eval.hpp"
#include "../core/apply.hpp"
#include "../expr/fixed_ops.hpp"
#include "../expr/node.hpp"
#include "../expr/op_support.hpp"
#include "../expr/staged.hpp"

namespace zenith::autodiff::staged {

template <class Op>
constexpr bool takes_gradient(std::size_t k) {
  if constexpr (requires { Op::nondiff_operands; })
    return !((Op::nondiff_operands >> k) & 1u);
  else
    return true;
}

// Which staged arguments' gradients the pass assigns rather than adds to: bit s set for slot s
// when the backward writes each of its elements exactly once (see writes_each_once below), so
// the gradient needs no zeroing first and no read in the loop.
template <std::uint64_t AssignMask>
struct write_plan {
  static constexpr bool assigns(std::size_t slot) {
    return slot < 64 && ((AssignMask >> slot) & 1u);
  }
};

template <class E, class Ctx>
struct eval;

// What an evaluator is built from: the node it mirrors, and the call's staged arguments (a tuple
// of staged_argument by slot: where a staged_tensor leaf's values and gradient are).
template <class N, class Slots>
struct built_from {
  N const& node;
  Slots const& slots;
};
template <class N, class Slots>
ZENITH_FIXED_INLINE built_from<N, Slots> build(N const& node, Slots const& slots) {
  return {node, slots};
}

// Batches: a barrier's input is evaluated in the forward direction xsimd batch by batch where
// every node on the way can be (batch<B>(j): the values at j .. j + B::size, for j within the
// node's own elements), so costly ops run on their SIMD forms (xsimd's exp, sin, ...), as in
// the array path's loops. A node says so in `batches`; the backward loops stay scalar, where
// the compiler vectorizes the arithmetic and costly values are read back.
template <class T>
inline constexpr bool batch_type = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class T>
using batch_of = xsimd::batch<T>;

// The widest batch of T that the build has with at most W lanes (W a power of two) and at least
// 4: on AVX-512, 4 doubles below the native 8. void where there is none. Not 2: two doubles read
// as one vector just after a user rule wrote them one at a time (stochastic_volatility at T = 2)
// waited on store forwarding, and that call got slower than with two libm exp calls.
template <class T, std::size_t W>
struct fitting_batch {
  using sized = xsimd::make_sized_batch_t<T, W>;
  using type =
      std::conditional_t<std::is_void_v<sized>, typename fitting_batch<T, W / 2>::type, sized>;
};
template <class T, std::size_t W>
requires(W < 4) struct fitting_batch<T, W> {
  using type = void;
};
// The batch a sum over groups of Group elements folds with: the native one from two batches per
// group; below that the widest that fits a group (fitting_batch), so that a short sum of exp (a
// log-sum-exp of 4, a density over 4 or 8 time steps) still takes the SIMD exp rather than one
// libm call per element.
template <class T, std::size_t Group>
using fold_batch_t = typename std::conditional_t<
    (Group >= 2 * batch_of<T>::size), std::type_identity<batch_of<T>>,
    fitting_batch<T, std::bit_floor(std::min(Group, batch_of<T>::size))>>::type;

template <class Op>
constexpr bool simd_op() {
  if constexpr (requires { Op::mask_operands; })
    return false;  // comparisons' masks: the scalar path
  else
    return requires(batch_of<double> b) { Op::simd(b); }
  || requires(batch_of<double> b) { Op::simd(b, b); }
  || requires(batch_of<double> b) { Op::simd(b, b, b); };
}

// A node's values, kept only where the node needs them (a costly op's).
template <bool Keep, class Y, std::size_t Size>
struct kept_values {
  ZENITH_FIXED_INLINE void put(std::size_t, Y const&) {}
};
template <class Y, std::size_t Size>
struct kept_values<true, Y, Size> {
  std::array<Y, Size> v;
  ZENITH_FIXED_INLINE void put(std::size_t i, Y const& y) { v[i] = y; }
  ZENITH_FIXED_INLINE Y const& get(std::size_t i) const { return v[i]; }
};

// f(j) for j in 0 .. N: a backward loop over a node's elements. A short one is left to the
// compiler to unroll; from rolled_loop_from elements on it stays a loop, which the compiler
// vectorizes. (Unrolled in full, up to 16 iterations at -O3, its scalar body is left to the SLP
// vectorizer, which packed only the stores: sum(square(x - mu))'s gradient at N = 16 ran at
// half the speed of the loop.)
inline constexpr std::size_t rolled_loop_from = 8;
template <std::size_t N, class F>
ZENITH_FIXED_INLINE void backward_loop(F&& f) {
  if constexpr (N >= rolled_loop_from) {
#pragma GCC unroll 1
    for (std::size_t j = 0; j < N; ++j) f(j);
  } else {
    for (std::size_t j = 0; j < N; ++j) f(j);
  }
}

// A subtree with no staged tensor: a constant. A tensor is read where it is; a number or a
// tensor_ref is copied (referring to the expression's copy would keep the whole expression in
// memory); anything else is evaluated once into a tensor, so a broadcast constant is not
// recomputed per element.
template <class E, class Ctx>
requires(!zenith::detail::staged_node<E>()) struct eval<E, Ctx> {
  using held = std::conditional_t<
      is_tensor_v<E>, E const&,
      std::conditional_t<is_tensor_like_v<E> || is_scalar_node_v<E>, E,
                         zenith::detail::tensor_of_t<value_t<E>, zenith::detail::shape_of_t<E>>>>;
  held e;
  template <class Slots>
  eval(built_from<E, Slots> b) : e(b.node) {}  // NOLINT: built from the node it mirrors
  ZENITH_FIXED_INLINE void forward() {}
  ZENITH_FIXED_INLINE auto value(std::size_t i) const { return e.at(i); }
  ZENITH_FIXED_INLINE auto again(std::size_t i) const { return e.at(i); }
  ZENITH_FIXED_INLINE void finish() {}

  static constexpr bool batches = batch_type<value_t<E>> && !is_scalar_node_v<E>;
  template <class B>
  ZENITH_FIXED_INLINE B batch(std::size_t j) const {
    return B::load_unaligned(e.data() + j);
  }
};

// A staged argument: its values; its adjoints go into its gradient.
template <std::size_t Slot, class T, std::size_t... N, class Ctx>
struct eval<staged_tensor<Slot, T, N...>, Ctx> {
  tensor<T, N...> const* values;
  T const* x;
  T* g;
  template <class Slots>
  eval(built_from<staged_tensor<Slot, T, N...>, Slots> b)  // NOLINT
      : values(std::get<Slot>(b.slots).values),
        x(values->data()),
        g(std::get<Slot>(b.slots).gradient->data()) {}
  ZENITH_FIXED_INLINE void forward() {}
  ZENITH_FIXED_INLINE compute_t<T> value(std::size_t i) const { return compute_t<T>(x[i]); }
  ZENITH_FIXED_INLINE compute_t<T> again(std::size_t i) const { return compute_t<T>(x[i]); }
  static constexpr bool batches = batch_type<T>;
  template <class B>
  ZENITH_FIXED_INLINE B batch(std::size_t j) const {
    return B::load_unaligned(x + j);
  }
  template <class A>
  ZENITH_FIXED_INLINE void back(std::size_t i, A const& a) {
    if constexpr (Ctx::assigns(Slot))
      g[i] = T(compute_t<T>(a));
    else
      g[i] = T(compute_t<T>(g[i]) + compute_t<T>(a));
  }
  ZENITH_FIXED_INLINE void finish() {}
};

// An elementwise op: the rules are its tag's partial<K>.
template <class Op, class... Cs, class Ctx>
requires(zenith::detail::staged_node<map_node<Op, Cs...>>()) struct eval<map_node<Op, Cs...>, Ctx> {
  using node = map_node<Op, Cs...>;
  using S = typename node::static_shape;
  using kids_t = std::tuple<eval<Cs, Ctx>...>;
  using Y = decltype(Op::apply(std::declval<eval<Cs, Ctx>&>().value(0)...));
  static constexpr bool keep = costly_op<Op>();

  // A staged child of one element under a larger node (a rank-0 argument, a total sum,
  // broadcast): its adjoint is summed here over the loop and passed once in finish(), so the
  // loop carries no dependency through the child's memory and can vectorize.
  template <class Ck>
  static constexpr bool gathers() {
    return zenith::detail::staged_node<Ck>() && Ck::static_shape::size == 1 && S::size > 1;
  }
  template <class Ck>
  using gathered_t =
      std::conditional_t<gathers<Ck>(),
                         std::remove_cvref_t<decltype(std::declval<eval<Ck, Ctx>&>().again(0))>,
                         std::tuple<>>;

  kids_t kids;
  [[no_unique_address]] kept_values<keep, Y, S::size> kept;
  std::tuple<gathered_t<Cs>...> gathered{};

  template <class Slots>
  eval(built_from<node, Slots> b)  // NOLINT
      : kids(zenith::detail::apply([&](Cs const&... c) { return kids_t(build(c, b.slots)...); },
                                   b.node.children)) {}

  template <std::size_t K>
  static constexpr std::size_t at(std::size_t i) {
    return fixed_broadcast_index<typename std::tuple_element_t<K, std::tuple<Cs...>>::static_shape,
                                 S>(i);
  }

  // Each child either runs along with this node (same shape, batches itself) or is one value.
  template <class Ck>
  static constexpr bool kid_batches() {
    using KV = std::remove_cvref_t<decltype(std::declval<eval<Ck, Ctx>&>().value(0))>;
    if constexpr (!std::is_same_v<KV, Y>)
      return false;
    else if constexpr (std::is_same_v<typename Ck::static_shape, S>)
      return eval<Ck, Ctx>::batches;
    else
      return Ck::static_shape::size == 1;
  }
  static constexpr bool batches = batch_type<Y> && simd_op<Op>() && (kid_batches<Cs>() && ...);
  template <class B>
  ZENITH_FIXED_INLINE B batch(std::size_t j) {
    B const y = [&]<std::size_t... K>(std::index_sequence<K...>) ZENITH_FIXED_LAMBDA {
      return Op::simd(kid_batch<K, B>(j)...);
    }
    (std::index_sequence_for<Cs...>{});
    if constexpr (keep) y.store_unaligned(kept.v.data() + j);
    return y;
  }
  template <std::size_t K, class B>
  ZENITH_FIXED_INLINE B kid_batch(std::size_t j) {
    using Ck = std::tuple_element_t<K, std::tuple<Cs...>>;
    if constexpr (std::is_same_v<typename Ck::static_shape, S>)
      return std::get<K>(kids).template batch<B>(j);
    else
      return B(std::get<K>(kids).value(0));
  }

  ZENITH_FIXED_INLINE void forward() {
    zenith::detail::apply([](auto&... k) ZENITH_FIXED_LAMBDA { (k.forward(), ...); }, kids);
    [&]<std::size_t... K>(std::index_sequence<K...>) ZENITH_FIXED_LAMBDA {
      ((gathers<Cs>() ? void(std::get<K>(gathered) = gathered_t<Cs>()) : void()), ...);
    }
    (std::index_sequence_for<Cs...>{});
  }
  ZENITH_FIXED_INLINE Y value(std::size_t i) {
    Y const y = [&]<std::size_t... K>(std::index_sequence<K...>) ZENITH_FIXED_LAMBDA {
      return Op::apply(std::get<K>(kids).value(at<K>(i))...);
    }
    (std::index_sequence_for<Cs...>{});
    kept.put(i, y);
    return y;
  }
  ZENITH_FIXED_INLINE Y again(std::size_t i) {
    if constexpr (keep)
      return kept.get(i);
    else
      return [&]<std::size_t... K>(std::index_sequence<K...>) ZENITH_FIXED_LAMBDA {
        return Op::apply(std::get<K>(kids).again(at<K>(i))...);
      }
    (std::index_sequence_for<Cs...>{});
  }
  template <class A>
  ZENITH_FIXED_INLINE void back(std::size_t i, A const& a) {
    if constexpr (!piecewise_constant_op<Op>()) {
      [&]<std::size_t... K>(std::index_sequence<K...>) ZENITH_FIXED_LAMBDA {
        auto const xs = std::make_tuple(std::get<K>(kids).again(at<K>(i))...);
        Y const y = [&]() ZENITH_FIXED_LAMBDA {
          if constexpr (keep)
            return kept.get(i);
          else
            return Op::apply(std::get<K>(xs)...);
        }();
        (pass<K>(i, a, y, xs), ...);
      }
      (std::index_sequence_for<Cs...>{});
    }
  }
  ZENITH_FIXED_INLINE void finish() {
    [&]<std::size_t... K>(std::index_sequence<K...>) ZENITH_FIXED_LAMBDA { (finish_kid<K>(), ...); }
    (std::index_sequence_for<Cs...>{});
  }

 private:
  template <std::size_t K, class A, class X>
  ZENITH_FIXED_INLINE void pass(std::size_t i, A const& a, Y const& y, X const& xs) {
    using C = std::tuple_element_t<K, std::tuple<Cs...>>;
    if constexpr (zenith::detail::staged_node<C>() && takes_gradient<Op>(K)) {
      using KV = std::remove_cvref_t<std::tuple_element_t<K, X>>;
      auto const p = zenith::detail::apply(
          [&](auto const&... x) ZENITH_FIXED_LAMBDA { return Op::template partial<K>(y, x...); },
          xs);
      if constexpr (gathers<C>())
        std::get<K>(gathered) += KV(a * p);
      else
        std::get<K>(kids).back(at<K>(i), KV(a * p));
    }
  }
  template <std::size_t K>
  ZENITH_FIXED_INLINE void finish_kid() {
    using C = std::tuple_element_t<K, std::tuple<Cs...>>;
    if constexpr (gathers<C>() && takes_gradient<Op>(K) && !piecewise_constant_op<Op>())
      std::get<K>(kids).back(0, std::get<K>(gathered));
    std::get<K>(kids).finish();
  }
};

// transpose, reshape, cross's rotations: elementwise, through an index map.
template <class Map, class Shape, class E, class Ctx>
struct eval<staged_gather<Map, Shape, E>, Ctx> {
  eval<E, Ctx> kid;
  template <class Slots>
  eval(built_from<staged_gather<Map, Shape, E>, Slots> b)  // NOLINT
      : kid(build(b.node.child, b.slots)) {}
  ZENITH_FIXED_INLINE void forward() { kid.forward(); }
  ZENITH_FIXED_INLINE auto value(std::size_t i) { return kid.value(Map::index(i)); }
  static constexpr bool batches = false;
  ZENITH_FIXED_INLINE auto again(std::size_t i) { return kid.again(Map::index(i)); }
  template <class A>
  ZENITH_FIXED_INLINE void back(std::size_t i, A const& a) {
    if constexpr (zenith::detail::staged_node<E>()) kid.back(Map::index(i), a);
  }
  ZENITH_FIXED_INLINE void finish() { kid.finish(); }
};

}  // namespace zenith::autodiff::staged
