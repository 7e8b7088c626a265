// Fixed-size forward mode: zenith::dual, scalar math, tensors of duals, jacfwd and hessian.
// Derivatives are checked against central finite differences of the plain-double function and
// against analytic values written out here; the forward-kinematics Jacobian against the
// hand-written geometric Jacobian z_i x (p - o_i).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include "fixed_size_references.hpp"

namespace zn = zenith;
using namespace fixed_size_references;

namespace {

using D1 = zn::dual<double, 1>;
using D2 = zn::dual<double, 2>;

// One unary function under test: its zenith scalar form on double and on a dual.
struct unary_case {
  char const* name;
  std::function<double(double)> plain;
  std::function<D1(D1)> on_dual;
  std::vector<double> points;
};

#define UNARY_CASE(NAME, ...)                                                                      \
  unary_case {                                                                                     \
#NAME, [](double x) { return zn::NAME(x); }, [](D1 x) { return zn::NAME(x); }, { __VA_ARGS__ } \
  }

}  // namespace

TEST_CASE("scalar math on plain numbers matches the standard library", "[jacfwd][scalar]") {
  CHECK(zn::sin(0.5) == std::sin(0.5));
  CHECK(zn::cos(0.5f) == std::cos(0.5f));
  static_assert(std::is_same_v<decltype(zn::sin(0.5f)), float>);
  static_assert(std::is_same_v<decltype(zn::exp(1.0)), double>);
  static_assert(std::is_same_v<decltype(zn::sqrt(4)), double>);  // as std::sqrt(int)
  static_assert(std::is_same_v<decltype(zn::abs(-3)), int>);
  CHECK(zn::sqrt(4) == 2.0);
  CHECK(zn::abs(-3) == 3);
  CHECK(zn::exp(1.0) == std::exp(1.0));
  CHECK(zn::log(2.0f) == std::log(2.0f));
  CHECK(zn::tan(0.3) == std::tan(0.3));
  CHECK(zn::tanh(0.3) == std::tanh(0.3));
  CHECK(zn::atan2(1.0, -2.0) == std::atan2(1.0, -2.0));
  CHECK(zn::pow(2.0, 0.5) == std::pow(2.0, 0.5));
  CHECK(zn::pow(2, 3) == 8.0);
  CHECK(zn::maximum(1, 2.5) == 2.5);
  CHECK(zn::minimum(-1.0f, 2.0f) == -1.0f);
  CHECK(zn::square(3.0) == 9.0);
  CHECK(zn::abs(-0.0) == 0.0);
  CHECK_FALSE(std::signbit(zn::abs(-0.0)));
  CHECK(zn::round(2.5) == 2.0);  // half to even, as the array op
  CHECK(zn::sign(-4.0) == -1.0);
  CHECK(zn::sin(zn::bfloat16(0.5f)) == std::sin(float(zn::bfloat16(0.5f))));
}

TEST_CASE("dual unary math agrees with central differences", "[jacfwd][dual]") {
  std::vector<unary_case> cases = {
      UNARY_CASE(sin, -2.0, -0.3, 0.7, 3.0),
      UNARY_CASE(cos, -2.0, -0.3, 0.7, 3.0),
      UNARY_CASE(tan, -1.2, 0.1, 0.9),
      UNARY_CASE(exp, -3.0, 0.0, 1.5),
      UNARY_CASE(log, 0.1, 1.0, 7.5),
      UNARY_CASE(log1p, -0.5, 0.0, 3.0),
      UNARY_CASE(expm1, -2.0, 1e-3, 1.0),
      UNARY_CASE(sqrt, 0.05, 1.0, 9.0),
      UNARY_CASE(rsqrt, 0.05, 1.0, 9.0),
      UNARY_CASE(square, -1.5, 0.25, 2.0),
      UNARY_CASE(tanh, -2.0, 0.1, 1.0),
      UNARY_CASE(sigmoid, -3.0, 0.0, 2.0),
      UNARY_CASE(erf, -1.0, 0.2, 1.7),
      UNARY_CASE(gelu, -2.0, 0.3, 1.5),
      UNARY_CASE(gelu_erf, -2.0, 0.3, 1.5),
      UNARY_CASE(reciprocal, -2.0, 0.3, 4.0),
      UNARY_CASE(abs, -2.0, 0.3),
      UNARY_CASE(relu, -2.0, 0.3),
  };
  for (auto const& c : cases) {
    for (double x : c.points) {
      INFO(c.name << " at " << x);
      D1 const y = c.on_dual(D1::variable(x, 0));
      CHECK(y.value() == c.plain(x));
      CHECK(rel_err(y.tangent(0), central(c.plain, x)) <= 1e-6);
      // The tangent scales linearly with the seed.
      D1 const y3 = c.on_dual(D1(x, {3.0}));
      CHECK(rel_err(y3.tangent(0), 3.0 * y.tangent(0)) <= 1e-15);
    }
  }
}

TEST_CASE("dual derivatives against analytic values", "[jacfwd][dual]") {
  double const x = 0.7;
  D1 const v = D1::variable(x, 0);
  CHECK(zn::sin(v).tangent(0) == Approx(std::cos(x)).epsilon(1e-15));
  CHECK(zn::cos(v).tangent(0) == Approx(-std::sin(x)).epsilon(1e-15));
  CHECK(zn::exp(v).tangent(0) == Approx(std::exp(x)).epsilon(1e-15));
  CHECK(zn::log(v).tangent(0) == Approx(1 / x).epsilon(1e-15));
  CHECK(zn::sqrt(v).tangent(0) == Approx(0.5 / std::sqrt(x)).epsilon(1e-15));
  CHECK(zn::tanh(v).tangent(0) == Approx(1 - std::tanh(x) * std::tanh(x)).epsilon(1e-15));
  CHECK(zn::tan(v).tangent(0) == Approx(1 / (std::cos(x) * std::cos(x))).epsilon(1e-14));
  // Piecewise constant ops have a zero derivative (as in JAX).
  CHECK(zn::floor(v).tangent(0) == 0.0);
  CHECK(zn::floor(v).value() == 0.0);
  CHECK(zn::round(D1::variable(2.5, 0)).value() == 2.0);
  CHECK(zn::sign(v).tangent(0) == 0.0);
  CHECK(zn::ceil(v).value() == 1.0);
}

TEST_CASE("sin and cos of duals: one inline sincos, within a few ulps of libm", "[jacfwd][dual]") {
  // Duals of float and double take sin and cos together from zenith's inline sincos (no libm
  // call in fixed-size derivative code), so each is the other's derivative exactly.
  auto close = [](double got, double want) {
    return std::abs(got - want) <= 4e-16 * std::max(1.0, std::abs(want));
  };
  std::vector<double> xs = {0.0,
                            1e-300,
                            1e-8,
                            0.3,
                            0.7853981633974483,
                            1.0,
                            1.5707963267948966,
                            2.5,
                            3.141592653589793,
                            10.0,
                            62.0,
                            100.0,
                            1e4,
                            8e5,
                            2e6,
                            1e20};
  for (double v = -7.0; v <= 7.0; v += 0.0137) xs.push_back(v);
  for (double base : std::vector<double>(xs)) xs.push_back(-base);
  for (double x : xs) {
    CAPTURE(x);
    D1 const v = D1::variable(x, 0);
    D1 const s = zn::sin(v), c = zn::cos(v);
    CHECK(close(s.value(), std::sin(x)));
    CHECK(close(c.value(), std::cos(x)));
    CHECK(s.tangent(0) == c.value());
    CHECK(c.tangent(0) == -s.value());
  }
  CHECK(std::signbit(zn::sin(D1(-0.0)).value()));
  double const inf = std::numeric_limits<double>::infinity();
  for (double bad : {inf, -inf, std::numeric_limits<double>::quiet_NaN()}) {
    CHECK(std::isnan(zn::sin(D1::variable(bad, 0)).value()));
    CHECK(std::isnan(zn::cos(D1::variable(bad, 0)).tangent(0)));
  }
  // Float duals: computed in double, rounded once.
  using DF = zn::dual<float, 1>;
  for (float x : {0.1f, -2.0f, 3.0f, 100.0f}) {
    CHECK(zn::sin(DF::variable(x, 0)).value() == Approx(std::sin(x)).epsilon(1e-7));
    CHECK(zn::cos(DF::variable(x, 0)).tangent(0) == Approx(-std::sin(x)).epsilon(1e-7));
  }
}

TEST_CASE("the inline sincos is within two ulps of long double sin and cos", "[jacfwd][dual]") {
  // Random arguments over the range the straight-line reduction covers (|x| <= 2^20 pi / 2),
  // and arguments next to multiples of pi / 2, where the reduction cancels most bits. Measured
  // over 4e6 arguments per range: at most 1.5 ulps (libm's: 0.52).
  auto ulps = [](double got, long double want) {
    double const w = static_cast<double>(want);
    double const ulp = std::nextafter(std::abs(w), INFINITY) - std::abs(w);
    return static_cast<double>(std::abs(static_cast<long double>(got) - want)) / ulp;
  };
  std::vector<double> xs;
  std::uint64_t state = 12345;
  auto uniform = [&]() {  // in [0, 1): a 64-bit LCG's top 53 bits
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) * 0x1p-53;
  };
  for (double range : {1e-6, 0.8, 1.6, 4.0, 100.0, 1e4, 1.6e6})
    for (int i = 0; i < 4000; ++i) xs.push_back((2 * uniform() - 1) * range);
  for (long k : {1L, 2L, 3L, 4L, 7L, 100L, 1000L, 12345L, 1000000L})
    for (double d : {-2.0, -1.0, 0.0, 1.0, 2.0}) {
      double const m = static_cast<double>(k) * 1.5707963267948966;
      xs.push_back(m + d * (std::nextafter(m, INFINITY) - m));
    }
  double worst = 0;
  for (double x : xs) {
    CAPTURE(x);
    auto const [s, c] = zn::detail::scalar_sincos(x);
    long double const lx = x;
    double const es = ulps(s, std::sin(lx)), ec = ulps(c, std::cos(lx));
    CHECK(es <= 2.0);
    CHECK(ec <= 2.0);
    worst = std::max({worst, es, ec});
  }
  CHECK(worst > 0.0);  // not libm itself: the check can fail
}

TEST_CASE("dual binary operations agree with central differences in each argument",
          "[jacfwd][dual]") {
  using fn = std::function<D2(D2, D2)>;
  using pfn = std::function<double(double, double)>;
  struct binary_case {
    char const* name;
    pfn plain;
    fn on_dual;
    double a, b;
  };
  std::vector<binary_case> cases = {
      {"+", [](double a, double b) { return a + b; }, [](D2 a, D2 b) { return a + b; }, 0.3, -1.2},
      {"-", [](double a, double b) { return a - b; }, [](D2 a, D2 b) { return a - b; }, 0.3, -1.2},
      {"*", [](double a, double b) { return a * b; }, [](D2 a, D2 b) { return a * b; }, 0.3, -1.2},
      {"/", [](double a, double b) { return a / b; }, [](D2 a, D2 b) { return a / b; }, 0.3, -1.2},
      {"pow", [](double a, double b) { return zn::pow(a, b); },
       [](D2 a, D2 b) { return zn::pow(a, b); }, 1.7, 0.6},
      {"atan2", [](double a, double b) { return zn::atan2(a, b); },
       [](D2 a, D2 b) { return zn::atan2(a, b); }, 0.4, -0.9},
      {"maximum", [](double a, double b) { return zn::maximum(a, b); },
       [](D2 a, D2 b) { return zn::maximum(a, b); }, 0.4, -0.9},
      {"minimum", [](double a, double b) { return zn::minimum(a, b); },
       [](D2 a, D2 b) { return zn::minimum(a, b); }, 0.4, -0.9},
      {"compound", [](double a, double b) { return a * a / (b - 3.0) + 2.0 * b - a / 4.0 + 1.0; },
       [](D2 a, D2 b) {
         D2 r = a;
         r *= a;
         r /= b - 3.0;
         r += 2.0 * b;
         r -= a / 4.0;
         return r + 1.0;
       },
       0.8, 1.1},
  };
  for (auto const& c : cases) {
    INFO(c.name);
    D2 const r = c.on_dual(D2::variable(c.a, 0), D2::variable(c.b, 1));
    CHECK(r.value() == Approx(c.plain(c.a, c.b)).epsilon(1e-15));
    CHECK(rel_err(r.tangent(0), central([&](double a) { return c.plain(a, c.b); }, c.a)) <= 1e-6);
    CHECK(rel_err(r.tangent(1), central([&](double b) { return c.plain(c.a, b); }, c.b)) <= 1e-6);
  }
}

TEST_CASE("a dual of float or double keeps its value in the last lane", "[jacfwd][dual]") {
  using D7 = zn::dual<double, 7>;
  static_assert(sizeof(D7) == 64 && alignof(D7) == 64 && D7::lane_count == 8 && D7::packed);
  static_assert(zn::dual<double, 8>::lane_count == 12 && zn::dual<double, 1>::lane_count == 2);
  static_assert(zn::dual<float, 3>::lane_count == 4 && sizeof(zn::dual<float, 3>) == 16);
  static_assert(zn::dual<double, 3>::lane_count == 4 && zn::dual<double, 16>::lane_count == 20);
  static_assert(!zn::dual<D2, 2>::packed);  // a dual of duals keeps v apart
  D7 const x = D7::variable(1.5, 2);
  CHECK(x.value() == 1.5);
  CHECK(x.d[7] == 1.5);
  CHECK(x.tangent(2) == 1.0);
  CHECK(x.tangent(0) == 0.0);
  // The value lane is computed as the plain-double operation would, also for inf (a masked
  // operation, not a product with zero that would give NaN) and for division (divided, not
  // multiplied by the reciprocal).
  double const inf = std::numeric_limits<double>::infinity();
  D7 const big = D7::variable(inf, 0), y = D7::variable(-2.5, 1), t = D7::variable(0.1, 3);
  CHECK((big * y).value() == -inf);
  CHECK((y * big).value() == -inf);
  CHECK(std::isnan((big * y).tangent(0)));  // -2.5 * 1 + inf * 0, as the written-out rule gives
  CHECK((big * y).tangent(1) == inf);
  CHECK((t / 3.0).value() == 0.1 / 3.0);
  CHECK((t / y).value() == 0.1 / -2.5);
  CHECK((3.0 / t).value() == 3.0 / 0.1);
  CHECK((t + 0.2).value() == 0.1 + 0.2);
  CHECK((0.2 - t).value() == 0.2 - 0.1);
  CHECK((t - 0.2).value() == 0.1 - 0.2);
  CHECK((t * 0.3).value() == 0.1 * 0.3);
  CHECK((-t).value() == -0.1);
  CHECK((t * y).value() == 0.1 * -2.5);
  CHECK((t * y).tangent(1) == 0.1);
  CHECK((t * y).tangent(3) == -2.5);
  // A NaN value stays in the value lane.
  D7 const p = t * y + big * 0.0;
  CHECK(std::isnan(p.value()));
  for (std::size_t k = 0; k < 7; ++k) CHECK(std::isfinite(p.tangent(k)));
  CHECK(p.tangent(1) == 0.1);
}

TEST_CASE("constants mixed with duals stay constants", "[jacfwd][dual]") {
  D2 const a = D2::variable(1.5, 0);
  D2 const b = D2::variable(-0.5, 1);
  // Results are duals; the constant contributes no tangent.
  static_assert(std::is_same_v<decltype(a * 2.0), D2>);
  static_assert(std::is_same_v<decltype(3 + a), D2>);
  static_assert(std::is_same_v<decltype(zn::pow(a, 2.0)), D2>);
  D2 const s = a * 2.0;
  CHECK(s.value() == 3.0);
  CHECK(s.tangent(0) == 2.0);
  CHECK(s.tangent(1) == 0.0);
  D2 const z = a + 0.0;  // adds one number
  CHECK(z.value() == 1.5);
  CHECK(z.tangent(0) == 1.0);
  D2 const q = 1.0 / b;
  CHECK(q.value() == -2.0);
  CHECK(q.tangent(1) == Approx(-4.0));  // -1 / b^2
  D2 const m = 5 - a;
  CHECK(m.value() == 3.5);
  CHECK(m.tangent(0) == -1.0);
  // A constant with an infinite value scales only its own lanes; a zero-tangent lane stays 0.
  D2 const big = a * 1e308 * 10.0;
  CHECK(std::isinf(big.value()));
  CHECK(big.tangent(1) == 0.0);
  // pow with a constant exponent: d/da a^3 = 3 a^2.
  CHECK(zn::pow(a, 3.0).tangent(0) == Approx(3 * 1.5 * 1.5));
  CHECK(zn::pow(2.0, b).tangent(1) == Approx(std::pow(2.0, -0.5) * std::log(2.0)));
  // float duals take double constants as float.
  zn::dual<float, 1> f = zn::dual<float, 1>::variable(2.0f, 0);
  static_assert(std::is_same_v<decltype(f * 0.5), zn::dual<float, 1>>);
  CHECK((f * 0.5).tangent(0) == 0.5f);
  CHECK(zn::sin(f).tangent(0) == Approx(std::cos(2.0f)).epsilon(1e-6));
}

TEST_CASE("dual comparisons compare values", "[jacfwd][dual]") {
  D2 const a = D2::variable(1.0, 0);
  D2 const b(1.0, {0.0, 5.0});
  CHECK(a == b);  // same value, different tangents
  CHECK_FALSE(a != b);
  CHECK(a < 2.0);
  CHECK(0.5 < a);
  CHECK(a >= 1);
  CHECK(D2(3.0) > a);
  CHECK(zn::value_of(a) == 1.0);
  std::ostringstream os;
  os << D2(1.5, {2.0, -1.0});
  CHECK(os.str() == "1.5 + [2, -1]e");
}

TEST_CASE("nested duals give second derivatives", "[jacfwd][dual][hessian]") {
  using In = zn::dual<double, 1>;
  using Out = zn::dual<In, 1>;
  double const x0 = 0.6;
  Out x(In::variable(x0, 0));
  x.d[0] = In(1.0);
  // f = sin(x) * exp(x) / x + x^3
  Out const f = zn::sin(x) * zn::exp(x) / x + zn::pow(x, 3.0);
  auto plain = [](double x) { return std::sin(x) * std::exp(x) / x + x * x * x; };
  auto d1 = [](double x) {
    return (std::cos(x) * std::exp(x) + std::sin(x) * std::exp(x)) / x -
           std::sin(x) * std::exp(x) / (x * x) + 3 * x * x;
  };
  CHECK(f.v.value() == Approx(plain(x0)).epsilon(1e-15));
  CHECK(f.v.d[0] == Approx(d1(x0)).epsilon(1e-14));
  CHECK(f.d[0].value() == Approx(d1(x0)).epsilon(1e-14));
  CHECK(rel_err(f.d[0].d[0], central(d1, x0)) <= 1e-6);
  // Analytic: g = sin(x) e^x, g' = e^x (sin + cos), g'' = 2 e^x cos; f = g / x + x^3,
  // f'' = g'' / x - 2 g' / x^2 + 2 g / x^3 + 6 x.
  double const e = std::exp(x0), s = std::sin(x0), c = std::cos(x0);
  double const f2 =
      2 * e * c / x0 - 2 * e * (s + c) / (x0 * x0) + 2 * s * e / (x0 * x0 * x0) + 6 * x0;
  CHECK(f.d[0].d[0] == Approx(f2).epsilon(1e-13));
  // Constants at both levels.
  Out const g = 2.0 * x * In(3.0) + 1;
  CHECK(g.v.value() == Approx(6 * x0 + 1));
  CHECK(g.d[0].value() == Approx(6.0));
  CHECK(g.d[0].d[0] == 0.0);
  // The derivative of sqrt and tan (rules written with 0.5 / y and 1 + y * y) nest too.
  Out const h = zn::sqrt(x) + zn::tan(x);
  double const t = std::tan(x0);
  CHECK(h.d[0].d[0] == Approx(-0.25 * std::pow(x0, -1.5) + 2 * t * (1 + t * t)).epsilon(1e-13));
}

TEST_CASE("tensors of duals: construction, access, arithmetic, matmul", "[jacfwd][tensor]") {
  using D = zn::dual<double, 7>;
  D const x = D::variable(0.3, 0), y = D::variable(-1.1, 6);
  double const a = 0.25;
  D const c = zn::cos(x), s = zn::sin(x);
  zn::tensor<D, 4, 4> t{c, -s, 0, a, s, c, 0.0, 0, 0, 0, 1, y, 0, 0, 0, 1};
  CHECK(t(0, 0).value() == std::cos(0.3));
  CHECK(t(0, 1).tangent(0) == -std::cos(0.3));
  CHECK(t(2, 3).tangent(6) == 1.0);
  CHECK(t(0, 3).value() == a);
  CHECK(t(0, 3).tangent(0) == 0.0);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(t(1, 1))>, D>);

  zn::tensor<double, 4, 4> m{1, 2, 0, 0, 0, 1, 3, 0, 0, 0, 1, 4, 0, 0, 0, 1};
  // Mixed tensor<double> and tensor<dual>: the doubles stay doubles in the expression.
  auto e = m * t;
  using E = decltype(e);
  static_assert(std::is_same_v<zn::value_t<E>, D>);
  static_assert(
      std::is_same_v<std::tuple_element_t<0, decltype(E::children)>, zn::tensor<double, 4, 4>>);
  zn::tensor<D, 4, 4> const r = m * t + t / 2.0 - 1.0 + zn::sin(t) * x;
  for (std::size_t i = 0; i < 16; ++i) {
    D const want = m[i] * t[i] + t[i] / 2.0 - 1.0 + zn::sin(t[i]) * x;
    CHECK(r[i].value() == Approx(want.value()).epsilon(1e-15));
    for (std::size_t k = 0; k < 7; ++k)
      CHECK(r[i].tangent(k) == Approx(want.tangent(k)).epsilon(1e-15).margin(1e-300));
  }
  zn::tensor<D, 4, 4> neg = -t;
  CHECK(neg(0, 1).tangent(0) == std::cos(0.3));

  // matmul of duals and of double x dual, against a written-out loop.
  zn::tensor<D, 4, 4> const p = zn::matmul(t, t);
  zn::tensor<D, 4, 4> const pm = zn::matmul(m, t);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      D want = 0.0, want_m = 0.0;
      for (std::size_t k = 0; k < 4; ++k) {
        want = want + t(i, k) * t(k, j);
        want_m = want_m + m(i, k) * t(k, j);
      }
      CHECK(p(i, j).value() == Approx(want.value()));
      CHECK(pm(i, j).value() == Approx(want_m.value()));
      for (std::size_t k = 0; k < 7; ++k) {
        CHECK(p(i, j).tangent(k) == Approx(want.tangent(k)).margin(1e-15));
        CHECK(pm(i, j).tangent(k) == Approx(want_m.tangent(k)).margin(1e-15));
      }
    }
  // Non-square and 1-D operands, in double and float (other lane counts), against the loop.
  auto check_shapes = []<class F>(F) {
    using DF = zn::dual<F, 3>;
    auto num = [](int i, int k) {
      DF r = DF::variable(F(0.1) * F(i) - F(0.7), std::size_t(k % 3));
      r.tangent((k + 1) % 3) = F(0.5) * F(i % 4) - F(1);
      return r;
    };
    zn::tensor<DF, 2, 3> a;
    zn::tensor<DF, 3, 5> b;
    zn::tensor<DF, 3> u;
    for (int i = 0; i < 6; ++i) a[i] = num(i, i);
    for (int i = 0; i < 15; ++i) b[i] = num(i + 3, 2 * i);
    for (int i = 0; i < 3; ++i) u[i] = num(5 - i, i + 1);
    zn::tensor<DF, 2, 5> const ab = zn::matmul(a, b);
    zn::tensor<DF, 5> const ub = zn::matmul(u, b);
    zn::tensor<DF, 2> const au = zn::matmul(a, u);
    auto near = [](DF const& got, DF const& want) {
      bool ok = got.value() == Approx(want.value()).epsilon(1e-5).margin(1e-6);
      for (std::size_t k = 0; k < 3; ++k)
        ok = ok && got.tangent(k) == Approx(want.tangent(k)).epsilon(1e-5).margin(1e-6);
      return ok;
    };
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 5; ++j) {
        DF want = F(0), want_u = F(0);
        for (std::size_t k = 0; k < 3; ++k) want = want + a(i, k) * b(k, j);
        CHECK(near(ab(i, j), want));
        if (i == 0) {
          for (std::size_t k = 0; k < 3; ++k) want_u = want_u + u(k) * b(k, j);
          CHECK(near(ub(j), want_u));
        }
      }
    for (std::size_t i = 0; i < 2; ++i) {
      DF want = F(0);
      for (std::size_t k = 0; k < 3; ++k) want = want + a(i, k) * u(k);
      CHECK(near(au(i), want));
    }
  };
  check_shapes(double{});
  check_shapes(float{});

  // Reductions and vector ops.
  zn::tensor<D, 3> v{x, y, 2.0};
  D const n = zn::norm(v);
  double const nv = std::sqrt(0.09 + 1.21 + 4.0);
  CHECK(n.value() == Approx(nv));
  CHECK(n.tangent(0) == Approx(0.3 / nv));
  CHECK(n.tangent(6) == Approx(-1.1 / nv));
  D const sm = zn::sum(v * 2.0);
  CHECK(sm.tangent(0) == 2.0);
  D const mn = zn::mean(v);
  CHECK(mn.tangent(6) == Approx(1.0 / 3.0));
  zn::tensor<double, 3> w{0.0, 0.0, 1.0};
  zn::tensor<D, 3> cr = zn::cross(w, v);  // (-v1, v0, 0)
  CHECK(cr(0).tangent(6) == -1.0);
  CHECK(cr(1).tangent(0) == 1.0);
  D const dt = zn::dot(v, v);
  CHECK(dt.tangent(0) == Approx(0.6));
  zn::tensor<D, 2, 2> tr = zn::transpose(zn::tensor<D, 2, 2>{x, y, 0, 1});
  CHECK(tr(0, 1).tangent(0) == 0.0);
  CHECK(tr(1, 0).tangent(6) == 1.0);
  // A dual scalar times a tensor of doubles.
  zn::tensor<D, 2> sv = x * zn::tensor<double, 2>{2.0, 3.0};
  CHECK(sv(1).tangent(0) == 3.0);
}

TEST_CASE("tensors of duals remember their constant entries, and matmul skips their terms",
          "[jacfwd][tensor]") {
  using D = zn::dual<double, 7>;
  using zn::detail::constant_flag, zn::detail::zero_flag;
  D const x = D::variable(0.3, 0), y = D::variable(-1.1, 6);
  D const c = zn::cos(x), s = zn::sin(x);
  double const a = 0.25;
  zn::tensor<D, 4, 4> const t{c, -s, 0.0, a, s, c, 0.0, 0, 0, 0, 1, y, 0, 0, 0, 1};
  // Plain-number initialisers are constants (by type, whatever the optimiser sees); a zero flag,
  // where the compiler saw a literal zero, only ever marks a constant that is zero.
  bool const constant[16] = {0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1};
  for (std::size_t i = 0; i < 16; ++i) {
    CAPTURE(i);
    CHECK(bool(t.entry_flags(i) & constant_flag) == constant[i]);
    if (t.entry_flags(i) & zero_flag) {
      CHECK(constant[i]);
      CHECK(t[i].value() == 0.0);
    }
  }
  static_assert(sizeof(zn::tensor<double, 3>) == 3 * sizeof(double));  // no flags for doubles
  static_assert(zn::tensor<D, 4, 4>::tracks_entry_flags &&
                !zn::tensor<D, 9, 9>::tracks_entry_flags);

  auto all_flags = [](auto const& u, std::uint8_t f) {
    for (std::size_t i = 0; i < u.size(); ++i)
      if (u.entry_flags(i) != f) return false;
    return true;
  };
  zn::tensor<D, 4, 4> copy = t;
  CHECK(copy.entry_flags(2) == t.entry_flags(2));
  // Any mutable access may write an entry, so it forgets the flags.
  auto forgets = [&](auto&& touch) {
    zn::tensor<D, 4, 4> u = t;
    touch(u);
    return all_flags(u, 0);
  };
  CHECK(forgets([](auto& u) { u(0, 2) = D::variable(1.0, 3); }));
  CHECK(forgets([](auto& u) { (void)u[3]; }));
  CHECK(forgets([](auto& u) { (void)u.data(); }));
  CHECK(forgets([](auto& u) { (void)u.begin(); }));
  CHECK(forgets([](auto& u) { (void)u.values(); }));
  // Value-initialised: zero constants. Filled with a dual: nothing known. From doubles: constants.
  CHECK(all_flags(zn::tensor<D, 2, 2>{}, constant_flag | zero_flag));
  CHECK(all_flags(zn::tensor<D, 2, 2>::full(x), 0));
  zn::tensor<D, 2, 2> from_doubles = zn::tensor<double, 2, 2>{1, 2, 3, 4};
  CHECK(all_flags(from_doubles, constant_flag));
  zn::tensor<D, 2, 2> from_duals = zn::tensor<D, 2, 2>{x, y, 1.0, 2.0} * 2.0;
  CHECK(all_flags(from_duals, 0));

  // The flags of a product: constant where every term is zero or constant x constant.
  std::uint8_t const k = constant_flag, z = constant_flag | zero_flag;
  std::uint8_t const fa[4] = {k, 0, z, k};  // a = [[const, dual], [zero, const]]
  std::uint8_t const fb[4] = {z, k, k, z};  // b = [[zero, const], [const, zero]]
  auto const fp = zn::detail::product_flags<2, 2, 2>(fa, fb);
  CHECK(fp[0] == 0);  // 0 * zero + dual * const
  CHECK(fp[1] == k);  // const * const + dual * zero
  CHECK(fp[2] == k);  // zero * zero + const * const
  CHECK(fp[3] == z);  // zero * const + const * zero

  // The kernel with flags gives bitwise the dense kernel's result on finite values.
  zn::tensor<D, 4, 4> const b{s,   c,   0.0,  1.5,  //
                              0.0, y,   -1.0, 0.5,  //
                              -c,  s,   0.0,  2.0,  //
                              0.0, 0.0, 0.0,  1.0};
  std::uint8_t const fl_b[16] = {0, 0, z, k, z, 0, k, k, 0, 0, z, k, z, z, z, k};
  std::uint8_t fl_t[16];
  for (std::size_t i = 0; i < 16; ++i) {
    fl_t[i] = constant[i] ? (t[i].value() == 0.0 ? z : k) : 0;
    CHECK((b.entry_flags(i) & constant_flag) == (fl_b[i] & constant_flag));
  }
  auto same = [](D const& p, D const& q) {
    bool ok = std::bit_cast<std::uint64_t>(p.value()) == std::bit_cast<std::uint64_t>(q.value());
    for (std::size_t i = 0; i < 7; ++i)
      ok = ok &&
           std::bit_cast<std::uint64_t>(p.tangent(i)) == std::bit_cast<std::uint64_t>(q.tangent(i));
    return ok;
  };
  std::array<D, 16> dense, flagged;
  D::matmul_kernel<4, 4, 4>(dense.data(), t.data(), b.data(), nullptr, nullptr);
  D::matmul_kernel<4, 4, 4>(flagged.data(), t.data(), b.data(), fl_t, fl_b);
  for (std::size_t i = 0; i < 16; ++i) {
    CAPTURE(i);
    CHECK(same(flagged[i], dense[i]));
    D want = 0.0;  // and both against the written-out product
    for (std::size_t kk = 0; kk < 4; ++kk) want = want + t[i / 4 * 4 + kk] * b[kk * 4 + i % 4];
    CHECK(dense[i].value() == Approx(want.value()).margin(1e-15));
    for (std::size_t l = 0; l < 7; ++l)
      CHECK(dense[i].tangent(l) == Approx(want.tangent(l)).margin(1e-15));
  }
  // A product with a flagged zero is skipped: an inf there gives no NaN (a hand-written sparse
  // product's behaviour), where the dense product gives NaN.
  zn::tensor<D, 4, 4> with_inf = t;
  with_inf(0, 3) = std::numeric_limits<double>::infinity();  // times b(3, 0) = 0, flagged zero
  D::matmul_kernel<4, 4, 4>(dense.data(), with_inf.data(), b.data(), nullptr, nullptr);
  D::matmul_kernel<4, 4, 4>(flagged.data(), with_inf.data(), b.data(), nullptr, fl_b);
  CHECK(std::isnan(dense[0].value()));
  CHECK(flagged[0].value() ==
        Approx(t(0, 0).value() * s.value() + t(0, 1).value() * 0.0 + t(0, 2).value() * -c.value()));
  CHECK(std::isinf(flagged[3].value()));  // times b(3, 3) = 1: not skipped

  // Through zn::matmul: the same values as the product of the unflagged copies.
  zn::tensor<D, 4, 4> const p = zn::matmul(zn::matmul(t, b), t);
  std::array<D, 16> tb, want;
  D::matmul_kernel<4, 4, 4>(tb.data(), t.data(), b.data(), nullptr, nullptr);
  D::matmul_kernel<4, 4, 4>(want.data(), tb.data(), t.data(), nullptr, nullptr);
  for (std::size_t i = 0; i < 16; ++i) CHECK(same(p[i], want[i]));
}

namespace {
// Values the optimiser cannot see (as a DH table read at run time is).
double opaque(double v) {
  static double volatile sink;
  sink = v;
  return sink;
}
}  // namespace

TEST_CASE("duals built from plain numbers are constants: T(0.0), T(a) as a Ceres user writes them",
          "[jacfwd][tensor]") {
  using D = zn::dual<double, 7>;
  using zn::detail::constant_flag, zn::detail::zero_flag;
  D const x = D::variable(opaque(0.3), 0);
  double const av = opaque(0.7), bv = opaque(-2.5);
  D const a = D(av), b = D(bv), zero = D(0.0), one = D(1.0);
  auto zero_tangent = [](D const& u) {
    for (std::size_t l = 0; l < 7; ++l)
      if (u.tangent(l) != 0.0) return false;
    return true;
  };
  // Ops on such constants give constants with the plain numbers' values; with a dual, the
  // constant's rule (a product scales): each checked against the plain-number arithmetic.
  D const r[] = {-a,         a * b,      a / b,         a + b,          a - b,
                 zn::sin(a), zn::exp(b), zn::pow(a, b), zn::atan2(a, b)};
  double const want[] = {-av,          av * bv,      av / bv,          av + bv,           av - bv,
                         std::sin(av), std::exp(bv), std::pow(av, bv), std::atan2(av, bv)};
  for (std::size_t i = 0; i < std::size(r); ++i) {
    CAPTURE(i);
    CHECK(r[i].value() == Approx(want[i]).epsilon(1e-15));
    CHECK(zero_tangent(r[i]));
  }
  D const xa = x * a, ax = a * x, xb = x / b, bx = b / x, px = zn::pow(x, a);
  CHECK(xa.value() == x.value() * av);
  CHECK(xa.tangent(0) == av);
  CHECK(ax.tangent(0) == av);
  CHECK(xb.tangent(0) == Approx(1.0 / bv));
  CHECK(bx.tangent(0) == Approx(-bv / (x.value() * x.value())));
  CHECK(px.tangent(0) == Approx(av * std::pow(x.value(), av - 1.0)));
  for (D const& u : {xa, ax, xb, bx})
    for (std::size_t l = 1; l < 7; ++l) CHECK(u.tangent(l) == 0.0);

  // A transform written with T(...) constants: whatever the flags the compiler could see, a set
  // flag is true, and the products equal the written-out ones.
  D const c = zn::cos(x), s = zn::sin(x);
  zn::tensor<D, 4, 4> const t{c,     -s,    zero, a,       //
                              s * a, c * a, -b,   -b * a,  //
                              s * b, c * b, a,    a * b,   //
                              zero,  zero,  zero, one};
  for (std::size_t i = 0; i < 16; ++i) {
    CAPTURE(i);
    if (t.entry_flags(i) & constant_flag) CHECK(zero_tangent(t[i]));
    if (t.entry_flags(i) & zero_flag) CHECK(t[i].value() == 0.0);
  }
#if defined(__OPTIMIZE__) && defined(__GNUC__) && !defined(__clang__)
  // GCC, optimizing, sees the literal constants (what makes the fixed-size matmul skip terms).
  CHECK(t.entry_flags(2) == (constant_flag | zero_flag));
  CHECK(t.entry_flags(15) == constant_flag);
#endif
  zn::tensor<D, 4, 4> const p = zn::matmul(zn::matmul(zn::tensor<D, 4, 4>::identity(), t), t);
  for (std::size_t i = 0; i < 16; ++i) {
    CAPTURE(i);
    D w = 0.0;
    for (std::size_t kk = 0; kk < 4; ++kk) w = w + t[i / 4 * 4 + kk] * t[kk * 4 + i % 4];
    CHECK(p[i].value() == Approx(w.value()).margin(1e-15));
    for (std::size_t l = 0; l < 7; ++l)
      CHECK(p[i].tangent(l) == Approx(w.tangent(l)).margin(1e-15));
  }
}

TEST_CASE("jacfwd of a vector function: analytic and finite differences", "[jacfwd]") {
  zn::tensor<double, 3> const q{0.4, -0.3, 1.2};
  zn::tensor<double, 2, 3> const jac = zn::jacfwd(f32{})(q);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(zn::jacfwd(f32{})(q))>,
                               zn::tensor<double, 2, 3>>);
  auto const want = f32_jacobian(q);
  auto const fd = central_jacobian(f32{}, q);
  for (std::size_t k = 0; k < 6; ++k) {
    CHECK(jac[k] == Approx(want[k]).epsilon(1e-14));
    CHECK(rel_err(jac[k], fd[k]) <= 1e-6);
  }
}

TEST_CASE("jacfwd: tensor-shaped inputs and outputs, expressions, scalars", "[jacfwd]") {
  // A 2x2 matrix input, a 2x2 output (A A^T + sin(A)): result tensor<double, 2, 2, 2, 2>.
  auto g = [](auto const& a) { return zn::matmul(a, zn::transpose(a)) + zn::sin(a); };
  zn::tensor<double, 2, 2> const a{0.3, -0.7, 1.1, 0.2};
  auto const jac = zn::jacfwd(g)(a);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(jac)>, zn::tensor<double, 2, 2, 2, 2>>);
  auto const fd =
      central_jacobian([&](auto const& x) { return zn::tensor<double, 2, 2>(g(x)); }, a);
  for (std::size_t k = 0; k < 16; ++k) CHECK(rel_err(jac[k], fd[k]) <= 1e-6);
  // d(A A^T)_{ij} / dA_{kl} = delta_ik A_jl + delta_jk A_il; d sin(A)_{ij} / dA_{ij} = cos.
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t k = 0; k < 2; ++k)
        for (std::size_t l = 0; l < 2; ++l) {
          double want = (i == k ? a(j, l) : 0.0) + (j == k ? a(i, l) : 0.0);
          if (i == k && j == l) want += std::cos(a(i, j));
          CHECK(jac(i, j, k, l) == Approx(want).epsilon(1e-14).margin(1e-15));
        }

  // A scalar output (a rank-0 reduction, a bare dual): tensor<double, In...>, the gradient.
  zn::tensor<double, 3> const q{0.5, -1.0, 2.0};
  auto energy = [](auto const& x) { return zn::sum(x * x) * 0.5 + x(0) * x(1); };
  zn::tensor<double, 3> const gr = zn::jacfwd(energy)(q);
  CHECK(gr(0) == Approx(0.5 - 1.0));
  CHECK(gr(1) == Approx(-1.0 + 0.5));
  CHECK(gr(2) == Approx(2.0));
  auto bare = [](auto const& x) { return x(2) * x(2); };
  zn::tensor<double, 3> const gb = zn::jacfwd(bare)(q);
  CHECK(gb(0) == 0.0);
  CHECK(gb(2) == 4.0);
  // An output that does not depend on the input: zero, not an error.
  auto constant = [](auto const&) { return zn::tensor<double, 2>{1.0, 2.0}; };
  zn::tensor<double, 2, 3> const gc = zn::jacfwd(constant)(q);
  for (double v : gc) CHECK(v == 0.0);
  // Extra arguments pass through.
  auto scaled = [](auto const& x, double k) { return x * k; };
  zn::tensor<double, 3, 3> const gs = zn::jacfwd(scaled)(q, 2.5);
  CHECK(gs(1, 1) == 2.5);
  CHECK(gs(0, 1) == 0.0);
  // float in, float out.
  zn::tensor<float, 2> const qf{1.0f, 2.0f};
  auto const jf = zn::jacfwd([](auto const& x) { return x * x; })(qf);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(jf)>, zn::tensor<float, 2, 2>>);
  CHECK(jf(1, 1) == 4.0f);
}

TEST_CASE("hessian: forward over forward, analytic and finite differences", "[jacfwd][hessian]") {
  // f(x) = x0^2 x1 + sin(x1 x2) + exp(x0) / x2
  auto f = [](auto const& x) {
    return x(0) * x(0) * x(1) + zn::sin(x(1) * x(2)) + zn::exp(x(0)) / x(2);
  };
  zn::tensor<double, 3> const x{0.7, -0.4, 1.3};
  zn::tensor<double, 3, 3> const h = zn::hessian(f)(x);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(h)>, zn::tensor<double, 3, 3>>);
  double const a = x(0), b = x(1), c = x(2);
  double const s = std::sin(b * c), co = std::cos(b * c), e = std::exp(a);
  double const want[9] = {2 * b + e / c, 2 * a,          -e / (c * c),
                          2 * a,         -c * c * s,     co - b * c * s,
                          -e / (c * c),  co - b * c * s, -b * b * s + 2 * e / (c * c * c)};
  for (std::size_t k = 0; k < 9; ++k) CHECK(h[k] == Approx(want[k]).epsilon(1e-13).margin(1e-15));
  // Finite differences of the (forward-mode) gradient.
  auto grad = [&](zn::tensor<double, 3> const& p) { return zn::jacfwd(f)(p); };
  auto const fd = central_jacobian(grad, x);
  for (std::size_t k = 0; k < 9; ++k) CHECK(rel_err(h[k], fd[k]) <= 1e-6);
  // Symmetric.
  CHECK(h(0, 2) == h(2, 0));

  // A vector-valued function: tensor<double, Out..., In..., In...>.
  auto v = [](auto const& p) {
    using T = typename std::remove_cvref_t<decltype(p)>::value_type;
    return zn::tensor<T, 2>{p(0) * p(1), zn::square(p(0))};
  };
  zn::tensor<double, 2> const p{1.5, -2.0};
  auto const hv = zn::hessian(v)(p);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(hv)>, zn::tensor<double, 2, 2, 2>>);
  CHECK(hv(0, 0, 1) == 1.0);
  CHECK(hv(0, 1, 0) == 1.0);
  CHECK(hv(0, 0, 0) == 0.0);
  CHECK(hv(1, 0, 0) == 2.0);
  CHECK(hv(1, 1, 1) == 0.0);
}

TEST_CASE("where and cast on derivative numbers: jacfwd, jacrev, grad, hessian",
          "[jacfwd][where]") {
  // A piecewise function (a branch per element, and a branch on one element), and casts: to the
  // numbers' own type the derivative flows, to an integer it is zero.
  auto f = [](auto const& x) {
    using N = std::remove_cvref_t<decltype(x(0))>;
    zn::tensor<N, 3> y = zn::where(x > 0.0, x * x * x, zn::sin(x)) + zn::cast<double>(x) * 0.5 +
                         zn::cast<double>(zn::cast<int>(x * 10.0));
    return zn::tensor<N, 4>{y(0), y(1), y(2), zn::where(x(0) > x(2), x(1) * x(2), 2.0)};
  };
  auto plain = [&](zn::tensor<double, 3> const& p) { return zn::tensor<double, 4>(f(p)); };
  for (zn::tensor<double, 3> const q :
       {zn::tensor<double, 3>{0.43, -0.37, 1.26}, zn::tensor<double, 3>{-0.83, 0.64, -1.17}}) {
    // Values: the branches as plain code.
    auto const y = plain(q);
    for (std::size_t i = 0; i < 3; ++i) {
      double x = q[i];
      double want = (x > 0 ? x * x * x : std::sin(x)) + x * 0.5 + double(int(x * 10.0));
      CHECK(y[i] == Approx(want).epsilon(1e-15));
    }
    CHECK(y[3] == (q[0] > q[2] ? q[1] * q[2] : 2.0));
    // Derivatives: forward and reverse mode against central differences (away from the kinks
    // and the integer steps).
    auto const fd = central_jacobian(plain, q);
    zn::tensor<double, 4, 3> const jf = zn::jacfwd(f)(q);
    zn::tensor<double, 4, 3> const jr = zn::jacrev(f)(q);
    for (std::size_t k = 0; k < 12; ++k) {
      CHECK(rel_err(jf[k], fd[k]) <= 1e-6);
      CHECK(jr[k] == Approx(jf[k]).epsilon(1e-14).margin(1e-15));
    }
    // grad of a scalar through where and cast, and the hessian (forward over forward).
    auto energy = [](auto const& x) {
      return zn::sum(zn::where(x < 0.0, -x, x * x) * zn::cast<double>(x));
    };
    zn::tensor<double, 3> const g = zn::grad(energy)(q);
    zn::tensor<double, 3, 3> const h = zn::hessian(energy)(q);
    for (std::size_t i = 0; i < 3; ++i) {
      double x = q[i];
      CHECK(g[i] == Approx(x < 0 ? -2 * x : 3 * x * x).epsilon(1e-14));
      for (std::size_t j = 0; j < 3; ++j)
        CHECK(h(i, j) == Approx(i != j ? 0.0 : x < 0 ? -2.0 : 6 * x).epsilon(1e-14).margin(1e-15));
    }
  }
}

namespace {

// A 7-joint arm with a Franka-Panda-like modified-DH table (as examples/forward_kinematics.cpp):
// joint i's transform is RotX(alpha_{i-1}) TransX(a_{i-1}) RotZ(q_i) TransZ(d_i).
struct dh_row {
  double a, d, alpha;
};
constexpr double half_pi = 1.5707963267948966;
constexpr std::array<dh_row, 7> panda{{{0.0, 0.333, 0.0},
                                       {0.0, 0.0, -half_pi},
                                       {0.0, 0.316, half_pi},
                                       {0.0825, 0.0, half_pi},
                                       {-0.0825, 0.384, -half_pi},
                                       {0.0, 0.0, half_pi},
                                       {0.088, 0.0, half_pi}}};
constexpr double flange = 0.107;

template <class T>
zn::tensor<T, 4, 4> joint_transform(T const& q, dh_row const& p) {
  T const c = zn::cos(q), s = zn::sin(q);
  double const ca = std::cos(p.alpha), sa = std::sin(p.alpha);
  return {c,      -s,     0.0, p.a,      s * ca, c * ca, -sa, -p.d * sa,
          s * sa, c * sa, ca,  p.d * ca, 0.0,    0.0,    0.0, 1.0};
}

struct fk_position_fn {
  template <class Q>
  auto operator()(Q const& q) const {
    using T = typename Q::value_type;
    zn::tensor<T, 4, 4> m = zn::tensor<double, 4, 4>::identity();
    for (std::size_t i = 0; i < 7; ++i) m = zn::matmul(m, joint_transform(q(i), panda[i]));
    zn::tensor<double, 4, 4> tool = zn::tensor<double, 4, 4>::identity();
    tool(2, 3) = flange;
    m = zn::matmul(m, tool);
    return zn::tensor<T, 3>{m(0, 3), m(1, 3), m(2, 3)};
  }
};

// The geometric Jacobian, in plain double: column i = z_i x (p - o_i).
zn::tensor<double, 3, 7> geometric_jacobian(zn::tensor<double, 7> const& q) {
  zn::tensor<double, 4, 4> m = zn::tensor<double, 4, 4>::identity();
  std::array<zn::tensor<double, 3>, 7> z, o;
  for (std::size_t i = 0; i < 7; ++i) {
    m = zn::matmul(m, joint_transform(q(i), panda[i]));
    z[i] = zn::tensor<double, 3>{m(0, 2), m(1, 2), m(2, 2)};
    o[i] = zn::tensor<double, 3>{m(0, 3), m(1, 3), m(2, 3)};
  }
  zn::tensor<double, 3> const p = fk_position_fn{}(q);
  zn::tensor<double, 3, 7> jac;
  for (std::size_t i = 0; i < 7; ++i) {
    zn::tensor<double, 3> const col = zn::cross(z[i], p - o[i]);
    for (std::size_t r = 0; r < 3; ++r) jac(r, i) = col(r);
  }
  return jac;
}

}  // namespace

TEST_CASE("jacfwd of forward kinematics equals the geometric Jacobian", "[jacfwd][robotics]") {
  for (int trial = 0; trial < 5; ++trial) {
    zn::tensor<double, 7> q;
    for (std::size_t i = 0; i < 7; ++i) q(i) = std::sin(1.3 * double(trial) + 0.7 * double(i));
    zn::tensor<double, 3, 7> const jac = zn::jacfwd(fk_position_fn{})(q);
    zn::tensor<double, 3, 7> const geo = geometric_jacobian(q);
    auto const fd = central_jacobian(fk_position_fn{}, q);
    for (std::size_t k = 0; k < 21; ++k) {
      INFO("trial " << trial << " entry " << k);
      CHECK(jac[k] == Approx(geo[k]).epsilon(1e-12).margin(1e-14));
      CHECK(rel_err(jac[k], fd[k]) <= 1e-6);
    }
  }
}

namespace {

// The same arm as a Ceres user writes it: every constant a number of type T (T(0.0), T(a)),
// the angles' cos and sin taken on T, the chain from a tensor<T, 4, 4> identity.
template <class T>
zn::tensor<T, 4, 4> textbook_transform(T const& q, dh_row const& p) {
  using std::cos, std::sin;
  T const ct = cos(q), st = sin(q);
  T const ca = T(cos(p.alpha)), sa = T(sin(p.alpha)), a = T(p.a), d = T(p.d);
  return {ct,      -st,     T(0.0), a,      st * ca, ct * ca, -sa,    -sa * d,
          st * sa, ct * sa, ca,     ca * d, T(0.0),  T(0.0),  T(0.0), T(1.0)};
}

struct fk_textbook_fn {
  template <class Q>
  auto operator()(Q const& q) const {
    using T = typename Q::value_type;
    auto m = zn::tensor<T, 4, 4>::identity();
    for (std::size_t i = 0; i < 7; ++i) m = zn::matmul(m, textbook_transform(q(i), panda[i]));
    m = zn::matmul(m, textbook_transform(T(0.0), dh_row{0.0, flange, 0.0}));
    return zn::tensor<T, 3>{m(0, 3), m(1, 3), m(2, 3)};
  }
};

}  // namespace

TEST_CASE("jacfwd of forward kinematics written with T(...) constants and a T identity",
          "[jacfwd][robotics]") {
  // identity() of duals: the diagonal is flagged constant, not zero (a zero flag drops terms).
  using D = zn::dual<double, 2>;
  auto const id = zn::tensor<D, 2, 2>::identity();
  CHECK(id.entry_flags(0) == zn::detail::constant_flag);
  CHECK(id.entry_flags(1) == (zn::detail::constant_flag | zn::detail::zero_flag));
  zn::tensor<D, 2, 2> const x{D::variable(2.0, 0), D::variable(3.0, 1), D(4.0), D(5.0)};
  zn::tensor<D, 2, 2> const y = zn::matmul(id, x);
  for (std::size_t k = 0; k < 4; ++k) {
    CHECK(y[k].value() == x[k].value());
    CHECK(y[k].tangent(0) == x[k].tangent(0));
    CHECK(y[k].tangent(1) == x[k].tangent(1));
  }
  for (int trial = 0; trial < 5; ++trial) {
    zn::tensor<double, 7> q;
    for (std::size_t i = 0; i < 7; ++i) q(i) = std::sin(1.7 * double(trial) + 0.4 * double(i));
    zn::tensor<double, 3, 7> const jac = zn::jacfwd(fk_textbook_fn{})(q);
    zn::tensor<double, 3, 7> const geo = geometric_jacobian(q);
    for (std::size_t k = 0; k < 21; ++k) {
      INFO("trial " << trial << " entry " << k);
      CHECK(jac[k] == Approx(geo[k]).epsilon(1e-12).margin(1e-14));
    }
  }
}
