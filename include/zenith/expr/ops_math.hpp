#pragma once
// The arithmetic and transcendental op tags of the catalogue (expr/ops.hpp has the format of a
// tag, the comparisons, selections and conversions, and the catalogue itself).
#include <cmath>
#include <string_view>
#include <type_traits>
#include <utility>

#include "op_support.hpp"
#include "scalar_sincos.hpp"
#include "simd_exp.hpp"

namespace zenith {

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
  // C's pow (JAX's) everywhere: xsimd's pow is right for finite nonzero bases and finite
  // exponents, and differs from C on powers of a zero, an infinity or a NaN (0^-0.5 is inf, not
  // 0; (-inf)^0.5 is inf and (-1)^inf is 1, not NaN). A batch with such a lane takes those lanes
  // from std::pow, as the scalar path does. The check costs about a third of pow's SIMD time
  // even when no lane is special (selects in place of the branch cost as much).
  template <class B>
  static B simd(B const& a, B const& b) {
    using T = typename B::value_type;
    B r = xsimd::pow(a, b);
    auto const special = !xsimd::isfinite(a) || !xsimd::isfinite(b) || a == B(T(0));
    if (xsimd::any(special)) [[unlikely]] {
      alignas(B::arch_type::alignment()) T x[B::size], y[B::size], out[B::size];
      a.store_aligned(x);
      b.store_aligned(y);
      r.store_aligned(out);
      for (std::size_t i = 0; i < B::size; ++i)
        if (!std::isfinite(x[i]) || !std::isfinite(y[i]) || x[i] == T(0))
          out[i] = apply(x[i], y[i]);
      r = B::load_aligned(out);
    }
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

}  // namespace ops

}  // namespace zenith
