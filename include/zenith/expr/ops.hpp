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
// Adding an op means adding one struct (here, or in ops_math.hpp for arithmetic and
// transcendental ops), its entry in `elementwise_ops`, and a public
// function in elementwise.hpp. Evaluators, tests and printers pick it up from the tag.
#include <string_view>
#include <type_traits>

#include "ops_math.hpp"

namespace zenith {

namespace ops {

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

}  // namespace zenith
