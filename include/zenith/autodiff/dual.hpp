#pragma once
// zenith::dual<T, N>: a forward-mode derivative scalar. A value and N tangent components, stored
// inline (no heap), with arithmetic and scalar math that carry the tangents along:
//
//   zn::dual<double, 2> x = zn::dual<double, 2>::variable(0.5, 0);   // dx = (1, 0)
//   zn::dual<double, 2> y = zn::dual<double, 2>::variable(2.0, 1);   // dy = (0, 1)
//   auto f = zn::sin(x) * y + 3.0;     // f.value() = sin(.5) * 2 + 3, f.tangent(0) = cos(.5) * 2
//
// - A plain number (or, in a dual of duals, a dual one level down) is a constant: it is never
//   widened into a dual first, so `dual * 2.0` scales the N + 1 numbers and `dual + 0.0` adds one.
// - A dual the compiler sees has a zero tangent (built from a plain number, `T(0.0)`, `T(a)`)
//   is treated as a constant by the arithmetic, the math functions and the fixed-size matmul,
//   as a plain number is: a product with it scales. Its zero tangent times a value is not a
//   zero the compiler may fold (the value could be inf or NaN), so without this, code that
//   writes its constants as duals pays for their derivative. Where the compiler does not see
//   it, the dual arithmetic runs; the two agree on finite values.
// - Comparisons compare values.
// - The math functions (sin, exp, pow, atan2, ...) take their value and derivative from the op
//   tags in expr/ops.hpp (`apply` and `partial<I>`): one op, one place. + - * / are written out.
// - dual<dual<double, N>, N> (forward over forward) gives second derivatives; zenith::hessian
//   uses it.
// - zenith::tensor<dual<T, N>, M...> works with the fixed-size ops; jacfwd builds one.
//
// Storage: for float and double the value and the tangent share one lane array, padded to a
// whole vector: d[0..N-1] the tangent, the last lane the value (dual<double, 7> is 8 lanes, one
// AVX-512 register, 64 bytes). Most operations are then one vector operation for value and
// tangent together (a product with a constant scales all lanes), and a chain of them keeps one
// register per number instead of two. Lanes between the tangent and the value are padding,
// never read. A dual of duals keeps its value apart (`v`).
#include <array>
#include <cmath>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <type_traits>
#include <utility>

#include "../backend/cpu/fixed_eval.hpp"  // detail::max_vector_bytes
#include "../core/dtype.hpp"
#include "../core/tensor.hpp"       // ZENITH_FIXED_INLINE
#include "../expr/elementwise.hpp"  // detail::apply_op, which the op tags' rules call
#include "../expr/ops.hpp"
#include "dual_lanes.hpp"

namespace zenith {

template <class T, std::size_t N>
struct dual;

template <class T>
inline constexpr bool is_dual_v = false;
template <class T, std::size_t N>
inline constexpr bool is_dual_v<dual<T, N>> = true;

template <class T, std::size_t N>
struct number_traits<dual<T, N>> {
  using value_type = T;
  static constexpr int depth = 1 + number_depth<T>;
  // The tensor entry flags (core/tensor.hpp) that hold for x: constant where its tangent is
  // zero, zero where its value is too. Callers keep the flags the compiler sees (if_known), so
  // this costs nothing at run time. The lanes' bits are OR-ed into one integer (sign bits
  // dropped: -0 is a zero), read as whole vectors like the arithmetic reads them: after
  // inlining, the compiler folds that for a dual built from a plain number, where a test per
  // lane does not fold.
  ZENITH_FIXED_INLINE static std::uint8_t known_flags(
      dual<T, N> const& x) requires std::is_floating_point_v<T> {
    using I = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
    constexpr std::size_t P = dual<T, N>::lane_count, W = detail::lanes<T, P>::width;
    if constexpr (!detail::lanes<T, P>::vector) {
      return 0;
    } else {
      I tangent = 0, value = 0;
      detail::static_for<P / W>([&](auto c) ZENITH_FIXED_LAMBDA {
        typedef I ivec __attribute__((vector_size(W * sizeof(T))));
        ivec b;
        std::memcpy(&b, x.d.data() + c * W, sizeof(ivec));
        detail::static_for<W>([&](auto l) ZENITH_FIXED_LAMBDA {
          constexpr std::size_t lane = c * W + l;
          if constexpr (lane < N) tangent |= I(b[std::size_t(l)] << 1);
          if constexpr (lane == P - 1) value = I(b[std::size_t(l)] << 1);
        });
      });
      unsigned const constant = unsigned(tangent == 0);
      unsigned const zero = constant & unsigned(value == 0);
      return std::uint8_t(constant * detail::constant_flag | zero * detail::zero_flag);
    }
  }
};

// A constant for dual type D: a plain number, or a number type shallower than D's value type
// that converts to it (a double or a dual<double, N> inside a dual<dual<double, N>, N>).
template <class S, class D>
concept dual_constant = !std::is_same_v<S, D> && !expression<S> &&
                        (scalar<S> || (user_number<S> && number_depth<S> < number_depth<D> &&
                                       std::is_convertible_v<S const&, typename D::value_type>));

namespace detail {

// The member of a packed dual that has no separate value.
struct no_value {};

// The value of a dual, a constant as it is.
template <class X>
ZENITH_FIXED_INLINE constexpr decltype(auto) primal(X const& x) {
  if constexpr (is_dual_v<X>)
    return x.value();
  else
    return (x);
}

// The floating type at the bottom of a (nested) dual.
template <class T>
struct dual_base {
  using type = T;
};
template <class T, std::size_t N>
struct dual_base<dual<T, N>> {
  using type = typename dual_base<T>::type;
};

// Whether the compiler sees that x is a constant: a number, or a dual whose tangent it sees is
// zero (a dual built from a plain number). Ops then take the constant's rule: a product with
// such a dual scales rather than multiplies (its zero tangent times a value is not a zero the
// compiler may fold: the value could be inf or NaN).
template <class X>
ZENITH_FIXED_INLINE bool known_constant(X const& x) {
  if constexpr (!is_dual_v<X>)
    return true;
  else if constexpr (ZENITH_SEES_CONSTANTS && requires { number_traits<X>::known_flags(x); })
    return if_known(number_traits<X>::known_flags(x)) & constant_flag;
  else
    return false;
}

// A constant (or a derivative factor) as it multiplies the lanes of dual D: converted to the
// value type for first-order duals of float / double; a plain number in a dual of duals stays
// a plain number (of the base type), so it scales rather than multiplies as a dual.
template <class D, class S>
ZENITH_FIXED_INLINE constexpr auto constant_as(S const& c) {
  using T = typename D::value_type;
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(c);
  else if constexpr (scalar<S>)
    return static_cast<typename dual_base<T>::type>(c);
  else
    return static_cast<T>(c);
}

}  // namespace detail

template <class T, std::size_t N>
struct dual {
  static_assert(std::is_floating_point_v<T> || user_number<T>,
                "zenith: dual<T, N> needs a floating-point T (or a dual, for higher order)");
  using value_type = T;
  static constexpr std::size_t tangents = N;
  // float / double: the value is the last lane of d (see the top of this file).
  static constexpr bool packed = std::is_floating_point_v<T>;
  static constexpr std::size_t lane_count = detail::dual_lanes<T, N>();
  using lane_array = std::array<T, lane_count>;

  // The value of a dual of duals; nothing for a packed dual.
  [[no_unique_address]] std::conditional_t<packed, detail::no_value, T> v{};
  // The tangent d[0], ..., d[N - 1]; for a packed dual the value in the last lane.
  // Float / double lanes aligned to the vector (one load, never split across cache lines).
  alignas(packed ? detail::vector_align(sizeof(lane_array), alignof(T))
                 : alignof(lane_array)) lane_array d{};

  constexpr dual() = default;
  // A constant: zero tangent. Implicit, so that `tensor<dual, 4, 4>{c, -s, 0, a, ...}` and
  // `dual x = 1.0` read as they do for double.
  template <dual_constant<dual> S>
  constexpr dual(S const& c) {  // NOLINT
    set_value(static_cast<T>(c));
  }
  constexpr dual(T const& value, std::array<T, N> const& tangent) {
    for (std::size_t k = 0; k < N; ++k) d[k] = tangent[k];
    set_value(value);
  }
  // The k-th input variable: value x, tangent the k-th unit vector.
  static constexpr dual variable(T const& x, std::size_t k) {
    dual r(x);
    r.d[k] = T(1);
    return r;
  }

  // The value: a copy for a packed dual, a reference to v for a dual of duals.
  ZENITH_FIXED_INLINE constexpr decltype(auto) value() const {
    if constexpr (packed)
      return detail::lanes<T, lane_count>::last(d);
    else
      return (v);
  }
  ZENITH_FIXED_INLINE constexpr void set_value(T const& x) {
    if constexpr (packed)
      detail::lanes<T, lane_count>::set_last(d, x);
    else
      v = x;
  }
  constexpr T const& tangent(std::size_t k) const { return d[k]; }
  constexpr T& tangent(std::size_t k) { return d[k]; }

  template <class U>
  ZENITH_FIXED_INLINE dual& operator+=(U const& o) {
    return *this = *this + o;
  }
  template <class U>
  ZENITH_FIXED_INLINE dual& operator-=(U const& o) {
    return *this = *this - o;
  }
  template <class U>
  ZENITH_FIXED_INLINE dual& operator*=(U const& o) {
    return *this = *this * o;
  }
  template <class U>
  ZENITH_FIXED_INLINE dual& operator/=(U const& o) {
    return *this = *this / o;
  }

  // out (M x P) = a (M x K) * b (K x P), row-major: the fixed-size matmul of first-order duals
  // (backend/cpu/fixed_eval.hpp calls it). Defined below.
  // flags_a / flags_b: the entries' detail::constant_flag / zero_flag, or null; their terms
  // are skipped.
  template <std::size_t M, std::size_t K, std::size_t P>
  requires std::is_floating_point_v<T>
  static void matmul_kernel(dual* out, dual const* a, dual const* b, std::uint8_t const* flags_a,
                            std::uint8_t const* flags_b);
};

namespace detail {

template <class D>
using dual_lanes_t = lanes<typename D::value_type, D::lane_count>;

// a.d scaled by p, the derivative of the result with respect to a. A plain-number p (add's
// constant 1, sqrt's 0.5 / y of a first-order dual) stays plain: it scales.
template <class D, class P>
ZENITH_FIXED_INLINE typename D::lane_array scale_lanes(P const& p,
                                                       typename D::lane_array const& a) {
  auto const s = constant_as<D>(p);
  return dual_lanes_t<D>::map([&](auto const& x) ZENITH_FIXED_LAMBDA { return s * x; }, a);
}
// pa * a + pb * b.
template <class D, class PA, class PB>
ZENITH_FIXED_INLINE typename D::lane_array axpby_lanes(PA const& pa,
                                                       typename D::lane_array const& a,
                                                       PB const& pb,
                                                       typename D::lane_array const& b) {
  auto const sa = constant_as<D>(pa);
  auto const sb = constant_as<D>(pb);
  return dual_lanes_t<D>::map(
      [&](auto const& x, auto const& y) ZENITH_FIXED_LAMBDA { return sa * x + sb * y; }, a, b);
}

// Ops whose value and derivative a dual of float or double takes together from
// ops::value_and_partial (computed in double).
template <class Op, class T>
concept joint_value_and_partial = (std::is_same_v<T, float> ||
                                   std::is_same_v<T, double>)&&requires(double x) {
  ops::value_and_partial<Op>::scalar(x);
};

// A unary op on a dual, from its tag: value Op::apply(x), tangent partial<0> * dx; or both from
// the op's joint form (sin, cos: one inline sincos).
template <class Op, class T, std::size_t N>
ZENITH_FIXED_INLINE dual<T, N> dual_unary(dual<T, N> const& x) {
  using D = dual<T, N>;
  // The lanes first, the value over them (a packed dual's value lane).
  if constexpr (piecewise_constant_op<Op>()) {
    return D(T(Op::apply(x.value())));
  } else if constexpr (joint_value_and_partial<Op, T>) {
    auto const [y, p] = ops::value_and_partial<Op>::scalar(double(x.value()));
    if (known_constant(x)) return D(T(y));
    D r;
    r.d = scale_lanes<D>(T(p), x.d);
    r.set_value(T(y));
    return r;
  } else {
    T const y = Op::apply(x.value());
    if (known_constant(x)) return D(y);
    D r;
    r.d = scale_lanes<D>(Op::template partial<0>(y, x.value()), x.d);
    r.set_value(y);
    return r;
  }
}

// A binary op on a dual and a dual or constant, from its tag. The constant is converted to the
// value type for apply / partial (a no-op for first-order duals of double); only the operands
// that are duals contribute tangents.
template <class Op, class D, class A, class B>
ZENITH_FIXED_INLINE D dual_binary(A const& a, B const& b) {
  using T = typename D::value_type;
  T const av = static_cast<T>(primal(a));
  T const bv = static_cast<T>(primal(b));
  if constexpr (piecewise_constant_op<Op>()) {
    return D(T(Op::apply(av, bv)));
  } else {
    D r;
    T const y = Op::apply(av, bv);
    bool const ca = !std::is_same_v<A, D> || known_constant(a);
    bool const cb = !std::is_same_v<B, D> || known_constant(b);
    if (ca && cb) return D(y);
    if constexpr (std::is_same_v<A, B>) {
      if (cb)
        r.d = scale_lanes<D>(Op::template partial<0>(y, av, bv), a.d);
      else if (ca)
        r.d = scale_lanes<D>(Op::template partial<1>(y, av, bv), b.d);
      else
        r.d = axpby_lanes<D>(Op::template partial<0>(y, av, bv), a.d,
                             Op::template partial<1>(y, av, bv), b.d);
    } else if constexpr (std::is_same_v<A, D>)
      r.d = scale_lanes<D>(Op::template partial<0>(y, av, bv), a.d);
    else
      r.d = scale_lanes<D>(Op::template partial<1>(y, av, bv), b.d);
    r.set_value(y);
    return r;
  }
}

}  // namespace detail

// Operands of a binary dual operation: two equal duals, or a dual and one of its constants.
template <class A, class B>
concept dual_operands = (is_dual_v<A> && is_dual_v<B> && std::is_same_v<A, B>) ||
                        (is_dual_v<A> && dual_constant<B, A>) ||
                        (is_dual_v<B> && dual_constant<A, B>);

// ---- arithmetic (written out: these are the hot path) ----

template <class T, std::size_t N>
ZENITH_FIXED_INLINE constexpr dual<T, N> operator+(dual<T, N> const& a) {
  return a;
}
template <class T, std::size_t N>
ZENITH_FIXED_INLINE dual<T, N> operator-(dual<T, N> const& a) {
  if (detail::known_constant(a)) return dual<T, N>(-a.value());
  dual<T, N> r;
  r.d = detail::dual_lanes_t<dual<T, N>>::map([](auto const& x) ZENITH_FIXED_LAMBDA { return -x; },
                                              a.d);
  if constexpr (!dual<T, N>::packed) r.v = -a.v;
  return r;
}

// In each operator below the lanes are computed first and the value is set over them. Where
// one vector operation already gives a packed dual's value in its last lane (a sum, a product
// with a constant) the value is not set again.

template <class A, class B>
requires dual_operands<A, B> ZENITH_FIXED_INLINE auto operator+(A const& a, B const& b) {
  using D = promote_t<A, B>;
  D r;
  if constexpr (std::is_same_v<A, B>) {
    if (detail::known_constant(a) && detail::known_constant(b)) return D(a.value() + b.value());
    r.d = detail::dual_lanes_t<D>::map(
        [](auto const& x, auto const& y) ZENITH_FIXED_LAMBDA { return x + y; }, a.d, b.d);
    if constexpr (!D::packed) r.v = a.v + b.v;
  } else if constexpr (std::is_same_v<A, D>) {
    r.d = a.d;
    r.set_value(a.value() + detail::constant_as<D>(b));
  } else {
    r.d = b.d;
    r.set_value(detail::constant_as<D>(a) + b.value());
  }
  return r;
}

template <class A, class B>
requires dual_operands<A, B> ZENITH_FIXED_INLINE auto operator-(A const& a, B const& b) {
  using D = promote_t<A, B>;
  D r;
  if constexpr (std::is_same_v<A, B>) {
    if (detail::known_constant(a) && detail::known_constant(b)) return D(a.value() - b.value());
    r.d = detail::dual_lanes_t<D>::map(
        [](auto const& x, auto const& y) ZENITH_FIXED_LAMBDA { return x - y; }, a.d, b.d);
    if constexpr (!D::packed) r.v = a.v - b.v;
  } else if constexpr (std::is_same_v<A, D>) {
    r.d = a.d;
    r.set_value(a.value() - detail::constant_as<D>(b));
  } else {
    r.d = detail::dual_lanes_t<D>::map([](auto const& y) ZENITH_FIXED_LAMBDA { return -y; }, b.d);
    r.set_value(detail::constant_as<D>(a) - b.value());
  }
  return r;
}

template <class A, class B>
requires dual_operands<A, B> ZENITH_FIXED_INLINE auto operator*(A const& a, B const& b) {
  using D = promote_t<A, B>;
  using L = detail::dual_lanes_t<D>;
  D r;
  if constexpr (std::is_same_v<A, B>) {
    auto const& av = a.value();
    auto const& bv = b.value();
    // A factor the compiler sees is a constant scales the other (see detail::known_constant).
    bool const ca = detail::known_constant(a), cb = detail::known_constant(b);
    if (ca && cb) return D(av * bv);
    if (cb) return a * bv;
    if (ca) return av * b;
    if constexpr (D::packed) {
      // a.v * b (all lanes: the value lane is the product), then b.v * a' on the tangent lanes
      auto const p = L::map([&](auto const& y) ZENITH_FIXED_LAMBDA { return av * y; }, b.d);
      r.d = L::template map_masked<false>(
          p, [&](auto const& t, auto const& x) ZENITH_FIXED_LAMBDA { return t + bv * x; }, p, a.d);
    } else {
      r.v = av * bv;
      r.d =
          L::map([&](auto const& x, auto const& y) ZENITH_FIXED_LAMBDA { return bv * x + av * y; },
                 a.d, b.d);
    }
  } else if constexpr (std::is_same_v<A, D>) {
    auto const c = detail::constant_as<D>(b);
    r.d = L::map([&](auto const& x) ZENITH_FIXED_LAMBDA { return x * c; }, a.d);
    if constexpr (!D::packed) r.v = a.v * c;
  } else {
    auto const c = detail::constant_as<D>(a);
    r.d = L::map([&](auto const& y) ZENITH_FIXED_LAMBDA { return c * y; }, b.d);
    if constexpr (!D::packed) r.v = c * b.v;
  }
  return r;
}

template <class A, class B>
requires dual_operands<A, B> ZENITH_FIXED_INLINE auto operator/(A const& a, B const& b) {
  using D = promote_t<A, B>;
  using T = typename D::value_type;
  using L = detail::dual_lanes_t<D>;
  D r;
  if constexpr (std::is_same_v<A, B>) {
    bool const ca = detail::known_constant(a), cb = detail::known_constant(b);
    if (ca && cb) return D(a.value() / b.value());
    if (cb) return a / b.value();
    if (ca) return a.value() / b;
    // (a / b)' = (a' - (a / b) b') / b
    T const y = a.value() / b.value();
    T const inv = T(1) / b.value();
    T const q = -(y * inv);
    r.d = L::map([&](auto const& x, auto const& z) ZENITH_FIXED_LAMBDA { return x * inv + q * z; },
                 a.d, b.d);
    r.set_value(y);
  } else if constexpr (std::is_same_v<A, D>) {
    auto const c = detail::constant_as<D>(b);
    using C = std::remove_const_t<decltype(c)>;
    C const inv = C(1) / c;
    r.d = L::map([&](auto const& x) ZENITH_FIXED_LAMBDA { return x * inv; }, a.d);
    r.set_value(a.value() / c);  // divided, not times 1 / c
  } else {
    // (c / b)' = -(c / b) b' / b
    T const y = detail::constant_as<D>(a) / b.value();
    T const q = -(y / b.value());
    r.d = L::map([&](auto const& z) ZENITH_FIXED_LAMBDA { return q * z; }, b.d);
    r.set_value(y);
  }
  return r;
}

// ---- matmul ----

// Value and tangent together, one row of the output at a time: each term a(i, k) b(k, j) is one
// FMA over all lanes of one factor scaled by the other's value (the value lane gets the product
// of the values), plus, where both are duals, one masked FMA for the other factor's tangent.
// The P accumulators of a row and the row of a stay in registers; a row of the output depends
// only on the same row of a. The entry-by-entry dual product manages none of this (350 -> 300
// ns for the 7-joint forward kinematics Jacobian, bench/fk_jacobian, with separate values; the
// packed lanes took it further, see bench/RESULTS.md). Each output's terms are added in the
// order k = 0, 1, ... Entries flagged constant give no tangent term and entries flagged zero no
// term at all (the flags are compile-time constants here, see fixed_matmul in fixed_eval.hpp:
// 282 -> 260 ns there). Every accumulator starts at +0, so skipping a term whose product is
// +-0 changes nothing for finite values; an inf or NaN times a flagged zero gives no NaN.
// Testing tangents for zero at run time instead was measured and lost: the test per entry costs
// more than the vector operations it saves.
template <class T, std::size_t N>
template <std::size_t M, std::size_t K, std::size_t P>
requires std::is_floating_point_v<T> ZENITH_FIXED_INLINE void dual<T, N>::matmul_kernel(
    dual* out, dual const* a, dual const* b, std::uint8_t const* flags_a,
    std::uint8_t const* flags_b) {
  static_assert(packed);
  using L = detail::lanes<T, lane_count>;
  auto flag_a = [&](std::size_t i)
                    ZENITH_FIXED_LAMBDA { return flags_a ? flags_a[i] : std::uint8_t(0); };
  auto flag_b = [&](std::size_t i)
                    ZENITH_FIXED_LAMBDA { return flags_b ? flags_b[i] : std::uint8_t(0); };
  detail::static_for<M>([&](auto i) ZENITH_FIXED_LAMBDA {
    lane_array acc[P] = {};
    detail::static_for<K>([&](auto k) ZENITH_FIXED_LAMBDA {
      dual const& x = a[i * K + k];
      std::uint8_t const fx = flag_a(i * K + k);
      detail::static_for<P>([&](auto j) ZENITH_FIXED_LAMBDA {
        dual const& y = b[k * P + j];
        std::uint8_t const fy = flag_b(k * P + j);
        if ((fx | fy) & detail::zero_flag) return;
        bool const x_constant = fx & detail::constant_flag;
        bool const y_constant = fy & detail::constant_flag;
        T const xv = x.value(), yv = y.value();
        auto& t = acc[j];
        if (x_constant && y_constant) {  // no tangent: the value lane only
          t = L::template map_masked<true>(
              t, [&](auto const& u) ZENITH_FIXED_LAMBDA { return u + xv * yv; }, t);
          return;
        }
        // One factor's lanes whole, scaled by the other's value (the value lane gets xv * yv),
        // then, where both are duals, the other's tangent lanes.
        dual const& whole = y_constant ? x : y;
        T const scale = y_constant ? yv : xv;
        t = L::map([&](auto const& u, auto const& w) ZENITH_FIXED_LAMBDA { return u + scale * w; },
                   t, whole.d);
        if (!x_constant && !y_constant)
          t = L::template map_masked<false>(
              t, [&](auto const& u, auto const& z) ZENITH_FIXED_LAMBDA { return u + yv * z; }, t,
              x.d);
      });
    });
    detail::static_for<P>([&](auto j) ZENITH_FIXED_LAMBDA { out[i * P + j].d = acc[j]; });
  });
}

// ---- comparisons: on values ----

template <class A, class B>
requires dual_operands<A, B> ZENITH_FIXED_INLINE constexpr bool operator==(A const& a, B const& b) {
  return detail::primal(a) == detail::primal(b);
}
template <class A, class B>
requires dual_operands<A, B> ZENITH_FIXED_INLINE constexpr auto operator<=>(A const& a,
                                                                            B const& b) {
  return detail::primal(a) <=> detail::primal(b);
}

// ---- math: value and derivative from the op tags ----

#define ZENITH_DUAL_UNARY(NAME, OP)                          \
  template <class T, std::size_t N>                          \
  ZENITH_FIXED_INLINE dual<T, N> NAME(dual<T, N> const& x) { \
    return detail::dual_unary<ops::OP>(x);                   \
  }
// The value with no derivative at any level (a nested dual's inner tangents are dropped too).
template <class T, std::size_t N>
ZENITH_FIXED_INLINE dual<T, N> stop_gradient(dual<T, N> const& x) {
  if constexpr (is_dual_v<T>)
    return dual<T, N>(stop_gradient(x.v));
  else
    return dual<T, N>(x.value());
}
ZENITH_DUAL_UNARY(abs, abs)
ZENITH_DUAL_UNARY(sign, sign)
ZENITH_DUAL_UNARY(exp, exp)
ZENITH_DUAL_UNARY(log, log)
ZENITH_DUAL_UNARY(log1p, log1p)
ZENITH_DUAL_UNARY(expm1, expm1)
ZENITH_DUAL_UNARY(sqrt, sqrt)
ZENITH_DUAL_UNARY(rsqrt, rsqrt)
ZENITH_DUAL_UNARY(square, square)
ZENITH_DUAL_UNARY(sin, sin)
ZENITH_DUAL_UNARY(cos, cos)
ZENITH_DUAL_UNARY(tan, tan)
ZENITH_DUAL_UNARY(tanh, tanh)
ZENITH_DUAL_UNARY(sigmoid, sigmoid)
ZENITH_DUAL_UNARY(relu, relu)
ZENITH_DUAL_UNARY(gelu, gelu_tanh)
ZENITH_DUAL_UNARY(gelu_tanh, gelu_tanh)
ZENITH_DUAL_UNARY(gelu_erf, gelu_erf)
ZENITH_DUAL_UNARY(erf, erf)
ZENITH_DUAL_UNARY(floor, floor)
ZENITH_DUAL_UNARY(ceil, ceil)
ZENITH_DUAL_UNARY(round, round)
ZENITH_DUAL_UNARY(reciprocal, reciprocal)
#undef ZENITH_DUAL_UNARY

#define ZENITH_DUAL_BINARY(NAME, OP)                                                   \
  template <class A, class B>                                                          \
  requires dual_operands<A, B> ZENITH_FIXED_INLINE auto NAME(A const& a, B const& b) { \
    return detail::dual_binary<ops::OP, promote_t<A, B>>(a, b);                        \
  }
ZENITH_DUAL_BINARY(pow, pow)
ZENITH_DUAL_BINARY(atan2, atan2)
ZENITH_DUAL_BINARY(maximum, maximum)
ZENITH_DUAL_BINARY(minimum, minimum)
#undef ZENITH_DUAL_BINARY

// The value of a dual (of a dual of duals: the innermost value); a plain number as it is.
template <class X>
constexpr auto value_of(X const& x) {
  if constexpr (is_dual_v<X>)
    return value_of(x.value());
  else
    return x;
}

template <class T, std::size_t N>
std::ostream& operator<<(std::ostream& os, dual<T, N> const& x) {
  os << x.value() << " + [";
  for (std::size_t k = 0; k < N; ++k) os << (k ? ", " : "") << x.d[k];
  return os << "]e";
}

// The hook the fixed-size elementwise nodes (expr/fixed_ops.hpp) call for a math function whose
// operands include a dual (they apply + - * / and comparisons through the operators above).
template <class Op, class... X>
requires(is_dual_v<X> || ...) ZENITH_FIXED_INLINE auto number_op(Op, X const&... x) {
  if constexpr (sizeof...(X) == 1)
    return detail::dual_unary<Op>(x...);
  else if constexpr (sizeof...(X) == 2)
    return [](auto const& a, auto const& b) ZENITH_FIXED_LAMBDA {
      return detail::dual_binary<
          Op, promote_t<std::remove_cvref_t<decltype(a)>, std::remove_cvref_t<decltype(b)>>>(a, b);
    }(x...);
  else
    static_assert(sizeof...(X) <= 2, "zenith: this op has no dual-number rule");
}

}  // namespace zenith
