#pragma once
// The public elementwise functions and operators. Each builds a map_node lazily; operands are
// promoted to one type first (JAX rules: weak C++ scalars, ints to float for floating-only ops).
#include <type_traits>

#include "node.hpp"

namespace zenith {

template <class X>
concept operand = expression<X> || scalar<X>;

template <element To, expression E>
auto cast(E&& e) {
  return map_node<ops::cast<To>, std::remove_cvref_t<E>>(std::forward<E>(e));
}

namespace detail {

// e converted to T: e itself when it already is T.
// Nodes are built from rvalue children by moving, so a temporary sub-expression leaves no
// extra handle on an array's buffer behind (that matters for in-place assignment).
template <element T, expression E>
auto convert(E&& e) {
  using D = std::remove_cvref_t<E>;
  if constexpr (std::is_same_v<value_t<D>, T>)
    return D(std::forward<E>(e));
  else
    return map_node<ops::cast<T>, D>(std::forward<E>(e));
}
template <element T, class X>
auto to_node(X&& x) {
  if constexpr (expression<X>)
    return convert<T>(std::forward<X>(x));
  else
    return scalar_node<T>(static_cast<T>(static_cast<compute_t<T>>(x)));
}

// The element type operands of an op meet at.
template <class X>
struct operand_type {
  using type = void;  // a scalar: weak
};
template <expression X>
struct operand_type<X> {
  using type = value_t<X>;
};

template <class A, class B>
struct meet {
  using type = promote_t<A, B>;
};
template <class A>
struct meet<A, void> {
  using type = A;
};
template <class B>
struct meet<void, B> {
  using type = B;
};
template <>
struct meet<void, void> {
  using type = void;
};

template <class... X>
struct common_operand_type;
template <class X>
struct common_operand_type<X> {
  using type = typename operand_type<X>::type;
};
template <class X, class... Rest>
struct common_operand_type<X, Rest...> {
  using type = typename meet<typename operand_type<X>::type,
                             typename common_operand_type<Rest...>::type>::type;
};

// Apply weak promotion for each scalar operand against the strong type.
template <class T, class... X>
struct weak_all {
  using type = T;
};
template <class T, class X, class... Rest>
struct weak_all<T, X, Rest...> {
  using step = std::conditional_t<expression<X>, T, weak_promote_t<T, X>>;
  using type = typename weak_all<step, Rest...>::type;
};

template <class Op, class... X>
struct op_input_type {
  using strong = typename common_operand_type<X...>::type;
  static_assert(!std::is_void_v<strong>, "zenith: at least one operand must be an expression");
  using weak = typename weak_all<strong, X...>::type;
  using type = std::conditional_t<is_floating_only<Op>() && !floating_element<weak>, float, weak>;
};

template <class Op, class... X>
auto make_map(X&&... x) {
  using T = typename op_input_type<Op, std::remove_cvref_t<X>...>::type;
  return map_node<Op, decltype(to_node<T>(std::forward<X>(x)))...>(
      to_node<T>(std::forward<X>(x))...);
}

template <class Op, class... X>
auto apply_op(X const&... x) {
  if constexpr ((expression<X> || ...))
    return make_map<Op>(x...);
  else if constexpr ((symbolic<X> || ...))
    return symbolic_apply(std::type_identity<Op>{}, x...);  // an IR rule (autodiff/ir_partial.hpp)
  else
    return Op::apply(x...);
}

template <class E>
inline constexpr bool staged_exp_node = false;
template <class C>
inline constexpr bool staged_exp_node<map_node<ops::exp, C>> = staged_node<map_node<ops::exp, C>>();
}  // namespace detail

// log. In a staged tensor function (jit of a gradient on tensors, expr/staged.hpp), whose whole
// graph becomes generated code as XLA's does, log(exp(x)) is x: exact wherever exp(x) is
// finite, and right where it is not (exp overflows at x = 710, and log of that is inf). It
// comes up in log-densities with a log-scale parameter, normal(y; 0, exp(h / 2)), where it
// saves an exp and a log per element. Everywhere else log is computed as written.
template <expression E>
auto log(E&& e) {
  if constexpr (detail::staged_exp_node<std::remove_cvref_t<E>>)
    return zenith::get<0>(std::forward<E>(e).children);
  else
    return detail::make_map<ops::log>(std::forward<E>(e));
}

// Unary functions.
#define ZENITH_UNARY_FN(NAME, OP)                         \
  template <expression E>                                 \
  auto NAME(E&& e) {                                      \
    return detail::make_map<ops::OP>(std::forward<E>(e)); \
  }
ZENITH_UNARY_FN(abs, abs)
ZENITH_UNARY_FN(sign, sign)
ZENITH_UNARY_FN(exp, exp)
ZENITH_UNARY_FN(log1p, log1p)
ZENITH_UNARY_FN(expm1, expm1)
ZENITH_UNARY_FN(sqrt, sqrt)
ZENITH_UNARY_FN(rsqrt, rsqrt)
ZENITH_UNARY_FN(square, square)
ZENITH_UNARY_FN(sin, sin)
ZENITH_UNARY_FN(cos, cos)
ZENITH_UNARY_FN(tan, tan)
ZENITH_UNARY_FN(tanh, tanh)
ZENITH_UNARY_FN(sigmoid, sigmoid)
ZENITH_UNARY_FN(relu, relu)
ZENITH_UNARY_FN(gelu, gelu_tanh)               // JAX's default (approximate=True)
ZENITH_UNARY_FN(stop_gradient, stop_gradient)  // e's value, with no derivative (ops.hpp)
ZENITH_UNARY_FN(gelu_tanh, gelu_tanh)
ZENITH_UNARY_FN(gelu_erf, gelu_erf)
ZENITH_UNARY_FN(erf, erf)
ZENITH_UNARY_FN(floor, floor)
ZENITH_UNARY_FN(ceil, ceil)
ZENITH_UNARY_FN(round, round)
ZENITH_UNARY_FN(reciprocal, reciprocal)
#undef ZENITH_UNARY_FN

template <expression E>
auto operator-(E&& e) {
  return detail::make_map<ops::neg>(std::forward<E>(e));
}
template <expression E>
auto operator+(E&& e) {
  return std::remove_cvref_t<E>(std::forward<E>(e));
}

// Binary functions and operators: at least one operand is an expression.
template <class A, class B>
concept binary_operands = operand<std::remove_cvref_t<A>> && operand<std::remove_cvref_t<B>> &&
    (expression<A> || expression<B>);

#define ZENITH_BINARY_FN(NAME, OP)                                            \
  template <class A, class B>                                                 \
  requires binary_operands<A, B>                                              \
  auto NAME(A&& a, B&& b) {                                                   \
    return detail::make_map<ops::OP>(std::forward<A>(a), std::forward<B>(b)); \
  }
ZENITH_BINARY_FN(operator+, add)
ZENITH_BINARY_FN(operator-, sub)
ZENITH_BINARY_FN(operator*, mul)
ZENITH_BINARY_FN(operator/, div)
ZENITH_BINARY_FN(add, add)
ZENITH_BINARY_FN(subtract, sub)
ZENITH_BINARY_FN(multiply, mul)
ZENITH_BINARY_FN(divide, div)
ZENITH_BINARY_FN(pow, pow)
ZENITH_BINARY_FN(maximum, maximum)
ZENITH_BINARY_FN(minimum, minimum)
ZENITH_BINARY_FN(atan2, atan2)
ZENITH_BINARY_FN(operator==, equal)
ZENITH_BINARY_FN(operator!=, not_equal)
ZENITH_BINARY_FN(operator<, less)
ZENITH_BINARY_FN(operator<=, less_equal)
ZENITH_BINARY_FN(operator>, greater)
ZENITH_BINARY_FN(operator>=, greater_equal)
ZENITH_BINARY_FN(equal, equal)
ZENITH_BINARY_FN(not_equal, not_equal)
ZENITH_BINARY_FN(less, less)
ZENITH_BINARY_FN(less_equal, less_equal)
ZENITH_BINARY_FN(greater, greater)
ZENITH_BINARY_FN(greater_equal, greater_equal)
#undef ZENITH_BINARY_FN

namespace detail {
// where's value type: a and b meet (scalars weak); two scalars meet as weak types do against
// bool, as in JAX: where(c, 1.0, 0.0) is float32, where(c, 1, 0) int32.
template <class A, class B>
struct where_type {
  using type = typename op_input_type<ops::where, A, B>::type;
};
template <class A, class B>
requires(!expression<A> && !expression<B>) struct where_type<A, B> {
  using type = typename weak_all<bool, A, B>::type;
};
}  // namespace detail

// where(cond, a, b): cond is converted to bool; a and b meet at one type (scalars weak).
template <expression C, class A, class B>
requires operand<std::remove_cvref_t<A>> && operand<std::remove_cvref_t<B>>
auto where(C&& cond, A&& a, B&& b) {
  using T = typename detail::where_type<std::remove_cvref_t<A>, std::remove_cvref_t<B>>::type;
  auto c = detail::convert<bool>(std::forward<C>(cond));
  auto x = detail::to_node<T>(std::forward<A>(a));
  auto y = detail::to_node<T>(std::forward<B>(b));
  return map_node<ops::where, decltype(c), decltype(x), decltype(y)>(std::move(c), std::move(x),
                                                                     std::move(y));
}

// clip(x, lo, hi): bounds take x's type.
template <expression E, class L, class H>
requires operand<std::remove_cvref_t<L>> && operand<std::remove_cvref_t<H>>
auto clip(E&& x, L&& lo, H&& hi) {
  return detail::make_map<ops::clip>(std::forward<E>(x), std::forward<L>(lo), std::forward<H>(hi));
}

}  // namespace zenith
