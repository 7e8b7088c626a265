#pragma once
// What the elementwise op tags (expr/ops.hpp) are built on and read through: lane and mask
// helpers for their simd() functions, the forward declarations and apply_op their derivative
// rules are written with, and the traits every layer reads a tag through (arity, result type,
// floating_only, mask operands).
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

// xsimd before the rest: the warnings it silences come from the compiler intrinsics it
// brings in, which must not be included earlier.
#include "simd_headers.hpp"

#include "../core/dtype.hpp"
#include "../core/expr_base.hpp"

namespace zenith {

template <class... Ts>
struct type_list {};

namespace detail {
// A comparison mask as a mask over lanes of type T of the same width (an int32 comparison
// choosing between floats): xsimd::bool_cast reinterprets float <-> int32, double <-> int64.
template <class T, class U, class A>
xsimd::batch_bool<T, A> mask_as(xsimd::batch_bool<U, A> const& m) {
  static_assert(sizeof(T) == sizeof(U), "zenith: masks convert only between equal lane widths");
  if constexpr (std::is_same_v<T, U>)
    return m;
  else
    return xsimd::bool_cast(m);
}
// The element type of a batch's lanes (of a mask's too: batch_bool's value_type is bool).
template <class B>
struct lane {
  using type = typename B::value_type;
};
template <class T, class A>
struct lane<xsimd::batch_bool<T, A>> {
  using type = T;
};
template <class B>
using lane_t = typename lane<B>::type;

// Lanes holding NaN. Not `x != x`: xsimd 8.1 compiles != to an *ordered* compare
// (_CMP_NEQ_OQ), which is false for NaN.
template <class B>
auto nan_mask(B const& x) {
  using T = typename B::value_type;
  if constexpr (std::is_floating_point_v<T>)
    return xsimd::isnan(x);
  else
    return typename B::batch_bool_type(false);
}
}  // namespace detail

namespace ops {
struct neg;
struct sign;
struct exp;
struct log;
struct sin;
struct cos;
struct tanh;
struct erf;
struct reciprocal;
struct where;
template <class To>
struct cast;
}  // namespace ops

namespace detail {
// An operand that stands for a value of an IR graph (autodiff/ir_partial.hpp): a rule applied
// to it appends equations.
template <class X>
concept symbolic = requires {
  typename X::symbolic_operand;
};

// Op applied to its operands: an expression node when any operand is an expression (defined in
// expr/elementwise.hpp), Op::apply for plain numbers. Derivative rules are written with it.
template <class Op, class... X>
auto apply_op(X const&... x);

// The element type a rule's results take: an expression's value type, or the number's own.
template <class X>
struct number_of {
  using type = X;
};
template <expression X>
struct number_of<X> {
  using type = value_t<X>;
};
// A condition as 0 / 1 in the element type of `Like`.
template <class Like, class C>
auto as_number(C const& c) {
  return apply_op<ops::cast<typename number_of<Like>::type>>(c);
}
}  // namespace detail

template <class Op>
concept elementwise_op = requires {
  { Op::name } -> std::convertible_to<std::string_view>;
  { Op::cuda } -> std::convertible_to<std::string_view>;
};

template <class Op>
constexpr bool is_floating_only() {
  if constexpr (requires { Op::floating_only; })
    return Op::floating_only;
  else
    return false;
}

// The number of operands an elementwise op takes (1, 2 or 3), read off its scalar apply().
template <class Op>
constexpr std::size_t op_arity() {
  if constexpr (requires(float x) { Op::apply(x); })
    return 1;
  else if constexpr (requires(float x) { Op::apply(x, x); })
    return 2;
  else
    return 3;
}

// Whether op tag Op is marked `costly` (a transcendental: exp, log, sin, pow, ...).
template <class Op>
constexpr bool costly_op() {
  if constexpr (requires { Op::costly; })
    return Op::costly;
  else
    return false;
}

// Whether op tag Op is marked `piecewise_constant` (floor, ceil, round: a zero derivative almost
// everywhere, so derivative rules skip it).
template <class Op>
constexpr bool piecewise_constant_op() {
  if constexpr (requires { Op::piecewise_constant; })
    return Op::piecewise_constant;
  else
    return false;
}

// Whether an op's simd() takes operand i as a mask (xsimd::batch_bool, from a comparison):
// bit i of Op::mask_operands. A bool operand anywhere else makes the evaluator take the scalar
// path for that expression.
template <class Op>
constexpr bool takes_mask(std::size_t i) {
  if constexpr (requires { Op::mask_operands; })
    return (Op::mask_operands >> i) & 1u;
  else
    return false;
}

// The value type an op gives for its operands' value types: bool for comparisons, the target
// for casts, otherwise the type of the last operand (operands are promoted to one type first).
template <class Op, class... T>
struct op_result {
  using type = std::tuple_element_t<sizeof...(T) - 1, std::tuple<T...>>;
};
template <class Op, class... T>
requires requires { typename Op::template result<T...>; }
struct op_result<Op, T...> {
  using type = typename Op::template result<T...>;
};
template <class Op, class... T>
using op_result_t = typename op_result<Op, T...>::type;

}  // namespace zenith
