#pragma once
// The elementwise op catalogue: one tag type per op, carrying everything every layer needs.
//   name  : IR and error-message name
//   apply : the scalar function (on the compute type: float for bfloat16/float16)
//   simd  : the xsimd batch function (same semantics as apply)
//   cuda  : device source, {0} {1} {2} the operands and {T} the compute type
//   mask_operands (optional): bit i set when simd() takes operand i as an xsimd mask (a
//           comparison's batch_bool), as where's condition; elsewhere bools are scalar-only
//   partial<I>(y, x...): the derivative of the result y with respect to operand I, written
//           with zenith's own ops (detail::apply_op) and operators, so the same rule gives an
//           expression for arrays and tensors and a number for scalars. Autodiff builds every
//           VJP (g * partial) and JVP (sum of t_i * partial_i) from it.
//   piecewise_constant (instead of partial): the derivative is zero almost everywhere (floor,
//           sign, comparisons), as in JAX.
//   nondiff_operands (optional): bit i set when operand i never takes a gradient (where's
//           condition).
//   costly (optional): a transcendental (exp, sin, pow, ...), tens of instructions per
//           element; a cotangent computing one is evaluated once rather than once per operand
//           that reads it (autodiff/backward.hpp).
// Adding an op means adding one struct here, its entry in `elementwise_ops`, and a public
// function in elementwise.hpp. Evaluators, tests and printers pick it up from the tag.
#include <cmath>
#include <string_view>
#include <type_traits>
#include <utility>

// xsimd before the rest: the warnings it silences come from the compiler intrinsics it
// brings in, which must not be included earlier.
#include "simd_headers.hpp"

#include "../core/dtype.hpp"
#include "../core/expr_base.hpp"
#include "scalar_sincos.hpp"
#include "simd_exp.hpp"

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

namespace ops {

using detail::apply_op;
using detail::as_number;

// Ops marked floating_only compute in floating point: an integer or bool input is cast to
// float32 first (as jnp.exp(int_array) gives float32). SIMD_ATTR: attributes of simd(); exp's
// is always inlined, so that a loop over its batches (a sum of exp) overlaps them: called, each
// batch went through a call and ret, and log_sum_exp's fixed-size gradient at N = 8192 spent
// three quarters of its time there.
#define ZENITH_UNARY_FLOAT_OP(NAME, SCALAR, SIMD, CUDA, DERIV, SIMD_ATTR)           \
  struct NAME {                                                                     \
    static constexpr std::string_view name = #NAME;                                 \
    static constexpr bool floating_only = true;                                     \
    static constexpr bool costly = true;                                            \
    static constexpr std::string_view cuda = CUDA;                                  \
    template <class T>                                                              \
    static T apply(T x) {                                                           \
      using std::NAME;                                                              \
      return SCALAR;                                                                \
    }                                                                               \
    template <class B>                                                              \
    SIMD_ATTR static B simd(B const& x) {                                           \
      return SIMD;                                                                  \
    }                                                                               \
    template <std::size_t I, class Y, class X>                                      \
    static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) { \
      return DERIV;                                                                 \
    }                                                                               \
  };

ZENITH_UNARY_FLOAT_OP(exp, exp(x), detail::simd_exp(x), "exp({0})", y, [[gnu::always_inline]])
ZENITH_UNARY_FLOAT_OP(log, log(x), xsimd::log(x), "log({0})", apply_op<reciprocal>(x), )
ZENITH_UNARY_FLOAT_OP(log1p, log1p(x), xsimd::log1p(x), "log1p({0})", apply_op<reciprocal>(x + 1), )
ZENITH_UNARY_FLOAT_OP(expm1, expm1(x), xsimd::expm1(x), "expm1({0})", y + 1, )
ZENITH_UNARY_FLOAT_OP(sqrt, sqrt(x), xsimd::sqrt(x), "sqrt({0})", 0.5 / y, )
ZENITH_UNARY_FLOAT_OP(sin, sin(x), xsimd::sin(x), "sin({0})", apply_op<cos>(x), )
ZENITH_UNARY_FLOAT_OP(cos, cos(x), xsimd::cos(x), "cos({0})", -apply_op<sin>(x), )
ZENITH_UNARY_FLOAT_OP(tan, tan(x), xsimd::tan(x), "tan({0})", 1 + y * y, )
ZENITH_UNARY_FLOAT_OP(tanh, tanh(x), xsimd::tanh(x), "tanh({0})", 1 - y * y, )
ZENITH_UNARY_FLOAT_OP(erf, erf(x), xsimd::erf(x), "erf({0})",
                      1.1283791670955126 * apply_op<exp>(-(x * x)), )
#undef ZENITH_UNARY_FLOAT_OP

// An op's value and derivative computed together where one computation gives both, for one
// double: sin and cos share one inline sincos (expr/scalar_sincos.hpp). Forward-mode scalars
// take them from here (autodiff/dual.hpp), so no libm call sits in their fixed-size code. Ops
// without a joint form leave this empty.
template <class Op>
struct value_and_partial {};
template <>
struct value_and_partial<sin> {
  [[gnu::always_inline]] static std::pair<double, double> scalar(double x) {
    auto const [s, c] = detail::scalar_sincos(x);
    return {s, c};  // d sin = cos
  }
};
template <>
struct value_and_partial<cos> {
  [[gnu::always_inline]] static std::pair<double, double> scalar(double x) {
    auto const [s, c] = detail::scalar_sincos(x);
    return {c, -s};  // d cos = -sin
  }
};

// Rounding: piecewise constant, so the derivative is zero almost everywhere (as in JAX).
// round is half to even, as NumPy and JAX do (not std::round's half away from zero).
#define ZENITH_ROUNDING_OP(NAME, STD, XSIMD, CUDA)   \
  struct NAME {                                      \
    static constexpr std::string_view name = #NAME;  \
    static constexpr bool floating_only = true;      \
    static constexpr bool piecewise_constant = true; \
    static constexpr std::string_view cuda = CUDA;   \
    template <class T>                               \
    static T apply(T x) {                            \
      using std::STD;                                \
      return STD(x);                                 \
    }                                                \
    template <class B>                               \
    static B simd(B const& x) {                      \
      return xsimd::XSIMD(x);                        \
    }                                                \
  };
ZENITH_ROUNDING_OP(floor, floor, floor, "floor({0})")
ZENITH_ROUNDING_OP(ceil, ceil, ceil, "ceil({0})")
ZENITH_ROUNDING_OP(round, nearbyint, nearbyint, "rint({0})")
#undef ZENITH_ROUNDING_OP

// Exact 1/sqrt(x); xsimd::rsqrt is a low-precision estimate, so it is not used.
struct rsqrt {
  static constexpr std::string_view name = "rsqrt";
  static constexpr bool floating_only = true;
  static constexpr std::string_view cuda = "rsqrt({0})";
  template <class T>
  static T apply(T x) {
    using std::sqrt;
    return T(1) / sqrt(x);
  }
  template <class B>
  static B simd(B const& x) {
    return B(1) / xsimd::sqrt(x);
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    return -0.5 * y * y * y;
  }
};

struct reciprocal {
  static constexpr std::string_view name = "reciprocal";
  static constexpr bool floating_only = true;
  static constexpr std::string_view cuda = "(({T})1 / {0})";
  template <class T>
  static T apply(T x) {
    return T(1) / x;
  }
  template <class B>
  static B simd(B const& x) {
    return B(1) / x;
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    return -(y * y);
  }
};

struct sigmoid {
  static constexpr std::string_view name = "sigmoid";
  static constexpr bool floating_only = true;
  static constexpr bool costly = true;
  static constexpr std::string_view cuda = "(({T})1 / (({T})1 + exp(-{0})))";
  template <class T>
  static T apply(T x) {
    using std::exp;
    return T(1) / (T(1) + exp(-x));
  }
  template <class B>
  static B simd(B const& x) {
    return B(1) / (B(1) + detail::simd_exp(-x));
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    return y * (1 - y);
  }
};

// gelu, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct gelu_tanh {
  static constexpr std::string_view name = "gelu_tanh";
  static constexpr bool floating_only = true;
  static constexpr bool costly = true;
  static constexpr std::string_view cuda =
      "(({T})0.5 * {0} * (({T})1 + tanh(({T})0.7978845608028654 * ({0} + ({T})0.044715 * {0} * "
      "{0} * {0}))))";
  template <class T>
  static T apply(T x) {
    using std::tanh;
    return T(0.5) * x * (T(1) + tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
  }
  template <class B>
  static B simd(B const& x) {
    using T = typename B::value_type;
    return B(T(0.5)) * x *
           (B(T(1)) + xsimd::tanh(B(T(0.7978845608028654)) * (x + B(T(0.044715)) * x * x * x)));
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    // t = tanh(u), u = sqrt(2/pi) (x + 0.044715 x^3), du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    auto t = apply_op<tanh>(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 0.134145 * x * x);
  }
};

// gelu, exact form: 0.5 x (1 + erf(x / sqrt(2))).
struct gelu_erf {
  static constexpr std::string_view name = "gelu_erf";
  static constexpr bool floating_only = true;
  static constexpr bool costly = true;
  static constexpr std::string_view cuda =
      "(({T})0.5 * {0} * (({T})1 + erf({0} * ({T})0.7071067811865476)))";
  template <class T>
  static T apply(T x) {
    using std::erf;
    return T(0.5) * x * (T(1) + erf(x * T(0.7071067811865476)));
  }
  template <class B>
  static B simd(B const& x) {
    using T = typename B::value_type;
    return B(T(0.5)) * x * (B(T(1)) + xsimd::erf(x * B(T(0.7071067811865476))));
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    return 0.5 * (1 + apply_op<erf>(x * 0.7071067811865476)) +
           0.3989422804014327 * x * apply_op<exp>(-0.5 * (x * x));
  }
};

// stop_gradient(x): x itself, through which no derivative flows: autodiff treats it as a
// constant, as JAX's lax.stop_gradient (the rule is "zero", as for the piecewise-constant ops).
struct stop_gradient {
  static constexpr std::string_view name = "stop_gradient";
  static constexpr std::string_view cuda = "({0})";
  static constexpr bool piecewise_constant = true;
  template <class T>
  static T apply(T x) {
    return x;
  }
  template <class B>
  static B simd(B const& x) {
    return x;
  }
};

// Ops that keep the input's type (integers stay integers).
struct neg {
  static constexpr std::string_view name = "neg";
  static constexpr std::string_view cuda = "(-{0})";
  template <class T>
  static T apply(T x) {
    return -x;
  }
  // Flips the sign bit, as scalar negation does: xsimd 8.1 computes -x as 0 - x on AVX-512,
  // which gives +0 for +0 (not -0) and keeps a NaN's sign.
  template <class B>
  static B simd(B const& x) {
    using T = typename B::value_type;
    if constexpr (std::is_floating_point_v<T>)
      return x ^ B(T(-0.0));
    else
      return -x;
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    return -1;
  }
};

struct abs {
  static constexpr std::string_view name = "abs";
  static constexpr std::string_view cuda = "abs({0})";
  template <class T>
  static T apply(T x) {
    return x < T(0) ? -x : (x == T(0) ? T(0) : x);  // abs(-0.0) is +0.0, NaN stays NaN
  }
  template <class B>
  static B simd(B const& x) {
    return xsimd::abs(x);
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    return apply_op<sign>(x);
  }
};

// -1, 0 or 1; NaN for NaN.
struct sign {
  static constexpr std::string_view name = "sign";
  static constexpr std::string_view cuda =
      "({0} != {0} ? {0} : ({T})(({0} > ({T})0) - ({0} < ({T})0)))";
  template <class T>
  static T apply(T x) {
    if (x != x) return x;
    return T((x > T(0)) - (x < T(0)));
  }
  template <class B>
  static B simd(B const& x) {
    using T = typename B::value_type;
    B r = xsimd::select(x > B(T(0)), B(T(1)), xsimd::select(x < B(T(0)), B(T(-1)), B(T(0))));
    return xsimd::select(detail::nan_mask(x), x, r);
  }
  static constexpr bool piecewise_constant = true;
};

struct square {
  static constexpr std::string_view name = "square";
  static constexpr std::string_view cuda = "({0} * {0})";
  template <class T>
  static T apply(T x) {
    return x * x;
  }
  template <class B>
  static B simd(B const& x) {
    return x * x;
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    return 2 * x;
  }
};

// max(x, 0); NaN stays NaN.
struct relu {
  static constexpr std::string_view name = "relu";
  static constexpr std::string_view cuda = "({0} > ({T})0 || {0} != {0} ? {0} : ({T})0)";
  template <class T>
  static T apply(T x) {
    return (x > T(0) || x != x) ? x : T(0);
  }
  template <class B>
  static B simd(B const& x) {
    using T = typename B::value_type;
    return xsimd::select((x > B(T(0))) || detail::nan_mask(x), x, B(T(0)));
  }
  template <std::size_t I, class Y, class X>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] X const& x) {
    return apply_op<sign>(y);  // 1 where x > 0, else 0 (also at 0, as JAX)
  }
};

#define ZENITH_BINARY_ARITH_OP(NAME, OPSYM, D0, D1)                                           \
  struct NAME {                                                                               \
    static constexpr std::string_view name = #NAME;                                           \
    static constexpr std::string_view cuda = "({0} " #OPSYM " {1})";                          \
    template <class T>                                                                        \
    static T apply(T a, T b) {                                                                \
      return a OPSYM b;                                                                       \
    }                                                                                         \
    template <class B>                                                                        \
    static B simd(B const& a, B const& b) {                                                   \
      return a OPSYM b;                                                                       \
    }                                                                                         \
    template <std::size_t I, class Y, class A, class B>                                       \
    static auto partial(Y const&, [[maybe_unused]] A const& a, [[maybe_unused]] B const& b) { \
      if constexpr (I == 0)                                                                   \
        return D0;                                                                            \
      else                                                                                    \
        return D1;                                                                            \
    }                                                                                         \
  };
ZENITH_BINARY_ARITH_OP(add, +, 1, 1)
ZENITH_BINARY_ARITH_OP(sub, -, 1, -1)
ZENITH_BINARY_ARITH_OP(mul, *, b, a)
#undef ZENITH_BINARY_ARITH_OP

// True division: integers promote to float32 first (jnp.divide).
struct div {
  static constexpr std::string_view name = "div";
  static constexpr bool floating_only = true;
  static constexpr std::string_view cuda = "({0} / {1})";
  template <class T>
  static T apply(T a, T b) {
    return a / b;
  }
  template <class B>
  static B simd(B const& a, B const& b) {
    return a / b;
  }
  template <std::size_t I, class Y, class A, class B>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] A const& a,
                      [[maybe_unused]] B const& b) {
    if constexpr (I == 0)
      return apply_op<reciprocal>(b);
    else
      return -(y / b);
  }
};

struct pow {
  static constexpr std::string_view name = "pow";
  static constexpr bool floating_only = true;
  static constexpr bool costly = true;
  static constexpr std::string_view cuda = "pow({0}, {1})";
  template <class T>
  static T apply(T a, T b) {
    using std::pow;
    return pow(a, b);
  }
  // x^0 and 1^y are 1 for every x and y, NaN included, and any other power with a NaN is NaN
  // (C's pow, JAX's); xsimd's pow differs on some of them.
  template <class B>
  static B simd(B const& a, B const& b) {
    using T = typename B::value_type;
    B r = xsimd::select(detail::nan_mask(a) || detail::nan_mask(b), a + b, xsimd::pow(a, b));
    return xsimd::select(b == B(T(0)) || a == B(T(1)), B(T(1)), r);
  }
  template <std::size_t I, class Y, class A, class B>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] A const& a,
                      [[maybe_unused]] B const& b) {
    if constexpr (I == 0)
      return b * apply_op<pow>(a, b - 1);
    else
      return y * apply_op<log>(a);
  }
};

struct atan2 {
  static constexpr std::string_view name = "atan2";
  static constexpr bool floating_only = true;
  static constexpr bool costly = true;
  static constexpr std::string_view cuda = "atan2({0}, {1})";
  template <class T>
  static T apply(T a, T b) {
    using std::atan2;
    return atan2(a, b);
  }
  // Both infinite: +-pi/4 or +-3pi/4 as C's atan2 gives (xsimd's gives NaN).
  template <class B>
  static B simd(B const& a, B const& b) {
    using T = typename B::value_type;
    B both = xsimd::select(b > B(T(0)), B(T(0.78539816339744830962)), B(T(2.35619449019234492885)));
    // Both zero: +-0 or +-pi by the signs, as C's atan2 (xsimd's gives NaN).
    B zeros =
        xsimd::select(xsimd::copysign(B(T(1)), b) < B(T(0)), B(T(3.14159265358979323846)), B(T(0)));
    B r =
        xsimd::select(a == B(T(0)) && b == B(T(0)), xsimd::copysign(zeros, a), xsimd::atan2(a, b));
    return xsimd::select(xsimd::isinf(a) && xsimd::isinf(b), xsimd::copysign(both, a), r);
  }
  template <std::size_t I, class Y, class A, class B>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] A const& a,
                      [[maybe_unused]] B const& b) {
    if constexpr (I == 0)
      return b / (a * a + b * b);
    else
      return -a / (a * a + b * b);
  }
};

// NaN-propagating, as numpy.maximum / numpy.minimum.
struct maximum {
  static constexpr std::string_view name = "maximum";
  static constexpr std::string_view cuda = "(({0} > {1} || {0} != {0}) ? {0} : {1})";
  template <class T>
  static T apply(T a, T b) {
    return (a > b || a != a) ? a : b;
  }
  template <class B>
  static B simd(B const& a, B const& b) {
    return xsimd::select((a > b) || detail::nan_mask(a), a, b);
  }
  template <std::size_t I, class Y, class A, class B>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] A const& a,
                      [[maybe_unused]] B const& b) {
    if constexpr (I == 0)
      return as_number<A>(a > b) + 0.5 * as_number<A>(a == b);
    else
      return as_number<A>(b > a) + 0.5 * as_number<A>(a == b);
  }
};
struct minimum {
  static constexpr std::string_view name = "minimum";
  static constexpr std::string_view cuda = "(({0} < {1} || {0} != {0}) ? {0} : {1})";
  template <class T>
  static T apply(T a, T b) {
    return (a < b || a != a) ? a : b;
  }
  template <class B>
  static B simd(B const& a, B const& b) {
    return xsimd::select((a < b) || detail::nan_mask(a), a, b);
  }
  template <std::size_t I, class Y, class A, class B>
  static auto partial([[maybe_unused]] Y const& y, [[maybe_unused]] A const& a,
                      [[maybe_unused]] B const& b) {
    if constexpr (I == 0)
      return as_number<A>(a < b) + 0.5 * as_number<A>(a == b);
    else
      return as_number<A>(b < a) + 0.5 * as_number<A>(a == b);
  }
};

// Comparisons give bool.
#define ZENITH_COMPARE_OP(NAME, OPSYM)                               \
  struct NAME {                                                      \
    static constexpr std::string_view name = #NAME;                  \
    static constexpr std::string_view cuda = "({0} " #OPSYM " {1})"; \
    template <class... T>                                            \
    using result = bool;                                             \
    template <class T>                                               \
    static bool apply(T a, T b) {                                    \
      return a OPSYM b;                                              \
    }                                                                \
    template <class B>                                               \
    static auto simd(B const& a, B const& b) {                       \
      return a OPSYM b;                                              \
    }                                                                \
    static constexpr bool piecewise_constant = true;                 \
  };
ZENITH_COMPARE_OP(equal, ==)
ZENITH_COMPARE_OP(less, <)
ZENITH_COMPARE_OP(less_equal, <=)
ZENITH_COMPARE_OP(greater, >)
ZENITH_COMPARE_OP(greater_equal, >=)
#undef ZENITH_COMPARE_OP

// Not a != b in simd(): xsimd 8.1's != is an ordered compare, false when either side is NaN.
struct not_equal {
  static constexpr std::string_view name = "not_equal";
  static constexpr std::string_view cuda = "({0} != {1})";
  template <class... T>
  using result = bool;
  template <class T>
  static bool apply(T a, T b) {
    return a != b;
  }
  template <class B>
  static auto simd(B const& a, B const& b) {
    return !(a == b);
  }
  static constexpr bool piecewise_constant = true;
};

// where(cond, a, b): the type of a and b. In simd() the condition is a comparison's mask,
// whose lane type may differ from a's and b's (int32 cond, float values).
struct where {
  static constexpr std::string_view name = "select";
  static constexpr std::string_view cuda = "({0} ? {1} : {2})";
  static constexpr unsigned mask_operands = 0b1;
  template <class C, class T>
  static T apply(C c, T a, T b) {
    return c ? a : b;
  }
  template <class C, class B>
  static B simd(C const& c, B const& a, B const& b) {
    return xsimd::select(detail::mask_as<typename B::value_type>(c), a, b);
  }
  static constexpr unsigned nondiff_operands = 0b1;  // the condition
  template <std::size_t I, class Y, class C, class A, class B>
  static auto partial(Y const&, C const& c, A const&, B const&) {
    static_assert(I != 0, "zenith: where's condition takes no gradient");
    if constexpr (I == 1)
      return as_number<Y>(c);
    else
      return 1 - as_number<Y>(c);
  }
};

// clip(x, lo, hi) = minimum(maximum(x, lo), hi), NaN propagating as there (CUDA's min and max
// would return a bound for a NaN x): zn_clip is in every kernel's prelude.
struct clip {
  static constexpr std::string_view name = "clamp";
  static constexpr std::string_view cuda = "zn_clip(({T}){0}, ({T}){1}, ({T}){2})";
  template <class T>
  static T apply(T x, T lo, T hi) {
    return minimum::apply(maximum::apply(x, lo), hi);
  }
  template <class B>
  static B simd(B const& x, B const& lo, B const& hi) {
    return minimum::simd(maximum::simd(x, lo), hi);
  }
  // 1 for x inside [lo, hi]; a bound's derivative is 1 where it clips.
  template <std::size_t I, class Y, class X, class L, class H>
  static auto partial(Y const&, X const& x, L const& lo, H const& hi) {
    if constexpr (I == 0)
      return as_number<Y>(x >= lo) * as_number<Y>(x <= hi);
    else if constexpr (I == 1)
      return as_number<Y>(x < lo);
    else
      return as_number<Y>(x > hi) * as_number<Y>(x >= lo);
  }
};

// cast<To>: element type conversion. To a 16-bit storage type the value is rounded to that
// type (then computed on in float), so cast<bfloat16>(x) means what it says inside a chain too.
template <class To>
struct cast {
  static constexpr std::string_view name = "convert";
  static constexpr std::string_view cuda = "(({T}){0})";
  static constexpr unsigned mask_operands = 0b1;
  template <class... T>
  using result = To;
  template <class T>
  static compute_t<To> apply(T x) {
    if constexpr (std::is_same_v<To, bool>)
      return x != T(0);
    else if constexpr (storage_float<To>)
      return float(To(float(x)));
    else
      return static_cast<compute_t<To>>(x);
  }
  // Batches convert lane for lane, so only between types of one width (float <-> int32,
  // double <-> int64); the evaluator reads other conversions on the scalar path.
  template <class B>
  requires(std::is_same_v<To, bool> ||
           sizeof(detail::lane_t<B>) == sizeof(compute_t<To>)) static auto simd(B const& x) {
    using C = compute_t<To>;
    using R = xsimd::batch<C>;
    if constexpr (xsimd::is_batch_bool<B>::value) {  // a comparison's mask
      if constexpr (std::is_same_v<To, bool>)
        return x;
      else
        return xsimd::select(detail::mask_as<C>(x), R(C(1)), R(C(0)));
    } else if constexpr (std::is_same_v<To, bool>) {
      return !(x == B(typename B::value_type(0)));  // NaN is true, as in C++
    } else if constexpr (storage_float<To>) {
      alignas(64) float tmp[R::size];
      if constexpr (std::is_same_v<typename B::value_type, float>)
        x.store_aligned(tmp);
      else
        xsimd::batch_cast<float>(x).store_aligned(tmp);
      for (auto& v : tmp) v = float(To(v));
      return R::load_aligned(tmp);
    } else if constexpr (std::is_same_v<typename B::value_type, C>) {
      return x;
    } else {
      return xsimd::batch_cast<C>(x);
    }
  }
  // The identity (a conversion to an integer or bool type is piecewise constant, and autodiff
  // sends no gradient through it).
  template <std::size_t I, class Y, class X>
  static auto partial(Y const&, X const&) {
    return 1;
  }
};

}  // namespace ops

// The catalogue the op test walks: an op missing any member fails to compile there.
using elementwise_ops =
    type_list<ops::neg, ops::abs, ops::sign, ops::exp, ops::log, ops::log1p, ops::expm1, ops::sqrt,
              ops::rsqrt, ops::square, ops::sin, ops::cos, ops::tan, ops::tanh, ops::sigmoid,
              ops::relu, ops::gelu_tanh, ops::gelu_erf, ops::erf, ops::floor, ops::ceil, ops::round,
              ops::reciprocal, ops::add, ops::sub, ops::mul, ops::div, ops::pow, ops::maximum,
              ops::minimum, ops::atan2, ops::equal, ops::not_equal, ops::less, ops::less_equal,
              ops::greater, ops::greater_equal, ops::where, ops::clip, ops::cast<float>,
              ops::stop_gradient>;

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
