// Fixed-size reverse mode: zenith::rvar, tensors of rvars, jacrev and tensor_value_and_grad.
// Derivatives are checked against central finite differences of the plain-double function,
// against jacfwd (forward mode, an independent implementation) and against analytic values;
// the tape's behaviour (what records a node, reuse of its memory, cleanup after exceptions) is
// checked by reading the tape itself.
#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>
#include <zenith/transforms/jacrev.hpp>
#include <zenith/zenith.hpp>

#include "fixed_size_references.hpp"

namespace zn = zenith;
using namespace fixed_size_references;

namespace {

using R = zn::rvar<double>;

zn::detail::reverse_tape<double>& tape() { return zn::detail::rtape<double>(); }

// d f / dx by reverse mode through the public entry (tensor_value_and_grad of a 1-vector);
// also returns the value.
std::pair<double, double> reverse_derivative(std::function<R(R)> const& f, double x) {
  auto [v, g] = zn::detail::tensor_value_and_grad([&](auto const& q) { return f(q(0)); },
                                                  zn::argnums<0>, zn::tensor<double, 1>{x});
  return {double(v), g(0)};
}

struct unary_case {
  char const* name;
  std::function<double(double)> plain;
  std::function<R(R)> on_rvar;
  std::vector<double> points;
};

#define UNARY_CASE(NAME, ...)                                                                     \
  unary_case {                                                                                    \
#NAME, [](double x) { return zn::NAME(x); }, [](R x) { return zn::NAME(x); }, { __VA_ARGS__ } \
  }

}  // namespace

TEST_CASE("rvar unary math agrees with central differences", "[jacrev][rvar]") {
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
      UNARY_CASE(gelu_tanh, -2.0, 0.3, 1.5),
      UNARY_CASE(gelu_erf, -2.0, 0.3, 1.5),
      UNARY_CASE(reciprocal, -2.0, 0.3, 4.0),
      UNARY_CASE(abs, -2.0, 0.3),
      UNARY_CASE(relu, -2.0, 0.3),
      // Piecewise constant: derivative zero away from the jumps, as the differences say.
      UNARY_CASE(floor, -1.5, 0.3, 2.7),
      UNARY_CASE(ceil, -1.5, 0.3, 2.7),
      UNARY_CASE(round, -1.3, 0.3, 2.7),
      UNARY_CASE(sign, -1.5, 0.3),
  };
  for (auto const& c : cases) {
    for (double x : c.points) {
      INFO(c.name << " at " << x);
      auto const [v, d] = reverse_derivative(c.on_rvar, x);
      CHECK(v == c.plain(x));
      CHECK(rel_err(d, central(c.plain, x)) <= 1e-6);
      // A composition: the chain rule through the tape.
      auto const [v2, d2] =
          reverse_derivative([&](R t) { return c.on_rvar(t * 0.5 + 0.25) * t; }, 2.0 * (x - 0.25));
      auto plain2 = [&](double t) { return c.plain(t * 0.5 + 0.25) * t; };
      CHECK(v2 == Approx(plain2(2.0 * (x - 0.25))).epsilon(1e-15));
      CHECK(rel_err(d2, central(plain2, 2.0 * (x - 0.25))) <= 1e-6);
    }
  }
  // stop_gradient: the value, no derivative.
  auto const [v, d] = reverse_derivative([](R x) { return zn::stop_gradient(x) * x; }, 3.0);
  CHECK(v == 9.0);
  CHECK(d == 3.0);
}

TEST_CASE("rvar derivatives against analytic values", "[jacrev][rvar]") {
  double const x = 0.7;
  auto d = [&](std::function<R(R)> const& f) { return reverse_derivative(f, x).second; };
  CHECK(d([](R t) { return zn::sin(t); }) == Approx(std::cos(x)).epsilon(1e-15));
  CHECK(d([](R t) { return zn::cos(t); }) == Approx(-std::sin(x)).epsilon(1e-15));
  CHECK(d([](R t) { return zn::exp(t); }) == Approx(std::exp(x)).epsilon(1e-15));
  CHECK(d([](R t) { return zn::log(t); }) == Approx(1 / x).epsilon(1e-15));
  CHECK(d([](R t) { return zn::sqrt(t); }) == Approx(0.5 / std::sqrt(x)).epsilon(1e-15));
  CHECK(d([](R t) { return zn::tanh(t); }) ==
        Approx(1 - std::tanh(x) * std::tanh(x)).epsilon(1e-15));
  CHECK(d([](R t) { return t * t * t; }) == Approx(3 * x * x).epsilon(1e-15));
  CHECK(d([](R t) { return 1.0 / t; }) == Approx(-1 / (x * x)).epsilon(1e-15));
  CHECK(d([](R t) { return t / t; }) == Approx(0.0).margin(1e-15));
  CHECK(d([](R t) { return -t + t - t; }) == -1.0);
}

TEST_CASE("rvar binary operations agree with central differences in each argument",
          "[jacrev][rvar]") {
  using pfn = std::function<double(double, double)>;
  using rfn = std::function<R(R, R)>;
  struct binary_case {
    char const* name;
    pfn plain;
    rfn on_rvar;
    double a, b;
  };
  std::vector<binary_case> cases = {
      {"+", [](double a, double b) { return a + b; }, [](R a, R b) { return a + b; }, 0.3, -1.2},
      {"-", [](double a, double b) { return a - b; }, [](R a, R b) { return a - b; }, 0.3, -1.2},
      {"*", [](double a, double b) { return a * b; }, [](R a, R b) { return a * b; }, 0.3, -1.2},
      {"/", [](double a, double b) { return a / b; }, [](R a, R b) { return a / b; }, 0.3, -1.2},
      {"pow", [](double a, double b) { return zn::pow(a, b); },
       [](R a, R b) { return zn::pow(a, b); }, 1.7, 0.6},
      {"atan2", [](double a, double b) { return zn::atan2(a, b); },
       [](R a, R b) { return zn::atan2(a, b); }, 0.4, -0.9},
      {"maximum", [](double a, double b) { return zn::maximum(a, b); },
       [](R a, R b) { return zn::maximum(a, b); }, 0.4, -0.9},
      {"minimum", [](double a, double b) { return zn::minimum(a, b); },
       [](R a, R b) { return zn::minimum(a, b); }, 0.4, -0.9},
      // Each operator with a constant on either side, and compound assignment.
      {"constants",
       [](double a, double b) {
         return (a + 2.0) * (3.0 - b) + 1.5 / a - b / 4.0 + (2.0 + a) * (b - 1.0) * 0.5 +
                zn::pow(a, 3.0) + zn::pow(2.0, b) + zn::atan2(a, 0.5) + zn::atan2(-0.5, b);
       },
       [](R a, R b) {
         return (a + 2.0) * (3.0 - b) + 1.5 / a - b / 4.0 + (2.0 + a) * (b - 1.0) * 0.5 +
                zn::pow(a, 3.0) + zn::pow(2.0, b) + zn::atan2(a, 0.5) + zn::atan2(-0.5, b);
       },
       0.8, 1.1},
      {"compound", [](double a, double b) { return a * a / (b - 3.0) + 2.0 * b - a / 4.0 + 1.0; },
       [](R a, R b) {
         R r = a;
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
    auto const [v, g] =
        zn::detail::tensor_value_and_grad([&](auto const& q) { return c.on_rvar(q(0), q(1)); },
                                          zn::argnums<0>, zn::tensor<double, 2>{c.a, c.b});
    CHECK(double(v) == Approx(c.plain(c.a, c.b)).epsilon(1e-15));
    CHECK(rel_err(g(0), central([&](double a) { return c.plain(a, c.b); }, c.a)) <= 1e-6);
    CHECK(rel_err(g(1), central([&](double b) { return c.plain(c.a, b); }, c.b)) <= 1e-6);
  }
  // Ties in maximum / minimum share the derivative evenly (as the op tags say).
  auto const [v, g] = zn::detail::tensor_value_and_grad(
      [](auto const& q) { return zn::maximum(q(0), q(1)) + zn::minimum(q(0), q(1)) * 3.0; },
      zn::argnums<0>, zn::tensor<double, 2>{0.5, 0.5});
  CHECK(double(v) == 2.0);
  CHECK(g(0) == 2.0);
  CHECK(g(1) == 2.0);
}

TEST_CASE("rvar comparisons compare values; printing", "[jacrev][rvar]") {
  zn::detail::rtape_scope<double> scope(tape());
  R const a = R::variable(1.0);
  R const b = R::variable(1.0);
  CHECK(a == b);
  CHECK_FALSE(a != b);
  CHECK(a < 2.0);
  CHECK(0.5 < a);
  CHECK(a >= 1);
  CHECK(R(3.0) > a);
  CHECK(zn::value_of(a) == 1.0);
  std::ostringstream os;
  os << R(1.5);
  CHECK(os.str() == "1.5");
  static_assert(std::is_same_v<zn::promote_t<R, double>, R>);
  static_assert(std::is_same_v<zn::promote_t<int, R>, R>);
  static_assert(zn::user_number<R> && zn::number_depth<R> == 1);
  static_assert(sizeof(R) == 16);
}

TEST_CASE("constants record no tape nodes", "[jacrev][rvar][tape]") {
  auto& t = tape();
  zn::detail::rtape_scope<double> scope(t);
  std::size_t const start = t.size();
  R const x = R::variable(1.5);
  R const y = R::variable(-0.5);
  REQUIRE(t.size() == start + 2);  // two leaves
  auto recorded = [&](auto&& op) {
    std::size_t const n0 = t.size();
    op();
    return t.size() - n0;
  };
  // One node, one parent (the node names itself as its second parent, with partial 0).
  R r;
  CHECK(recorded([&] { r = x * 2.0; }) == 1);
  CHECK(r.value() == 3.0);
  CHECK(t.back().a == x.node());
  CHECK(t.back().pa == 2.0);
  CHECK(t.back().b == r.node());
  CHECK(t.back().pb == 0.0);
  CHECK(recorded([&] { r = 3 * x; }) == 1);
  CHECK(recorded([&] { r = x / 4.0; }) == 1);
  CHECK(recorded([&] { r = 1.0 / x; }) == 1);
  CHECK(recorded([&] { r = 2.0 - x; }) == 1);
  CHECK(recorded([&] { r = -x; }) == 1);
  CHECK(recorded([&] { r = zn::sin(x); }) == 1);
  CHECK(recorded([&] { r = zn::pow(x, 2.0); }) == 1);
  CHECK(recorded([&] { r = zn::atan2(0.5, x); }) == 1);
  CHECK(t.back().a == x.node());
  // No node: the result shares x's node (derivative 1) or is a constant (derivative 0).
  CHECK(recorded([&] { r = x + 0.0; }) == 0);
  CHECK(r.node() == x.node());
  CHECK(r.value() == 1.5);
  CHECK(recorded([&] { r = x - 1.0; }) == 0);
  CHECK(r.node() == x.node());
  CHECK(recorded([&] { r = 1.0 + x; }) == 0);
  CHECK(r.node() == x.node());
  CHECK(recorded([&] { r = x * 1.0; }) == 0);
  CHECK(r.node() == x.node());
  CHECK(recorded([&] { r = x / 1.0; }) == 0);
  CHECK(r.node() == x.node());
  CHECK(recorded([&] { r = x * 0.0; }) == 0);
  CHECK(r.is_constant());
  CHECK(recorded([&] { r = 0.0 / x; }) == 0);
  CHECK(r.is_constant());
  // Two variables: one node, two parents.
  CHECK(recorded([&] { r = x * y; }) == 1);
  CHECK(t.back().a == x.node());
  CHECK(t.back().b == y.node());
  CHECK(t.back().pa == -0.5);
  CHECK(t.back().pb == 1.5);
  // rvars made from numbers are constants: nothing records, whatever the operation.
  R const c = 2.0, z = 0.0;
  CHECK(c.is_constant());
  CHECK(recorded([&] { r = zn::exp(c * c + c / c - zn::sin(c)) * z + zn::pow(c, c); }) == 0);
  CHECK(r.is_constant());
  CHECK(r.value() == Approx(4.0));
  // A variable with an rvar constant records as with a plain number.
  CHECK(recorded([&] { r = x * c; }) == 1);
  CHECK(recorded([&] { r = x + z; }) == 0);
  CHECK(r.node() == x.node());
  CHECK(recorded([&] { r = z * x; }) == 0);
  CHECK(r.is_constant());
  // Piecewise-constant ops give constants.
  CHECK(recorded([&] { r = zn::floor(x); }) == 0);
  CHECK(r.is_constant());
  CHECK(recorded([&] { r = zn::stop_gradient(x); }) == 0);
  CHECK(r.is_constant());
  // A transform matrix built from scalars and plain numbers: only cos, sin and -s record, and a
  // matmul with an identity of constants records nothing.
  zn::tensor<R, 4, 4> m, p;
  CHECK(recorded([&] {
          R const co = zn::cos(x), s = zn::sin(x);
          m = zn::tensor<R, 4, 4>{co, -s, 0, 0.25, s, co, 0.0, 0, 0, 0, 1, y, 0, 0, 0, 1};
          zn::tensor<R, 4, 4> const id = zn::tensor<double, 4, 4>::identity();
          p = zn::matmul(id, m);
        }) == 3);
  for (std::size_t k = 0; k < 16; ++k) {
    CHECK(p[k].value() == m[k].value());
    CHECK(p[k].node() == m[k].node());
  }
  CHECK(m(0, 2).is_constant());
  CHECK(m(2, 3).node() == y.node());
}

namespace {

// jacrev(f)(x, rest...) == jacfwd(f)(x, rest...): same type, values to tol.
template <class F, class X, class... Rest>
void check_rev_equals_fwd(F const& f, X const& x, double tol, Rest const&... rest) {
  auto const rev = zn::jacrev(f)(x, rest...);
  auto const fwd = zn::jacfwd(f)(x, rest...);
  static_assert(std::is_same_v<decltype(rev), decltype(fwd)>);
  for (std::size_t k = 0; k < rev.size(); ++k) {
    INFO("entry " << k << ": jacrev " << rev[k] << ", jacfwd " << fwd[k]);
    CHECK(std::abs(rev[k] - fwd[k]) <= tol * std::max(1.0, std::abs(fwd[k])));
  }
}

}  // namespace

TEST_CASE("jacrev of a vector function: analytic, finite differences, jacfwd", "[jacrev]") {
  zn::tensor<double, 3> const q{0.4, -0.3, 1.2};
  zn::tensor<double, 2, 3> const jac = zn::jacrev(f32{})(q);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(zn::jacrev(f32{})(q))>,
                               zn::tensor<double, 2, 3>>);
  auto const want = f32_jacobian(q);
  auto const fd = central_jacobian(f32{}, q);
  for (std::size_t k = 0; k < 6; ++k) {
    CHECK(jac[k] == Approx(want[k]).epsilon(1e-14));
    CHECK(rel_err(jac[k], fd[k]) <= 1e-6);
  }
  check_rev_equals_fwd(f32{}, q, 1e-14);
  CHECK(tape().empty());
}

TEST_CASE("jacrev: tensor shapes, tensor ops, scalars, extra arguments", "[jacrev]") {
  // A 2x2 matrix in and out, through matmul, transpose and elementwise math on tensors.
  auto g = [](auto const& a) { return zn::matmul(a, zn::transpose(a)) + zn::sin(a) * 2.0; };
  zn::tensor<double, 2, 2> const a{0.3, -0.7, 1.1, 0.2};
  auto const jac = zn::jacrev(g)(a);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(jac)>, zn::tensor<double, 2, 2, 2, 2>>);
  auto const fd =
      central_jacobian([&](auto const& x) { return zn::tensor<double, 2, 2>(g(x)); }, a);
  for (std::size_t k = 0; k < 16; ++k) CHECK(rel_err(jac[k], fd[k]) <= 1e-6);
  check_rev_equals_fwd(g, a, 1e-14);

  // Reductions, norm, cross, dot, mean, exp / tanh on tensors, a double tensor mixed in.
  auto h = [](auto const& x) {
    using T = typename std::remove_cvref_t<decltype(x)>::value_type;
    zn::tensor<double, 3> const w{0.5, -1.0, 2.0};
    zn::tensor<T, 3> const c = zn::cross(w, x);
    zn::tensor<T, 3> const e = zn::tanh(x * w) + zn::exp(x / 3.0) - 1.0;
    T const n = zn::norm(x);
    T const s = zn::sum(e * c);
    T const m = zn::mean(x * x);
    T const d = zn::dot(x, c + x);
    T const mx = zn::max(x);
    return zn::tensor<T, 5>{n, s, m, d, mx * n};
  };
  zn::tensor<double, 3> const x{0.4, -0.8, 1.3};
  check_rev_equals_fwd(h, x, 1e-13);
  auto const jh = zn::jacrev(h)(x);
  auto const fdh = central_jacobian(h, x);
  for (std::size_t k = 0; k < 15; ++k) CHECK(rel_err(jh[k], fdh[k]) <= 1e-6);

  // A scalar output (a rank-0 reduction, a bare rvar): tensor<double, In...>.
  zn::tensor<double, 3> const q{0.5, -1.0, 2.0};
  auto energy = [](auto const& x) { return zn::sum(x * x) * 0.5 + x(0) * x(1); };
  zn::tensor<double, 3> const gr = zn::jacrev(energy)(q);
  CHECK(gr(0) == Approx(0.5 - 1.0));
  CHECK(gr(1) == Approx(-1.0 + 0.5));
  CHECK(gr(2) == Approx(2.0));
  auto bare = [](auto const& x) { return x(2) * x(2); };
  zn::tensor<double, 3> const gb = zn::jacrev(bare)(q);
  CHECK(gb(0) == 0.0);
  CHECK(gb(2) == 4.0);
  // Outputs that are constants, inputs, or inputs plus constants (which share the input's node).
  auto mixed = [](auto const& x) {
    using T = typename std::remove_cvref_t<decltype(x)>::value_type;
    return zn::tensor<T, 4>{T(1.0), x(1), x(2) + 3.0, x(0) * 0.0};
  };
  zn::tensor<double, 4, 3> const gm = zn::jacrev(mixed)(q);
  zn::tensor<double, 4, 3> const want{0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
  for (std::size_t k = 0; k < 12; ++k) CHECK(gm[k] == want[k]);
  auto constant = [](auto const&) { return zn::tensor<double, 2>{1.0, 2.0}; };
  zn::tensor<double, 2, 3> const gc = zn::jacrev(constant)(q);
  for (double v : gc) CHECK(v == 0.0);
  // Extra arguments pass through.
  auto scaled = [](auto const& x, double k) { return x * k; };
  zn::tensor<double, 3, 3> const gs = zn::jacrev(scaled)(q, 2.5);
  CHECK(gs(1, 1) == 2.5);
  CHECK(gs(0, 1) == 0.0);
  check_rev_equals_fwd(scaled, q, 0.0, 2.5);
  // float in, float out.
  zn::tensor<float, 2> const qf{1.0f, 2.0f};
  auto const jf = zn::jacrev([](auto const& x) { return x * x + zn::sin(x); })(qf);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(jf)>, zn::tensor<float, 2, 2>>);
  CHECK(jf(1, 1) == Approx(4.0f + std::cos(2.0f)).epsilon(1e-6));
  CHECK(jf(0, 1) == 0.0f);
  CHECK(zn::detail::rtape<float>().empty());
}

TEST_CASE("jacrev: a node the output does not reach cannot poison it", "[jacrev]") {
  // d sqrt(x0) / dx0 is inf at 0; output 1 does not read it, so its row has no NaN.
  auto f = [](auto const& x) {
    using T = typename std::remove_cvref_t<decltype(x)>::value_type;
    return zn::tensor<T, 2>{zn::sqrt(x(0)), x(1) * 2.0 + x(0) * 0.5};
  };
  zn::tensor<double, 2, 2> const j = zn::jacrev(f)(zn::tensor<double, 2>{0.0, 1.0});
  CHECK(std::isinf(j(0, 0)));
  CHECK(j(1, 0) == 0.5);
  CHECK(j(1, 1) == 2.0);
}

namespace {

// The 7-joint arm of bench/fk_jacobian.cpp (a Franka-Panda-like modified-DH table): joint i's
// transform is RotX(alpha_{i-1}) TransX(a_{i-1}) RotZ(q_i) TransZ(d_i), cos / sin of alpha
// stored.
struct dh_row {
  double a, d, ca, sa;
};
constexpr std::array<dh_row, 7> panda{{
    {0.0, 0.333, 1.0, 0.0},
    {0.0, 0.0, 0.0, -1.0},
    {0.0, 0.316, 0.0, 1.0},
    {0.0825, 0.0, 0.0, 1.0},
    {-0.0825, 0.384, 0.0, -1.0},
    {0.0, 0.0, 0.0, 1.0},
    {0.088, 0.0, 0.0, 1.0},
}};
constexpr double flange_d = 0.107;

template <class T>
zn::tensor<T, 4, 4> joint_transform(T const& q, dh_row const& p) {
  T const c = zn::cos(q), s = zn::sin(q);
  return {c,        -s,       0.0,   p.a,          //
          s * p.ca, c * p.ca, -p.sa, -p.d * p.sa,  //
          s * p.sa, c * p.sa, p.ca,  p.d * p.ca,   //
          0.0,      0.0,      0.0,   1.0};
}

struct fk_position_fn {
  template <class Q>
  auto operator()(Q const& q) const {
    using T = typename Q::value_type;
    zn::tensor<T, 4, 4> m = joint_transform(q(0), panda[0]);
    for (std::size_t i = 1; i < 7; ++i) m = zn::matmul(m, joint_transform(q(i), panda[i]));
    return zn::tensor<T, 3>{m(0, 3) + flange_d * m(0, 2), m(1, 3) + flange_d * m(1, 2),
                            m(2, 3) + flange_d * m(2, 2)};
  }
};

}  // namespace

TEST_CASE("jacrev of forward kinematics equals jacfwd and finite differences",
          "[jacrev][robotics]") {
  for (int trial = 0; trial < 5; ++trial) {
    INFO("trial " << trial);
    zn::tensor<double, 7> q;
    for (std::size_t i = 0; i < 7; ++i) q(i) = std::sin(1.3 * double(trial) + 0.7 * double(i));
    check_rev_equals_fwd(fk_position_fn{}, q, 1e-12);
    zn::tensor<double, 3, 7> const jac = zn::jacrev(fk_position_fn{})(q);
    auto const fd = central_jacobian(fk_position_fn{}, q);
    for (std::size_t k = 0; k < 21; ++k) CHECK(rel_err(jac[k], fd[k]) <= 1e-6);
  }
  // The manipulability-like scalar sum(J J^T) of the position, by tensor_value_and_grad.
  zn::tensor<double, 7> const q{0.1, -0.4, 0.3, -1.2, 0.5, 1.1, -0.2};
  auto reach = [](auto const& q, zn::tensor<double, 3> const& target) {
    auto const p = fk_position_fn{}(q);
    return zn::sum(zn::square(p - target));
  };
  zn::tensor<double, 3> const target{0.3, 0.1, 0.5};
  auto const [v, g] = zn::detail::tensor_value_and_grad(reach, zn::argnums<0>, q, target);
  auto plain = [&](zn::tensor<double, 7> const& x) { return zn::tensor<double>(reach(x, target)); };
  CHECK(double(v) == Approx(double(plain(q))).epsilon(1e-15));
  auto const fd = central_jacobian(plain, q);
  zn::tensor<double, 7> const gf = zn::jacfwd(reach)(q, target);
  for (std::size_t k = 0; k < 7; ++k) {
    CHECK(rel_err(g[k], fd[k]) <= 1e-6);
    CHECK(g[k] == Approx(gf[k]).epsilon(1e-12).margin(1e-14));
  }
}

TEST_CASE("tensor_value_and_grad: one and several argnums against finite differences",
          "[jacrev][grad]") {
  // f(a, k, b) = sum(tanh(A b) * w) + k * a00 * b1 / (1 + b0^2); k is not differentiated.
  auto f = [](auto const& a, double k, auto const& b) {
    zn::tensor<double, 2> const w{0.7, -1.3};
    auto const ab = zn::matmul(a, b);
    return zn::sum(zn::tanh(ab) * w) + k * a(0, 0) * b(1) / (1.0 + b(0) * b(0));
  };
  zn::tensor<double, 2, 3> const a{0.3, -0.5, 0.8, 1.1, 0.2, -0.4};
  zn::tensor<double, 3> const b{0.6, -0.9, 0.25};
  double const k = 1.7;
  auto plain_a = [&](zn::tensor<double, 2, 3> const& x) { return zn::tensor<double>(f(x, k, b)); };
  auto plain_b = [&](zn::tensor<double, 3> const& x) { return zn::tensor<double>(f(a, k, x)); };
  auto const fda = central_jacobian(plain_a, a);
  auto const fdb = central_jacobian(plain_b, b);
  double const value = double(zn::tensor<double>(f(a, k, b)));

  auto const [v0, ga] = zn::detail::tensor_value_and_grad(f, zn::argnums<0>, a, k, b);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(v0)>, zn::tensor<double>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(ga)>, zn::tensor<double, 2, 3>>);
  CHECK(double(v0) == Approx(value).epsilon(1e-15));
  for (std::size_t i = 0; i < 6; ++i) CHECK(rel_err(ga[i], fda[i]) <= 1e-6);

  auto const [v2, gb] = zn::detail::tensor_value_and_grad(f, zn::argnums<2>, a, k, b);
  CHECK(double(v2) == Approx(value).epsilon(1e-15));
  for (std::size_t i = 0; i < 3; ++i) CHECK(rel_err(gb[i], fdb[i]) <= 1e-6);

  // Several argnums, in either order: a std::tuple in argnum order.
  auto const [v3, gab] = zn::detail::tensor_value_and_grad(f, zn::argnums<0, 2>, a, k, b);
  auto const [v4, gba] = zn::detail::tensor_value_and_grad(f, zn::argnums<2, 0>, a, k, b);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(gab)>,
                               std::tuple<zn::tensor<double, 2, 3>, zn::tensor<double, 3>>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(gba)>,
                               std::tuple<zn::tensor<double, 3>, zn::tensor<double, 2, 3>>>);
  CHECK(double(v3) == double(v0));
  CHECK(double(v4) == double(v0));
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(std::get<0>(gab)[i] == ga[i]);
    CHECK(std::get<1>(gba)[i] == ga[i]);
  }
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(std::get<1>(gab)[i] == gb[i]);
    CHECK(std::get<0>(gba)[i] == gb[i]);
  }

  // The same argument twice: each position gets its own gradient. g(x, y) = sum(x * y^2).
  zn::tensor<double, 2> const x{1.5, -2.0};
  auto const [v5, gxy] = zn::detail::tensor_value_and_grad(
      [](auto const& p, auto const& r) { return zn::sum(p * r * r); }, zn::argnums<0, 1>, x, x);
  CHECK(double(v5) == Approx(1.5 * 2.25 - 8.0));
  CHECK(std::get<0>(gxy)(0) == Approx(2.25));
  CHECK(std::get<0>(gxy)(1) == Approx(4.0));
  CHECK(std::get<1>(gxy)(0) == Approx(2 * 1.5 * 1.5));
  CHECK(std::get<1>(gxy)(1) == Approx(2 * -2.0 * -2.0));

  // Outputs: a size-1 tensor, a plain number (zero gradient), an input itself.
  auto const [v6, g6] = zn::detail::tensor_value_and_grad(
      [](auto const& p) { return zn::reshape<1>(zn::sum(p * p)); }, zn::argnums<0>, x);
  CHECK(double(v6) == 6.25);
  CHECK(g6(0) == 3.0);
  CHECK(g6(1) == -4.0);
  auto const [v7, g7] =
      zn::detail::tensor_value_and_grad([](auto const&) { return 4.5; }, zn::argnums<0>, x);
  CHECK(double(v7) == 4.5);
  CHECK(g7(0) == 0.0);
  CHECK(g7(1) == 0.0);
  auto const [v8, g8] =
      zn::detail::tensor_value_and_grad([](auto const& p) { return p(1); }, zn::argnums<0>, x);
  CHECK(double(v8) == -2.0);
  CHECK(g8(0) == 0.0);
  CHECK(g8(1) == 1.0);
  CHECK(tape().empty());
}

TEST_CASE("zn::grad and zn::value_and_grad on tensors use reverse-mode numbers", "[jacrev][grad]") {
  auto f = [](auto const& a, double k, auto const& b) {
    return zn::sum(zn::tanh(zn::matmul(a, b))) * k + zn::sin(a(1, 2) * b(0));
  };
  zn::tensor<double, 2, 3> const a{0.3, -0.5, 0.8, 1.1, 0.2, -0.4};
  zn::tensor<double, 3> const b{0.6, -0.9, 0.25};
  auto const [v, g] = zn::detail::tensor_value_and_grad(f, zn::argnums<0, 2>, a, 1.7, b);
  zn::tensor<double, 2, 3> ga = zn::grad(f)(a, 1.7, b);
  auto [va, gab] = zn::value_and_grad(f, zn::argnums<0, 2>)(a, 1.7, b);
  static_assert(std::is_same_v<decltype(va), zn::tensor<double>>);
  CHECK(double(va) == double(v));
  // Against forward mode: the gradient is the Jacobian of the scalar output.
  auto const jf = zn::jacfwd([&](auto const& x) { return f(x, 1.7, b); })(a);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(ga[i] == std::get<0>(g)[i]);
    CHECK(std::get<0>(gab)[i] == std::get<0>(g)[i]);
    CHECK(rel_err(ga[i], jf[i]) <= 1e-13);
  }
  for (std::size_t i = 0; i < 3; ++i) CHECK(std::get<1>(gab)[i] == std::get<1>(g)[i]);
}

TEST_CASE("the tape is empty after a call and reuses its memory", "[jacrev][tape]") {
  auto& t = tape();
  zn::tensor<double, 7> const q{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7};
  REQUIRE(t.empty());
  auto sum_fk = [](auto const& x) { return zn::sum(fk_position_fn{}(x)); };
  zn::tensor<double, 3, 7> const j1 = zn::jacrev(fk_position_fn{})(q);
  (void)zn::detail::tensor_value_and_grad(sum_fk, zn::argnums<0>, q);
  CHECK(t.empty());
  std::size_t const cap = t.capacity();
  CHECK(cap > 0);  // kept, not freed
  CHECK(t.data() != nullptr);
  auto const* const nodes = t.data();
  auto const* const adj = t.adjoints;
  std::size_t const adj_size = t.adjoint_cap;
  CHECK(adj_size > 7);
  // The same calls again at other points record as many nodes: no reallocation.
  zn::tensor<double, 7> const q2{-0.3, 0.2, 0.9, -0.4, 0.5, 1.6, 0.7};
  zn::tensor<double, 3, 7> const j2 = zn::jacrev(fk_position_fn{})(q2);
  auto const [v, g] = zn::detail::tensor_value_and_grad(sum_fk, zn::argnums<0>, q2);
  CHECK(t.empty());
  CHECK(t.capacity() == cap);
  CHECK(t.data() == nodes);
  CHECK(t.adjoints == adj);
  CHECK(t.adjoint_cap == adj_size);
  // And the results are right (one call's adjoints do not leak into the next).
  check_rev_equals_fwd(fk_position_fn{}, q2, 1e-12);
  CHECK(double(v) == Approx(double(zn::tensor<double>(sum_fk(q2)))).epsilon(1e-15));
  for (std::size_t i = 0; i < 7; ++i)
    CHECK(g(i) == Approx(j2(0, i) + j2(1, i) + j2(2, i)).epsilon(1e-12).margin(1e-14));
  CHECK(j1(0, 0) != j2(0, 0));
}

TEST_CASE("a long recording grows the tape; the next call reuses it", "[jacrev][tape]") {
  auto& t = tape();
  // About 3000 nodes: the tape grows by doubling several times while f runs.
  auto f = [](auto const& x) {
    using T = typename std::remove_cvref_t<decltype(x)>::value_type;
    T acc = x(0);
    for (int i = 0; i < 1000; ++i) acc = acc * x(1) + zn::sin(acc) * 0.5;
    return zn::tensor<T, 2>{acc, acc * x(0)};
  };
  zn::tensor<double, 2> const q{0.3, 0.9};
  check_rev_equals_fwd(f, q, 1e-12);
  CHECK(t.empty());
  std::size_t const cap = t.capacity();
  CHECK(cap >= 3000);
  auto const* const nodes = t.data();
  check_rev_equals_fwd(f, zn::tensor<double, 2>{0.1, 0.7}, 1e-12);
  CHECK(t.capacity() == cap);
  CHECK(t.data() == nodes);
}

TEST_CASE("each thread records on its own tape", "[jacrev][tape]") {
  // Threads computing different Jacobians at once get the same answers as forward mode; each
  // thread's tape memory is freed when it exits (the sanitizer build checks for leaks).
  auto work = [](int seed, int* failures) {
    for (int r = 0; r < 20; ++r) {
      zn::tensor<double, 7> q;
      for (std::size_t i = 0; i < 7; ++i) q(i) = std::sin(0.3 * double(seed * 100 + r) + double(i));
      auto const rev = zn::jacrev(fk_position_fn{})(q);
      auto const fwd = zn::jacfwd(fk_position_fn{})(q);
      for (std::size_t k = 0; k < 21; ++k)
        if (std::abs(rev[k] - fwd[k]) > 1e-12) ++*failures;
      if (!zn::detail::rtape<double>().empty()) ++*failures;
    }
  };
  int f1 = 0, f2 = 0;
  std::thread t1(work, 1, &f1), t2(work, 2, &f2);
  t1.join();
  t2.join();
  CHECK(f1 == 0);
  CHECK(f2 == 0);
}

TEST_CASE("an exception thrown by the function leaves the tape clean", "[jacrev][tape]") {
  auto& t = tape();
  auto throws = [](auto const& x) {
    using T = typename std::remove_cvref_t<decltype(x)>::value_type;
    zn::tensor<T, 3> const y = zn::sin(x) * x;  // records nodes first
    if (x(0).value() > 0) throw std::runtime_error("user error");
    return y;
  };
  zn::tensor<double, 3> const q{0.5, 1.0, 1.5};
  CHECK_THROWS_AS(zn::jacrev(throws)(q), std::runtime_error);
  CHECK(t.empty());
  CHECK_THROWS_AS(zn::detail::tensor_value_and_grad(
                      [&](auto const& x) { return zn::sum(throws(x)); }, zn::argnums<0>, q),
                  std::runtime_error);
  CHECK(t.empty());
  // The next call is right.
  zn::tensor<double, 3> const qn{-0.5, 1.0, 1.5};
  check_rev_equals_fwd(throws, qn, 1e-15);
  CHECK(t.empty());
}

TEST_CASE("nested reverse mode: independent calls work, reading outer variables is an error",
          "[jacrev][tape]") {
  zn::tensor<double, 2> const q{0.4, 1.2};
  // A jacrev inside the function of another, on plain numbers: fine.
  auto outer_ok = [](auto const& x) {
    zn::tensor<double, 2, 2> const inner =
        zn::jacrev([](auto const& p) { return p * p; })(zn::tensor<double, 2>{1.0, 3.0});
    return x * inner(1, 1);  // 6 x
  };
  zn::tensor<double, 2, 2> const j = zn::jacrev(outer_ok)(q);
  CHECK(j(0, 0) == 6.0);
  CHECK(j(1, 1) == 6.0);
  CHECK(j(0, 1) == 0.0);
  // The inner function reads the outer variable x(0): its derivative with respect to x would
  // be lost (a silent zero), so it is an error.
  auto outer_bad = [](auto const& x) {
    zn::tensor<double, 2, 2> const inner =
        zn::jacrev([&](auto const& p) { return p * x(0); })(zn::tensor<double, 2>{1.0, 3.0});
    return x * inner(0, 0);
  };
  CHECK_THROWS_AS(zn::jacrev(outer_bad)(q), zn::value_error);
  try {
    (void)zn::jacrev(outer_bad)(q);
  } catch (zn::value_error const& e) {
    CHECK(std::string(e.what()).rfind("jacrev: ", 0) == 0);
  }
  CHECK(tape().empty());
}
