#pragma once
// Elementwise ops on fixed-size expressions of user numbers (dual numbers).
//
// The elementwise machinery of expr/elementwise.hpp converts every operand to one element type
// first; for a tensor of duals and a tensor of doubles that would widen every double into a
// dual. These overloads take over (their constraints subsume those of elementwise.hpp) when a
// fixed-size operand holds user numbers, or a user number is mixed with a fixed-size
// expression: the node keeps each operand in its own type and applies the op to the mixed
// numbers (operators, and number_op for math functions, provided by the number type).
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "../core/tensor.hpp"
#include "elementwise.hpp"
#include "fixed_shape.hpp"
#include "ops.hpp"

namespace zenith {

namespace detail {

// A constant inside a fixed-size expression of user numbers: a plain number or a user number,
// in its own type.
template <class S>
struct fixed_constant : expr_base<fixed_constant<S>> {
  using value_type = S;
  using static_shape = fixed_shape<>;
  static constexpr bool fixed = true;
  S value;
  explicit fixed_constant(S v) : value(std::move(v)) {}
  zenith::shape shape() const { return {}; }
  ZENITH_FIXED_INLINE S const& at(std::size_t) const { return value; }
  template <class F>
  void for_each_array(F&&) const {}
};

// Op applied to numbers of possibly different types.
template <class Op, class... X>
ZENITH_FIXED_INLINE auto number_apply(X const&... x) {
  if constexpr ((user_number<X> || ...)) {
    // A number type defines + - * / and comparisons with constants itself (a double times a
    // dual scales the dual); math functions come from its number_op, found by
    // argument-dependent lookup.
    if constexpr (std::is_same_v<Op, ops::add>)
      return (x + ...);
    else if constexpr (std::is_same_v<Op, ops::sub>)
      return (x - ...);
    else if constexpr (std::is_same_v<Op, ops::mul>)
      return (x * ...);
    else if constexpr (std::is_same_v<Op, ops::div>)
      return (x / ...);
    else if constexpr (std::is_same_v<Op, ops::equal>)
      return (x == ...);
    else if constexpr (std::is_same_v<Op, ops::not_equal>)
      return (x != ...);
    else if constexpr (std::is_same_v<Op, ops::less>)
      return (x < ...);
    else if constexpr (std::is_same_v<Op, ops::less_equal>)
      return (x <= ...);
    else if constexpr (std::is_same_v<Op, ops::greater>)
      return (x > ...);
    else if constexpr (std::is_same_v<Op, ops::greater_equal>)
      return (x >= ...);
    else if constexpr (sizeof...(X) == 1 && std::is_same_v<Op, ops::neg>)
      return [](auto const& a) ZENITH_FIXED_LAMBDA { return -a; }(x...);
    else if constexpr (std::is_same_v<Op, ops::where>)
      return [](auto const& c, auto const& a, auto const& b) ZENITH_FIXED_LAMBDA {
        // The selected number, derivative included; a plain branch becomes a constant of the
        // other branch's number type.
        using A = std::remove_cvref_t<decltype(a)>;
        using R = std::conditional_t<user_number<A>, A, std::remove_cvref_t<decltype(b)>>;
        return bool(c) ? R(a) : R(b);
      }(x...);
    else if constexpr (requires { Op::applies_to_numbers; })
      return Op::apply(x...);
    else
      return number_op(Op{}, x...);
  } else {
    using C = std::common_type_t<X...>;
    return Op::apply(static_cast<C>(x)...);
  }
}

// Op on fixed-size children of mixed number types; the fixed-size evaluation protocol.
template <class Op, class... Cs>
struct number_map_node : expr_base<number_map_node<Op, Cs...>> {
  static constexpr bool fixed = true;
  using op_type = Op;
  using static_shape = fixed_broadcast_t<typename Cs::static_shape...>;
  using value_type =
      std::remove_cvref_t<decltype(number_apply<Op>(std::declval<Cs const&>().at(0)...))>;

  node_tuple<Cs...> children;

  explicit number_map_node(Cs... cs) : children(std::move(cs)...) {}
  zenith::shape shape() const { return static_shape::dynamic(); }
  template <class F>
  void for_each_array(F&&) const {}

  ZENITH_FIXED_INLINE auto at(std::size_t i) const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) ZENITH_FIXED_LAMBDA {
      return number_apply<Op>(zenith::get<I>(children).at(
          fixed_broadcast_index<typename Cs::static_shape, static_shape>(i))...);
    }
    (std::index_sequence_for<Cs...>{});
  }

  static constexpr bool fixed_scalar = static_shape::rank == 0;
  operator value_type() const requires fixed_scalar {  // NOLINT: as a rank-0 tensor converts
    return value_type(at(0));
  }
};

template <class X>
concept number_constant = !expression<X> && (scalar<X> || user_number<X>);

template <class X>
struct number_value {
  using type = X;
};
template <expression X>
struct number_value<X> {
  using type = value_t<X>;
};

template <class X>
concept fixed_number_operand = fixed_expression<X> || number_constant<std::remove_cvref_t<X>>;

template <class X>
inline constexpr bool holds_user_number =
    user_number<typename number_value<std::remove_cvref_t<X>>::type>;

// Operands for the nodes above: fixed-size expressions and constants, at least one expression,
// and a user number among the element types.
template <class... X>
concept fixed_number_args = (fixed_number_operand<X> && ...) && (fixed_expression<X> || ...) &&
                            (holds_user_number<X> || ...);

template <class X>
concept fixed_number_expression = fixed_expression<X> && user_number<value_t<X>>;

template <class X>
ZENITH_FIXED_INLINE auto to_number_node(X const& x) {
  if constexpr (expression<X>)
    return x;
  else
    return fixed_constant<X>(x);
}

template <class Op, class... X>
ZENITH_FIXED_INLINE auto make_number_map(X const&... x) {
  return number_map_node<Op, decltype(to_number_node(x))...>(to_number_node(x)...);
}

}  // namespace detail

// An expression of user numbers with an arithmetic scalar or another expression (subsumes
// elementwise.hpp's constraint, so it is chosen there), and a user number with a fixed-size
// expression (elementwise.hpp takes no user numbers as scalars).
#define ZENITH_FIXED_NUMBER_BINARY(NAME, OP)                                                       \
  template <class A, class B>                                                                      \
  requires binary_operands<A, B> && detail::fixed_number_args<A, B> ZENITH_FIXED_INLINE auto NAME( \
      A&& a, B&& b) {                                                                              \
    return detail::make_number_map<ops::OP>(std::as_const(a), std::as_const(b));                   \
  }                                                                                                \
  template <class A, class B>                                                                      \
  requires detail::fixed_number_args<A, B> &&                                                      \
      (user_number<std::remove_cvref_t<A>> ||                                                      \
       user_number<std::remove_cvref_t<B>>)ZENITH_FIXED_INLINE auto                                \
      NAME(A&& a, B&& b) {                                                                         \
    return detail::make_number_map<ops::OP>(std::as_const(a), std::as_const(b));                   \
  }
ZENITH_FIXED_NUMBER_BINARY(operator+, add)
ZENITH_FIXED_NUMBER_BINARY(operator-, sub)
ZENITH_FIXED_NUMBER_BINARY(operator*, mul)
ZENITH_FIXED_NUMBER_BINARY(operator/, div)
ZENITH_FIXED_NUMBER_BINARY(add, add)
ZENITH_FIXED_NUMBER_BINARY(subtract, sub)
ZENITH_FIXED_NUMBER_BINARY(multiply, mul)
ZENITH_FIXED_NUMBER_BINARY(divide, div)
ZENITH_FIXED_NUMBER_BINARY(pow, pow)
ZENITH_FIXED_NUMBER_BINARY(maximum, maximum)
ZENITH_FIXED_NUMBER_BINARY(minimum, minimum)
ZENITH_FIXED_NUMBER_BINARY(atan2, atan2)
ZENITH_FIXED_NUMBER_BINARY(operator==, equal)
ZENITH_FIXED_NUMBER_BINARY(operator!=, not_equal)
ZENITH_FIXED_NUMBER_BINARY(operator<, less)
ZENITH_FIXED_NUMBER_BINARY(operator<=, less_equal)
ZENITH_FIXED_NUMBER_BINARY(operator>, greater)
ZENITH_FIXED_NUMBER_BINARY(operator>=, greater_equal)
ZENITH_FIXED_NUMBER_BINARY(equal, equal)
ZENITH_FIXED_NUMBER_BINARY(not_equal, not_equal)
ZENITH_FIXED_NUMBER_BINARY(less, less)
ZENITH_FIXED_NUMBER_BINARY(less_equal, less_equal)
ZENITH_FIXED_NUMBER_BINARY(greater, greater)
ZENITH_FIXED_NUMBER_BINARY(greater_equal, greater_equal)
#undef ZENITH_FIXED_NUMBER_BINARY

// where(cond, a, b) on user numbers: the branch it selects, with that branch's derivative (as in
// JAX). As for the binary functions, one overload subsumes elementwise.hpp's, the other takes
// user numbers as the branches.
template <expression C, class A, class B>
requires operand<std::remove_cvref_t<A>> && operand<std::remove_cvref_t<B>> &&
    detail::fixed_number_args<C, A, B>
        ZENITH_FIXED_INLINE auto where(C&& cond, A&& a, B&& b) {
  return detail::make_number_map<ops::where>(std::as_const(cond), std::as_const(a),
                                             std::as_const(b));
}
template <expression C, class A, class B>
requires detail::fixed_number_args<C, A, B> &&
    (user_number<std::remove_cvref_t<A>> || user_number<std::remove_cvref_t<B>>)ZENITH_FIXED_INLINE
    auto where(C&& cond, A&& a, B&& b) {
  return detail::make_number_map<ops::where>(std::as_const(cond), std::as_const(a),
                                             std::as_const(b));
}
// ... and on single numbers, such as the elements q(i) of a tensor under jacfwd (plain numbers
// too, so that code generic over the number type compiles for double).
template <class A, class B>
requires detail::number_constant<A> && detail::number_constant<B> ZENITH_FIXED_INLINE auto where(
    bool cond, A const& a, B const& b) {
  return detail::number_apply<ops::where>(cond, a, b);
}

namespace detail {
// The plain number at the bottom of a (possibly nested) user number.
template <class N>
ZENITH_FIXED_INLINE auto base_value(N const& x) {
  if constexpr (user_number<N>)
    return base_value(x.value());
  else
    return x;
}
template <class N>
using base_number_t = std::remove_cvref_t<decltype(base_value(std::declval<N const&>()))>;

// cast<To> of one user number to a plain type with no derivative (an integer or bool).
template <class To>
struct number_to_plain {
  static constexpr bool applies_to_numbers = true;
  template <class N>
  ZENITH_FIXED_INLINE static To apply(N const& x) {
    return static_cast<To>(base_value(x));
  }
};
}  // namespace detail

// cast<To> of a tensor of user numbers. To the numbers' own floating type it changes nothing,
// so the derivative flows through (code written for double runs unchanged under jacfwd); to an
// integer or bool it keeps the value only, whose derivative is zero (as in JAX).
template <element To, expression E>
requires detail::fixed_number_expression<E> ZENITH_FIXED_INLINE auto cast(E&& e) {
  using Base = detail::base_number_t<value_t<E>>;
  static_assert(std::is_same_v<To, Base> || !floating_element<To>,
                "zenith: cast of derivative numbers to another floating type is not supported "
                "(cast the plain inputs before differentiating, or to the numbers' own type)");
  if constexpr (std::is_same_v<To, Base>)
    return std::remove_cvref_t<E>(std::forward<E>(e));
  else
    return detail::make_number_map<detail::number_to_plain<To>>(std::as_const(e));
}

#define ZENITH_FIXED_NUMBER_UNARY(NAME, OP)                                          \
  template <expression E>                                                            \
  requires detail::fixed_number_expression<E> ZENITH_FIXED_INLINE auto NAME(E&& e) { \
    return detail::make_number_map<ops::OP>(std::as_const(e));                       \
  }
ZENITH_FIXED_NUMBER_UNARY(operator-, neg)
ZENITH_FIXED_NUMBER_UNARY(abs, abs)
ZENITH_FIXED_NUMBER_UNARY(sign, sign)
ZENITH_FIXED_NUMBER_UNARY(exp, exp)
ZENITH_FIXED_NUMBER_UNARY(log, log)
ZENITH_FIXED_NUMBER_UNARY(log1p, log1p)
ZENITH_FIXED_NUMBER_UNARY(expm1, expm1)
ZENITH_FIXED_NUMBER_UNARY(sqrt, sqrt)
ZENITH_FIXED_NUMBER_UNARY(rsqrt, rsqrt)
ZENITH_FIXED_NUMBER_UNARY(square, square)
ZENITH_FIXED_NUMBER_UNARY(sin, sin)
ZENITH_FIXED_NUMBER_UNARY(cos, cos)
ZENITH_FIXED_NUMBER_UNARY(tan, tan)
ZENITH_FIXED_NUMBER_UNARY(tanh, tanh)
ZENITH_FIXED_NUMBER_UNARY(sigmoid, sigmoid)
ZENITH_FIXED_NUMBER_UNARY(relu, relu)
ZENITH_FIXED_NUMBER_UNARY(gelu, gelu_tanh)
ZENITH_FIXED_NUMBER_UNARY(gelu_tanh, gelu_tanh)
ZENITH_FIXED_NUMBER_UNARY(gelu_erf, gelu_erf)
ZENITH_FIXED_NUMBER_UNARY(erf, erf)
ZENITH_FIXED_NUMBER_UNARY(floor, floor)
ZENITH_FIXED_NUMBER_UNARY(ceil, ceil)
ZENITH_FIXED_NUMBER_UNARY(round, round)
ZENITH_FIXED_NUMBER_UNARY(reciprocal, reciprocal)
#undef ZENITH_FIXED_NUMBER_UNARY

}  // namespace zenith
