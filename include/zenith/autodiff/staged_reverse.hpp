#pragma once
// The reverse pass of a staged fixed-size expression (expr/staged.hpp): the value of a scalar
// expression over staged tensors, and its gradient added into each staged tensor's gradient.
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
#include <functional>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../backend/cpu/fixed_eval.hpp"
#include "../core/apply.hpp"
#include "../expr/fixed_ops.hpp"
#include "../expr/node.hpp"
#include "../expr/staged.hpp"

namespace zenith::autodiff::staged {

template <class Op>
constexpr bool costly() {
  if constexpr (requires { Op::costly; })
    return Op::costly;
  else
    return false;
}
template <class Op>
constexpr bool piecewise_constant() {
  if constexpr (requires { Op::piecewise_constant; })
    return Op::piecewise_constant;
  else
    return false;
}
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
  static constexpr bool keep = costly<Op>();

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
    if constexpr (!piecewise_constant<Op>()) {
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
    if constexpr (gathers<C>() && takes_gradient<Op>(K) && !piecewise_constant<Op>())
      std::get<K>(kids).back(0, std::get<K>(gathered));
    std::get<K>(kids).finish();
  }
};

// The barrier protocol shared by reductions and matmul: the output and its adjoint in arrays.
template <class C, std::size_t Size>
struct barrier_values {
  std::array<C, Size> out;
  std::array<C, Size> adj;
  ZENITH_FIXED_INLINE C value(std::size_t i) const { return out[i]; }
  ZENITH_FIXED_INLINE C again(std::size_t i) const { return out[i]; }
  template <class A>
  ZENITH_FIXED_INLINE void back(std::size_t i, A const& a) {
    adj[i] += C(a);
  }
  static constexpr bool batches = batch_type<C>;
  template <class B>
  ZENITH_FIXED_INLINE B batch(std::size_t j) const {
    return B::load_unaligned(out.data() + j);
  }
};

// Reads a child evaluator's forward values through the fixed-size `at` protocol, so that the
// reductions of backend/cpu/fixed_eval.hpp (vector folds) compute the barrier's output.
template <class Ev>
struct forward_reader {
  using value_type = std::remove_cvref_t<decltype(std::declval<Ev&>().value(0))>;
  Ev* ev;
  ZENITH_FIXED_INLINE auto at(std::size_t i) const { return ev->value(i); }
};

// sum, mean, prod, max, min over the axes of Plan.
template <class Kind, class Plan, class Shape, class T, class E, class Ctx>
struct eval<staged_reduce<Kind, Plan, Shape, T, E>, Ctx>
    : barrier_values<compute_t<T>, Plan::out_size> {
  using C = compute_t<T>;
  static constexpr std::size_t n_out = Plan::out_size, group = Plan::group;
  eval<E, Ctx> kid;

  template <class Slots>
  eval(built_from<staged_reduce<Kind, Plan, Shape, T, E>, Slots> b)  // NOLINT
      : kid(build(b.node.child, b.slots)) {}

  ZENITH_FIXED_INLINE void forward() {
    kid.forward();
    if constexpr (requires { *kid.values; })  // an argument itself: read where it is
      zenith::detail::fixed_reduce<typename Kind::op, Kind::mean, Plan>(this->out.data(),
                                                                        *kid.values);
    else if constexpr (folds_batches())
      fold_batches();
    else
      zenith::detail::fixed_reduce<typename Kind::op, Kind::mean, Plan>(
          this->out.data(), forward_reader<eval<E, Ctx>>{&kid});
    this->adj.fill(C(0));
  }

  // A sum or mean of an expression that batches, over contiguous groups of at least one batch
  // (fold_batch_t): folded batch by batch (four accumulators), the tail element by element.
  static constexpr bool folds_batches() {
    using KV = std::remove_cvref_t<decltype(std::declval<eval<E, Ctx>&>().value(0))>;
    if constexpr (!std::is_same_v<KV, C> || !batch_type<C>)
      return false;
    else
      return eval<E, Ctx>::batches && Plan::contiguous &&
             std::is_same_v<typename Kind::op, ops::add> && !std::is_void_v<fold_batch_t<C, group>>;
  }
  // The accumulators start at the first batches, not at zero: x + 0.0 is not x when x is -0.0,
  // so the compiler keeps every add of a zero accumulator, a chain of three dependent adds on a
  // sum of one batch (a density over 4 time steps).
  ZENITH_FIXED_INLINE void fold_batches() {
    using B = fold_batch_t<C, group>;
    constexpr std::size_t w = B::size, batches_in_group = group / w;
    constexpr std::size_t na = batches_in_group < 4 ? batches_in_group : 4;
    for (std::size_t o = 0; o < n_out; ++o) {
      std::size_t const base = o * group;
      std::array<B, na> acc;
      for (std::size_t a = 0; a < na; ++a) acc[a] = kid.template batch<B>(base + a * w);
      std::size_t j = na * w;
      if constexpr (na == 4)
        for (; j + 4 * w <= group; j += 4 * w)
          for (std::size_t a = 0; a < 4; ++a) acc[a] += kid.template batch<B>(base + j + a * w);
      for (; j + w <= group; j += w) acc[0] += kid.template batch<B>(base + j);
      B folded = acc[0];
      if constexpr (na == 4)
        folded = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      else if constexpr (na == 3)
        folded = (acc[0] + acc[1]) + acc[2];
      else if constexpr (na == 2)
        folded = acc[0] + acc[1];
      C r = xsimd::hadd(folded);
      for (; j < group; ++j) r += C(kid.value(base + j));
      this->out[o] = Kind::mean ? r / C(double(group)) : r;
    }
  }

  ZENITH_FIXED_INLINE void finish() {
    if constexpr (zenith::detail::staged_node<E>() && group > 0) {
      using KV = std::remove_cvref_t<decltype(kid.again(0))>;
      for (std::size_t o = 0; o < n_out; ++o) {
        C const a = this->adj[o];
        if constexpr (std::is_same_v<Kind, zenith::detail::fixed_sum_kind>) {
          member_loop(o,
                      [&](std::size_t j, std::size_t) ZENITH_FIXED_LAMBDA { kid.back(j, KV(a)); });
        } else if constexpr (std::is_same_v<Kind, zenith::detail::fixed_mean_kind>) {
          C const s = a / C(double(group));
          member_loop(o,
                      [&](std::size_t j, std::size_t) ZENITH_FIXED_LAMBDA { kid.back(j, KV(s)); });
        } else if constexpr (std::is_same_v<Kind, zenith::detail::fixed_prod_kind>) {
          // d prod / d x_g = the product of the others: prefix times suffix products, exact
          // when some x are zero.
          std::array<C, group> x, before;
          member_loop(
              o, [&](std::size_t j, std::size_t g) ZENITH_FIXED_LAMBDA { x[g] = C(kid.again(j)); });
          C run = C(1);
          for (std::size_t g = 0; g < group; ++g) {
            before[g] = run;
            run = run * x[g];
          }
          C after = C(1);
          for (std::size_t g = group; g-- > 0;) {
            kid.back(member(o, g), KV(a * before[g] * after));
            after = after * x[g];
          }
        } else {  // max, min: the adjoint split evenly between the elements that tie
          C const y = this->out[o];
          std::size_t ties = 0;
          member_loop(o, [&](std::size_t j, std::size_t)
                             ZENITH_FIXED_LAMBDA { ties += C(kid.again(j)) == y; });
          C const s = a / C(double(ties ? ties : 1));
          member_loop(o, [&](std::size_t j, std::size_t) ZENITH_FIXED_LAMBDA {
            if (C(kid.again(j)) == y) kid.back(j, KV(s));
          });
        }
      }
    }
    kid.finish();
  }

 private:
  // f(j, g) for the g-th input element j of output o.
  template <class F>
  ZENITH_FIXED_INLINE static void member_loop(std::size_t o, F&& f) {
    backward_loop<group>([&](std::size_t g) ZENITH_FIXED_LAMBDA { f(member(o, g), g); });
  }
  ZENITH_FIXED_INLINE static constexpr std::size_t member(std::size_t o, std::size_t g) {
    if constexpr (Plan::contiguous)  // the usual case: no table lookup, so the loops vectorize
      return o * group + g;
    else
      return Plan::members[o * group + g];
  }
};

// out (M x N) = a (M x K) b (K x N), row-major. Small products take the fixed-size kernel (a
// dot product per entry, unrolled); wider ones go row by row (out[i, :] += a[i, k] b[k, :]),
// whose inner loop runs along contiguous rows and vectorizes, instead of one dependency chain
// of K multiply-adds per entry.
template <std::size_t M, std::size_t K, std::size_t N, class C>
ZENITH_FIXED_INLINE void staged_product(C* __restrict out, C const* __restrict a,
                                        C const* __restrict b) {
  if constexpr (N < 10 || K < 4) {
    zenith::detail::matmul_elements<M, K, N>(out, a, b, nullptr, nullptr);
  } else {
    for (std::size_t i = 0; i < M; ++i) {
      C* o = out + i * N;
      for (std::size_t j = 0; j < N; ++j) o[j] = C(0);
      for (std::size_t k = 0; k < K; ++k) {
        C const aik = a[i * K + k];
        C const* bk = b + k * N;
        for (std::size_t j = 0; j < N; ++j) o[j] += aik * bk[j];
      }
    }
  }
}

// matmul of 1-D / 2-D operands, as (m x k) times (k x n): the adjoints are adj B^T and A^T adj.
template <class Dims, class Shape, class T, class A, class B, class Ctx>
struct eval<staged_matmul<Dims, Shape, T, A, B>, Ctx>
    : barrier_values<compute_t<T>, Dims::m * Dims::n> {
  using C = compute_t<T>;
  static constexpr std::size_t m = Dims::m, k = Dims::k, n = Dims::n;
  eval<A, Ctx> ka;
  eval<B, Ctx> kb;
  std::array<C, m * k> av;
  std::array<C, k * n> bv;

  template <class Slots>
  eval(built_from<staged_matmul<Dims, Shape, T, A, B>, Slots> b)  // NOLINT
      : ka(build(b.node.a, b.slots)), kb(build(b.node.b, b.slots)) {}

  ZENITH_FIXED_INLINE void forward() {
    ka.forward();
    kb.forward();
    zenith::detail::static_for<m * k>([&](auto j) ZENITH_FIXED_LAMBDA { av[j] = C(ka.value(j)); });
    zenith::detail::static_for<k * n>([&](auto j) ZENITH_FIXED_LAMBDA { bv[j] = C(kb.value(j)); });
    staged_product<m, k, n>(this->out.data(), av.data(), bv.data());
    this->adj.fill(C(0));
  }

  ZENITH_FIXED_INLINE void finish() {
    if constexpr (zenith::detail::staged_node<A>()) {  // dA (m x k) = adj (m x n) * B^T (n x k)
      using KV = std::remove_cvref_t<decltype(ka.again(0))>;
      std::array<C, n * k> bt;
      for (std::size_t r = 0; r < k; ++r)
        for (std::size_t c = 0; c < n; ++c) bt[c * k + r] = bv[r * n + c];
      std::array<C, m * k> da;
      staged_product<m, n, k>(da.data(), this->adj.data(), bt.data());
      backward_loop<m * k>([&](std::size_t j) ZENITH_FIXED_LAMBDA { ka.back(j, KV(da[j])); });
      ka.finish();
    }
    if constexpr (zenith::detail::staged_node<B>()) {  // dB (k x n) = A^T (k x m) * adj (m x n)
      using KV = std::remove_cvref_t<decltype(kb.again(0))>;
      std::array<C, k * m> at;
      for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c < k; ++c) at[c * m + r] = av[r * k + c];
      std::array<C, k * n> db;
      staged_product<k, m, n>(db.data(), at.data(), this->adj.data());
      backward_loop<k * n>([&](std::size_t j) ZENITH_FIXED_LAMBDA { kb.back(j, KV(db[j])); });
      kb.finish();
    }
  }
};

// Reading what a user rule (fwd, bwd: compiled apart, called) has just stored one element at a
// time. A vector load that spans several such stores cannot take its data from them and waits
// until they reach the cache: stochastic_volatility at T = 4 read fwd's 4 results as one vector
// right after the call, and that load was the pass's hottest instruction (a seventh of its
// time). So short results are read element by element, each through an empty asm that keeps
// the compiler from merging the loads back into one, and put together in registers. Up to 8
// elements: the loads and inserts for 16 cost more than the one wait they save (T = 16 measured
// slower in bench/fastad_suite).
inline constexpr std::size_t lane_by_lane_up_to = 8;  // elements of the rule's result
template <class C>
ZENITH_FIXED_INLINE C load_alone(C const& x) {
  C v = x;
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+x"(v));
#elif defined(__aarch64__)
    __asm__("" : "+w"(v));
#endif
  }
  return v;
}
template <class B, class C>
ZENITH_FIXED_INLINE B load_lane_by_lane(C const* p) {
  typedef C vec __attribute__((vector_size(B::size * sizeof(C))));
  vec v;
  zenith::detail::static_for<B::size>(
      [&](auto l) ZENITH_FIXED_LAMBDA { v[std::size_t(l)] = load_alone(p[std::size_t(l)]); });
  return B(typename B::register_type(v));
}

// A user rule (custom_vjp): fwd on the arguments' values, bwd on its residuals and the output's
// adjoint; bwd's cotangents go down each staged argument's backward loop.
// An argument of a user rule as fwd sees it: a staged argument's own tensor, anything else
// evaluated into one. Tensors are passed by reference and results built in place: copying a
// tensor is a pass over its elements.
template <class Arg>
struct rule_input {
  using tensor_t = zenith::detail::tensor_of_t<value_t<Arg>, zenith::detail::shape_of_t<Arg>>;
  tensor_t t;
  template <class Ev>
  ZENITH_FIXED_INLINE void read(Ev& k) {
    for (std::size_t j = 0; j < t.count; ++j) t[j] = typename tensor_t::value_type(k.value(j));
  }
  tensor_t const& get() const { return t; }
};
template <std::size_t Slot, class T, std::size_t... N>
struct rule_input<staged_tensor<Slot, T, N...>> {
  using tensor_t = tensor<T, N...>;
  tensor_t const* t = nullptr;
  template <class Ev>
  ZENITH_FIXED_INLINE void read(Ev& k) {
    t = k.values;
  }
  tensor<T, N...> const& get() const { return *t; }
};
template <class Arg>
requires is_tensor_like_v<Arg>
struct rule_input<Arg> {  // a constant tensor: read where it is
  using tensor_t = zenith::detail::tensor_of_t<value_t<Arg>, zenith::detail::shape_of_t<Arg>>;
  tensor_t const* t = nullptr;
  template <class Ev>
  ZENITH_FIXED_INLINE void read(Ev& k) {
    t = &zenith::detail::fixed_materialize(k.e);  // the tensor itself, for both
  }
  tensor_t const& get() const { return *t; }
};
// f's result, made where it is to live (std::optional::emplace constructs from the conversion).
template <class F>
struct made_by {
  F f;
  operator std::invoke_result_t<F&>() { return f(); }  // NOLINT: the point is the conversion
};
template <class F>
made_by(F) -> made_by<F>;

template <class Fwd, class Bwd, class R, class Out, class... Args, class Ctx>
struct eval<staged_custom<Fwd, Bwd, R, Out, Args...>, Ctx> {
  using node = staged_custom<Fwd, Bwd, R, Out, Args...>;
  using C = compute_t<typename Out::value_type>;

  // The rule's functions, not the node: an evaluator that refers into the expression keeps the
  // whole expression in memory.
  Fwd const* fwd;
  Bwd const* bwd;
  staged_custom_state<R, Out>& st;
  std::tuple<eval<Args, Ctx>...> kids;
  std::tuple<rule_input<Args>...> in;  // fwd's arguments; alive until bwd has run

  template <class Slots>
  eval(built_from<node, Slots> b)  // NOLINT
      : fwd(b.node.fwd),
        bwd(b.node.bwd),
        st(*b.node.state),
        kids(zenith::detail::apply(
            [&](Args const&... a) { return std::tuple<eval<Args, Ctx>...>(build(a, b.slots)...); },
            b.node.args)) {
    ++st.users;
  }

  // Every copy evaluates its arguments' barriers (so that whichever copy finishes last can
  // run their backward loops); the first runs fwd, the others share its result. (No copy
  // records its own address anywhere: an evaluator whose address escapes keeps its
  // accumulators in memory instead of registers.)
  ZENITH_FIXED_INLINE void forward() {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (std::get<K>(kids).forward(), ...);
      if (st.r) return;
      (std::get<K>(in).read(std::get<K>(kids)), ...);
      st.r.emplace(made_by{[&] { return (*fwd)(std::get<K>(in).get()...); }});
      std::fill_n(st.adj.data(), st.adj.count, typename Out::value_type(0));
    }
    (std::index_sequence_for<Args...>{});
  }
  ZENITH_FIXED_INLINE C value(std::size_t i) const { return C(std::get<0>(*st.r).at(i)); }
  ZENITH_FIXED_INLINE C again(std::size_t i) const { return C(std::get<0>(*st.r).at(i)); }
  static constexpr bool batches =
      batch_type<C> && std::is_same_v<std::remove_cvref_t<std::tuple_element_t<0, R>>, Out>;
  static constexpr bool short_result = Out::count <= lane_by_lane_up_to;
  template <class B>
  ZENITH_FIXED_INLINE B batch(std::size_t j) const {
    if constexpr (short_result)
      return load_lane_by_lane<B>(std::get<0>(*st.r).data() + j);
    else
      return B::load_unaligned(std::get<0>(*st.r).data() + j);
  }
  template <class A>
  ZENITH_FIXED_INLINE void back(std::size_t i, A const& a) {
    st.adj[i] = st.adj[i] + typename Out::value_type(a);
  }
  // The last copy to finish has every adjoint: bwd runs, and its cotangents go down this
  // copy's arguments.
  ZENITH_FIXED_INLINE void finish() {
    if (++st.finished == st.users) reverse();
  }

 private:
  void reverse() {
    auto const cts = (*bwd)(std::get<1>(*st.r), std::as_const(st.adj));
    static_assert(std::tuple_size_v<std::remove_cvref_t<decltype(cts)>> == sizeof...(Args),
                  "zenith::custom_vjp: bwd must return a std::tuple with one cotangent per "
                  "argument");
    [&]<std::size_t... K>(std::index_sequence<K...>) { (pass<K>(std::get<K>(cts)), ...); }
    (std::index_sequence_for<Args...>{});
  }
  template <std::size_t K, class G>
  ZENITH_FIXED_INLINE void pass(G const& ct) {
    using Arg = std::tuple_element_t<K, std::tuple<Args...>>;
    if constexpr (zenith::detail::staged_node<Arg>()) {
      static_assert(
          fixed_expression<G> &&
              std::is_same_v<zenith::detail::shape_of_t<G>, zenith::detail::shape_of_t<Arg>>,
          "zenith::custom_vjp: in a staged tensor function, bwd must return a tensor "
          "shaped like its argument as that argument's cotangent");
      auto& k = std::get<K>(kids);
      using KV = std::remove_cvref_t<decltype(k.again(0))>;
      constexpr std::size_t size = zenith::detail::shape_of_t<Arg>::size;
      backward_loop<size>([&](std::size_t j) ZENITH_FIXED_LAMBDA {
        if constexpr (size <= lane_by_lane_up_to)
          k.back(j, KV(load_alone(ct.at(j))));
        else
          k.back(j, KV(ct.at(j)));
      });
      k.finish();
    }
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

// ---- Which gradients the backward writes exactly once per element ----
//
// reads<Slot, E>(): how many leaves of E are staged argument Slot. writes_each_once<Slot, E>():
// with E's back(i) called once for each of its elements, Slot's leaf (read once in E) gets one
// write per element: true through elementwise nodes that pass a derivative to it at its own
// shape (no broadcast), bijective gathers, sum / mean / prod (every input gets its share) and
// matmul; not through max / min (only the ties), broadcasting, or ops with no derivative.
template <class E>
struct walk {  // a constant subtree
  template <std::size_t>
  static constexpr std::size_t reads() {
    return 0;
  }
  template <std::size_t>
  static constexpr bool once() {
    return false;
  }
};
template <std::size_t S, class T, std::size_t... N>
struct walk<staged_tensor<S, T, N...>> {
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return S == Slot;
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    return S == Slot;
  }
};
template <class Op, class... Cs>
struct walk<map_node<Op, Cs...>> {
  using S = typename map_node<Op, Cs...>::static_shape;
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return (walk<Cs>::template reads<Slot>() + ... + 0);
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    if constexpr (piecewise_constant<Op>() || reads<Slot>() != 1) {
      return false;
    } else {
      return [&]<std::size_t... K>(std::index_sequence<K...>) {
        return ((walk<Cs>::template reads<Slot>() == 1 && takes_gradient<Op>(K) &&
                 std::is_same_v<typename Cs::static_shape, S> && walk<Cs>::template once<Slot>()) ||
                ...);
      }
      (std::index_sequence_for<Cs...>{});
    }
  }
};
template <class Kind, class Plan, class Shape, class T, class E>
struct walk<staged_reduce<Kind, Plan, Shape, T, E>> {
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return walk<E>::template reads<Slot>();
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    constexpr bool every_input = std::is_same_v<Kind, zenith::detail::fixed_sum_kind> ||
                                 std::is_same_v<Kind, zenith::detail::fixed_mean_kind> ||
                                 std::is_same_v<Kind, zenith::detail::fixed_prod_kind>;
    return every_input && Plan::group > 0 && walk<E>::template once<Slot>();
  }
};
template <class Dims, class Shape, class T, class A, class B>
struct walk<staged_matmul<Dims, Shape, T, A, B>> {
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return walk<A>::template reads<Slot>() + walk<B>::template reads<Slot>();
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    return reads<Slot>() == 1 && (walk<A>::template once<Slot>() || walk<B>::template once<Slot>());
  }
};
template <class Fwd, class Bwd, class R, class Out, class... Args>
struct walk<staged_custom<Fwd, Bwd, R, Out, Args...>> {  // bwd gives each argument a whole
                                                         // cotangent
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return (walk<Args>::template reads<Slot>() + ... + 0);
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    return reads<Slot>() == 1 && (walk<Args>::template once<Slot>() || ...);
  }
};
template <class Map, class Shape, class E>
struct walk<staged_gather<Map, Shape, E>> {  // every index map here is a bijection
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return walk<E>::template reads<Slot>();
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    return walk<E>::template once<Slot>();
  }
};

// Bit s set where slot s (of Slots staged arguments) is written exactly once per element by
// the backward pass of root R.
template <class R, std::size_t Slots>
constexpr std::uint64_t assigned_slots() {
  std::uint64_t mask = 0;
  [&]<std::size_t... S>(std::index_sequence<S...>) {
    ((mask |= (S < 64 && walk<R>::template once<S>()) ? std::uint64_t(1) << S : 0), ...);
  }
  (std::make_index_sequence<Slots>{});
  return mask;
}

// The value of a size-1 staged expression, with its gradient written into the staged tensors'
// gradients (slots: a tuple of staged_argument, one per slot): assigned where Ctx says so, added
// elsewhere (those must hold zeros).
template <class Ctx, staged_expression R, class Slots>
ZENITH_FIXED_INLINE auto value_and_backward(R const& r, Slots const& slots) {
  static_assert(zenith::detail::shape_of_t<R>::size == 1,
                "zenith::grad: the function must return a scalar (a size-1 tensor expression)");
  eval<R, Ctx> ev(build(r, slots));
  ev.forward();
  auto const v = ev.value(0);
  ev.back(0, decltype(v)(1));
  ev.finish();
  return v;
}

}  // namespace zenith::autodiff::staged
