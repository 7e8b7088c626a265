#pragma once
// Scalar math on plain numbers: zenith::sin(0.5), zenith::pow(x, 2.0), ... so that code generic
// over its number type (double, float, or the derivative scalars of autodiff/dual.hpp) can call
// zn::sin on whatever it holds. The value comes from the op tag's `apply` (expr/ops.hpp): one op,
// one place.
//
// - Floating-point arguments keep their type; bfloat16 / float16 compute in float.
// - Integer arguments to floating-only ops (sin, exp, sqrt, ...) compute in double, as std::sin
//   does (arrays follow JAX instead: jnp.sin of an int32 array is float32).
// - Other ops (abs, sign, square, maximum, minimum) keep integer types.
// - Two arguments of different types meet at their common C++ type.
// These overloads take only plain numbers (zenith::scalar), so they never compete with the
// expression functions of the same name (expr/elementwise.hpp) or with dual's.
#include <type_traits>

#include "../core/dtype.hpp"
#include "ops.hpp"

namespace zenith {

namespace detail {
// The type a scalar op computes in for argument type S.
template <class Op, class S>
using scalar_math_t = std::conditional_t<
    storage_float<S>, float,
    std::conditional_t<is_floating_only<Op>() && !std::is_floating_point_v<S>, double, S>>;
}  // namespace detail

#define ZENITH_SCALAR_UNARY(NAME, OP)                         \
  template <scalar S>                                         \
  inline auto NAME(S x) {                                     \
    using C = detail::scalar_math_t<ops::OP, S>;              \
    return static_cast<C>(ops::OP::apply(static_cast<C>(x))); \
  }
ZENITH_SCALAR_UNARY(abs, abs)
ZENITH_SCALAR_UNARY(sign, sign)
ZENITH_SCALAR_UNARY(exp, exp)
ZENITH_SCALAR_UNARY(log, log)
ZENITH_SCALAR_UNARY(log1p, log1p)
ZENITH_SCALAR_UNARY(expm1, expm1)
ZENITH_SCALAR_UNARY(sqrt, sqrt)
ZENITH_SCALAR_UNARY(rsqrt, rsqrt)
ZENITH_SCALAR_UNARY(square, square)
ZENITH_SCALAR_UNARY(sin, sin)
ZENITH_SCALAR_UNARY(cos, cos)
ZENITH_SCALAR_UNARY(tan, tan)
ZENITH_SCALAR_UNARY(tanh, tanh)
ZENITH_SCALAR_UNARY(sigmoid, sigmoid)
ZENITH_SCALAR_UNARY(relu, relu)
ZENITH_SCALAR_UNARY(gelu, gelu_tanh)
ZENITH_SCALAR_UNARY(gelu_tanh, gelu_tanh)
ZENITH_SCALAR_UNARY(gelu_erf, gelu_erf)
ZENITH_SCALAR_UNARY(erf, erf)
ZENITH_SCALAR_UNARY(floor, floor)
ZENITH_SCALAR_UNARY(ceil, ceil)
ZENITH_SCALAR_UNARY(round, round)
ZENITH_SCALAR_UNARY(reciprocal, reciprocal)
ZENITH_SCALAR_UNARY(stop_gradient, stop_gradient)
#undef ZENITH_SCALAR_UNARY

#define ZENITH_SCALAR_BINARY(NAME, OP)                                                        \
  template <scalar A, scalar B>                                                               \
  inline auto NAME(A a, B b) {                                                                \
    using C = detail::scalar_math_t<ops::OP, std::common_type_t<compute_t<A>, compute_t<B>>>; \
    return static_cast<C>(ops::OP::apply(static_cast<C>(a), static_cast<C>(b)));              \
  }
ZENITH_SCALAR_BINARY(pow, pow)
ZENITH_SCALAR_BINARY(atan2, atan2)
ZENITH_SCALAR_BINARY(maximum, maximum)
ZENITH_SCALAR_BINARY(minimum, minimum)
#undef ZENITH_SCALAR_BINARY

}  // namespace zenith
