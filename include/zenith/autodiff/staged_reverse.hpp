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
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../backend/cpu/fixed_eval.hpp"
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

// A subtree with no staged tensor: a constant. Tensors and numbers are read where they are;
// anything else is evaluated once into a tensor, so a broadcast constant is not recomputed per
// element.
template <class E, class Ctx>
requires(!zenith::detail::staged_node<E>()) struct eval<E, Ctx> {
  static constexpr bool direct = is_tensor_v<E> || is_scalar_node_v<E>;
  using held =
      std::conditional_t<direct, E const&,
                         zenith::detail::tensor_of_t<value_t<E>, zenith::detail::shape_of_t<E>>>;
  held e;
  eval(E const& x) : e(x) {}  // NOLINT: built from the node it mirrors
  ZENITH_FIXED_INLINE void forward() {}
  ZENITH_FIXED_INLINE auto value(std::size_t i) const { return e.at(i); }
  ZENITH_FIXED_INLINE auto again(std::size_t i) const { return e.at(i); }
  ZENITH_FIXED_INLINE void finish() {}
};

// A staged argument: its values; its adjoints go into its gradient.
template <std::size_t Slot, class T, std::size_t... N, class Ctx>
struct eval<staged_tensor<Slot, T, N...>, Ctx> {
  tensor<T, N...> const* values;
  T const* x;
  T* g;
  eval(staged_tensor<Slot, T, N...> const& e)  // NOLINT
      : values(e.values), x(e.values->data()), g(e.gradient->data()) {}
  ZENITH_FIXED_INLINE void forward() {}
  ZENITH_FIXED_INLINE compute_t<T> value(std::size_t i) const { return compute_t<T>(x[i]); }
  ZENITH_FIXED_INLINE compute_t<T> again(std::size_t i) const { return compute_t<T>(x[i]); }
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

  kids_t kids;
  [[no_unique_address]] kept_values<keep, Y, S::size> kept;

  eval(node const& e)  // NOLINT
      : kids(std::apply([](Cs const&... c) { return kids_t(c...); }, e.children)) {}

  template <std::size_t K>
  static constexpr std::size_t at(std::size_t i) {
    return fixed_broadcast_index<typename std::tuple_element_t<K, std::tuple<Cs...>>::static_shape,
                                 S>(i);
  }

  ZENITH_FIXED_INLINE void forward() {
    std::apply([](auto&... k) ZENITH_FIXED_LAMBDA { (k.forward(), ...); }, kids);
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
    std::apply([](auto&... k) ZENITH_FIXED_LAMBDA { (k.finish(), ...); }, kids);
  }

 private:
  template <std::size_t K, class A, class X>
  ZENITH_FIXED_INLINE void pass(std::size_t i, A const& a, Y const& y, X const& xs) {
    using C = std::tuple_element_t<K, std::tuple<Cs...>>;
    if constexpr (zenith::detail::staged_node<C>() && takes_gradient<Op>(K)) {
      using KV = std::remove_cvref_t<std::tuple_element_t<K, X>>;
      auto const p = std::apply(
          [&](auto const&... x) ZENITH_FIXED_LAMBDA { return Op::template partial<K>(y, x...); },
          xs);
      std::get<K>(kids).back(at<K>(i), KV(a * p));
    }
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

  eval(staged_reduce<Kind, Plan, Shape, T, E> const& e) : kid(e.child) {}  // NOLINT

  ZENITH_FIXED_INLINE void forward() {
    kid.forward();
    if constexpr (requires { *kid.values; })  // an argument itself: read where it is
      zenith::detail::fixed_reduce<typename Kind::op, Kind::mean, Plan>(this->out.data(),
                                                                        *kid.values);
    else
      zenith::detail::fixed_reduce<typename Kind::op, Kind::mean, Plan>(
          this->out.data(), forward_reader<eval<E, Ctx>>{&kid});
    this->adj.fill(C(0));
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
    for (std::size_t g = 0; g < group; ++g) f(member(o, g), g);
  }
  ZENITH_FIXED_INLINE static constexpr std::size_t member(std::size_t o, std::size_t g) {
    if constexpr (Plan::contiguous)  // the usual case: no table lookup, so the loops vectorize
      return o * group + g;
    else
      return Plan::members[o * group + g];
  }
};

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

  eval(staged_matmul<Dims, Shape, T, A, B> const& e) : ka(e.a), kb(e.b) {}  // NOLINT

  ZENITH_FIXED_INLINE void forward() {
    ka.forward();
    kb.forward();
    zenith::detail::static_for<m * k>([&](auto j) ZENITH_FIXED_LAMBDA { av[j] = C(ka.value(j)); });
    zenith::detail::static_for<k * n>([&](auto j) ZENITH_FIXED_LAMBDA { bv[j] = C(kb.value(j)); });
    zenith::detail::matmul_elements<m, k, n>(this->out.data(), av.data(), bv.data(), nullptr,
                                             nullptr);
    this->adj.fill(C(0));
  }

  ZENITH_FIXED_INLINE void finish() {
    if constexpr (zenith::detail::staged_node<A>()) {  // dA (m x k) = adj (m x n) * B^T (n x k)
      using KV = std::remove_cvref_t<decltype(ka.again(0))>;
      std::array<C, n * k> bt;
      for (std::size_t r = 0; r < k; ++r)
        for (std::size_t c = 0; c < n; ++c) bt[c * k + r] = bv[r * n + c];
      std::array<C, m * k> da;
      zenith::detail::matmul_elements<m, n, k>(da.data(), this->adj.data(), bt.data(), nullptr,
                                               nullptr);
      for (std::size_t j = 0; j < m * k; ++j) ka.back(j, KV(da[j]));
      ka.finish();
    }
    if constexpr (zenith::detail::staged_node<B>()) {  // dB (k x n) = A^T (k x m) * adj (m x n)
      using KV = std::remove_cvref_t<decltype(kb.again(0))>;
      std::array<C, k * m> at;
      for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c < k; ++c) at[c * m + r] = av[r * k + c];
      std::array<C, k * n> db;
      zenith::detail::matmul_elements<k, m, n>(db.data(), at.data(), this->adj.data(), nullptr,
                                               nullptr);
      for (std::size_t j = 0; j < k * n; ++j) kb.back(j, KV(db[j]));
      kb.finish();
    }
  }
};

// A user rule (custom_vjp): fwd on the arguments' values, bwd on its residuals and the output's
// adjoint; bwd's cotangents go down each staged argument's backward loop.
template <class Fwd, class Bwd, class Out, class... Args, class Ctx>
struct eval<staged_custom<Fwd, Bwd, Out, Args...>, Ctx> {
  using node = staged_custom<Fwd, Bwd, Out, Args...>;
  using C = compute_t<typename Out::value_type>;
  using inputs_t =
      std::tuple<zenith::detail::tensor_of_t<value_t<Args>, zenith::detail::shape_of_t<Args>>...>;
  using R = std::remove_cvref_t<decltype(std::apply(std::declval<Fwd const&>(),
                                                    std::declval<inputs_t const&>()))>;

  node const& e;
  std::tuple<eval<Args, Ctx>...> kids;
  inputs_t in;
  std::optional<R> r;  // fwd's {output, residuals}
  Out adj;

  eval(node const& x)  // NOLINT
      : e(x),
        kids(std::apply([](Args const&... a) { return std::tuple<eval<Args, Ctx>...>(a...); },
                        x.args)) {}

  ZENITH_FIXED_INLINE void forward() {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (std::get<K>(kids).forward(), ...);
      (read_input<K>(), ...);
    }
    (std::index_sequence_for<Args...>{});
    r.emplace(std::apply(*e.fwd, in));
    adj = Out();
  }
  ZENITH_FIXED_INLINE C value(std::size_t i) const { return C(std::get<0>(*r).at(i)); }
  ZENITH_FIXED_INLINE C again(std::size_t i) const { return C(std::get<0>(*r).at(i)); }
  template <class A>
  ZENITH_FIXED_INLINE void back(std::size_t i, A const& a) {
    adj[i] = adj[i] + typename Out::value_type(a);
  }
  ZENITH_FIXED_INLINE void finish() {
    auto const cts = (*e.bwd)(std::get<1>(*r), std::as_const(adj));
    static_assert(std::tuple_size_v<std::remove_cvref_t<decltype(cts)>> == sizeof...(Args),
                  "zenith::custom_vjp: bwd must return a std::tuple with one cotangent per "
                  "argument");
    [&]<std::size_t... K>(std::index_sequence<K...>) { (pass<K>(std::get<K>(cts)), ...); }
    (std::index_sequence_for<Args...>{});
  }

 private:
  template <std::size_t K>
  ZENITH_FIXED_INLINE void read_input() {
    auto& t = std::get<K>(in);
    auto& k = std::get<K>(kids);
    for (std::size_t j = 0; j < t.count; ++j)
      t[j] = typename std::remove_cvref_t<decltype(t)>::value_type(k.value(j));
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
      for (std::size_t j = 0; j < zenith::detail::shape_of_t<Arg>::size; ++j)
        k.back(j, KV(ct.at(j)));
      k.finish();
    }
  }
};

// transpose, reshape, cross's rotations: elementwise, through an index map.
template <class Map, class Shape, class E, class Ctx>
struct eval<staged_gather<Map, Shape, E>, Ctx> {
  eval<E, Ctx> kid;
  eval(staged_gather<Map, Shape, E> const& e) : kid(e.child) {}  // NOLINT
  ZENITH_FIXED_INLINE void forward() { kid.forward(); }
  ZENITH_FIXED_INLINE auto value(std::size_t i) { return kid.value(Map::index(i)); }
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
template <class Fwd, class Bwd, class Out, class... Args>
struct walk<staged_custom<Fwd, Bwd, Out, Args...>> {  // bwd gives each argument a whole cotangent
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
// gradients: assigned where Ctx says so, added elsewhere (those must hold zeros).
template <class Ctx, staged_expression R>
ZENITH_FIXED_INLINE auto value_and_backward(R const& r) {
  static_assert(zenith::detail::shape_of_t<R>::size == 1,
                "zenith::grad: the function must return a scalar (a size-1 tensor expression)");
  eval<R, Ctx> ev(r);
  ev.forward();
  auto const v = ev.value(0);
  ev.back(0, decltype(v)(1));
  ev.finish();
  return v;
}

}  // namespace zenith::autodiff::staged
