// Nested transforms on arrays: grad of grad, Hessian-vector products four ways (forward over
// reverse, reverse over forward, reverse over reverse with vjp, forward over forward), mixed
// partials through closures, and the errors for what cannot be differentiated again.
#include "second_derivatives.hpp"

using namespace second_derivatives;

TEST_CASE("grad of grad: analytic second derivatives", "[higher_order]") {
  auto x = random_array({5}, 1);
  // d/dx sum(d/dx sum(x^3)) = d/dx sum(3 x^2) = 6 x.
  auto f = [](zn::array<double> const& v) { return zn::sum(v * v * v); };
  auto outer = [&](zn::array<double> const& v) { return zn::sum(zn::grad(f)(v)); };
  auto g2 = zn::grad(outer)(x);
  for (std::size_t i = 0; i < 5; ++i) check_close(g2.data()[i], 6 * x.data()[i], 1e-12);
  // Through transcendentals: d/dx sum(cos(x)) = -sin(x); again: -cos(x).
  auto f2 = [](zn::array<double> const& v) { return zn::sum(zn::sin(v)); };
  auto outer2 = [&](zn::array<double> const& v) { return zn::sum(zn::grad(f2)(v)); };
  auto h2 = zn::grad(outer2)(x);
  for (std::size_t i = 0; i < 5; ++i) check_close(h2.data()[i], -std::sin(x.data()[i]), 1e-12);
}

TEST_CASE("Hessian-vector products: jvp of grad and grad of jvp", "[higher_order]") {
  auto x = random_array({6}, 8), v = random_array({6}, 9);
  // sin(u * u): a shared costly cotangent (reuse_node) in the gradient that jvp differentiates.
  auto f = [](auto const& u) {
    return zn::sum(zn::exp(u * 0.5) * zn::cos(u)) + zn::logsumexp(u) + zn::sum(zn::sin(u * u));
  };
  auto H = zn::hessian(f)(x);
  std::vector<double> hv(6, 0.0);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 6; ++j) hv[i] += H.data()[i * 6 + j] * v.data()[j];
  SECTION("forward over reverse") {
    auto [g, hvp] = zn::jvp(zn::grad(f), std::make_tuple(x), std::make_tuple(v));
    auto g1 = zn::grad(f)(x);
    for (std::size_t i = 0; i < 6; ++i) {
      check_close(g.data()[i], g1.data()[i], 1e-14);
      check_close(hvp.data()[i], hv[i], 1e-12);
    }
  }
  SECTION("reverse over forward") {
    auto dir = [&](zn::array<double> const& u) {
      return zn::jvp(f, std::make_tuple(u), std::make_tuple(v)).second;  // grad(f) . v
    };
    auto hvp = zn::grad([&](zn::array<double> const& u) { return zn::sum(dir(u)); })(x);
    for (std::size_t i = 0; i < 6; ++i) check_close(hvp.data()[i], hv[i], 1e-12);
  }
  SECTION("reverse over reverse, with vjp") {
    auto hvp = zn::grad([&](zn::array<double> const& u) {
      auto [y, pull] = zn::vjp(f, u);
      auto [gu] = pull(zn::full<double>(y.shape(), 1.0));
      return zn::sum(gu * v);
    })(x);
    for (std::size_t i = 0; i < 6; ++i) check_close(hvp.data()[i], hv[i], 1e-12);
  }
  SECTION("forward over forward") {
    // v^T H v from nested jvp.
    auto d1 = [&](zn::array<double> const& u) {
      return zn::jvp(f, std::make_tuple(u), std::make_tuple(v)).second;
    };
    auto [d, d2] = zn::jvp(d1, std::make_tuple(x), std::make_tuple(v));
    double vhv = 0;
    for (std::size_t i = 0; i < 6; ++i) vhv += v.data()[i] * hv[i];
    check_close(d2.data()[0], vhv, 1e-12);
  }
}

TEST_CASE("mixed partials through a closure over an outer traced array", "[higher_order]") {
  // F(x) = sum over i of d/dy [sum(x * y^2)] at y = y0, i.e. sum(2 x y0): dF/dx = 2 y0.
  auto x = random_array({3}, 10), y0 = random_array({3}, 11);
  auto F = [&](zn::array<double> const& xx) {
    auto gy = zn::grad([&](zn::array<double> const& y) { return zn::sum(xx * y * y); })(y0);
    return zn::sum(gy);
  };
  auto g = zn::grad(F)(x);
  for (std::size_t i = 0; i < 3; ++i) check_close(g.data()[i], 2 * y0.data()[i], 1e-14);
}

TEST_CASE("third and fourth order, against the closed form and differences", "[higher_order]") {
  auto x = random_array({3}, 14);
  auto f = [](zn::array<double> const& v) { return zn::sum(zn::sin(v) * v); };
  auto g1 = [&](zn::array<double> const& v) { return zn::sum(zn::grad(f)(v)); };
  auto g2 = [&](zn::array<double> const& v) { return zn::sum(zn::grad(g1)(v)); };
  auto g3 = [&](zn::array<double> const& v) { return zn::sum(zn::grad(g2)(v)); };
  auto h = zn::grad(g2)(x);  // d/dv (2 cos v - v sin v)
  auto h4 = zn::grad(g3)(x);
  for (std::size_t i = 0; i < 3; ++i) {
    double xi = x.data()[i];
    check_close(h.data()[i], -3 * std::sin(xi) - xi * std::cos(xi), 1e-12);
    check_close(h4.data()[i], -4 * std::cos(xi) + xi * std::sin(xi), 1e-12);
  }
}

TEST_CASE("what cannot be differentiated again is an error, never zeros", "[higher_order]") {
  auto x = random_array({3}, 14);
  auto f = [](zn::array<double> const& v) { return zn::sum(zn::sin(v) * v); };
  // A user rule: differentiable once.
  auto sq = zn::custom_vjp([](zn::array<double> const& v) { return v * v; },
                           [](zn::array<double> const& v) {
                             return std::pair{zn::eval(v * v), v};
                           },
                           [](zn::array<double> const& v, zn::array<double> const& ct) {
                             return std::make_tuple(zn::eval(2.0 * v * ct));
                           });
  auto inner = [&](zn::array<double> const& v) { return zn::sum(sq(v)); };
  SECTION("custom_vjp inside a nested transform") {
    // One level: the user rule.
    auto g = zn::grad(inner)(x);
    for (std::size_t i = 0; i < 3; ++i) check_close(g.data()[i], 2 * x.data()[i], 1e-14);
    auto outer = [&](zn::array<double> const& v) { return zn::sum(zn::grad(inner)(v)); };
    CHECK_THROWS_WITH(zn::grad(outer)(x), Catch::Contains("custom_vjp"));
  }
  SECTION("the state is clean after an error") {
    auto outer = [&](zn::array<double> const& v) { return zn::sum(zn::grad(inner)(v)); };
    CHECK_THROWS(zn::grad(outer)(x));
    auto g1 = [&](zn::array<double> const& v) { return zn::sum(zn::grad(f)(v)); };
    auto h = zn::grad(g1)(x);  // second order still works
    for (std::size_t i = 0; i < 3; ++i) {
      double xi = x.data()[i];
      check_close(h.data()[i], 2 * std::cos(xi) - xi * std::sin(xi), 1e-12);
    }
  }
}

TEST_CASE("a vjp pullback called inside grad is differentiated in its cotangent",
          "[higher_order][vjp]") {
  auto x = random_array({3}, 17), w = random_array({3}, 18);
  auto [y, pullback] = zn::vjp([](auto const& v) { return zn::sin(v) * 2.0; }, x);
  // pullback(c) = 2 cos(x) * c, so d/dc sum(pullback(c) * w) = 2 cos(x) * w.
  auto uses_pullback = [&, pullback = pullback](zn::array<double> const& c) {
    return zn::sum(std::get<0>(pullback(c)) * w);
  };
  auto g = zn::grad(uses_pullback)(random_array({3}, 19));
  for (std::size_t i = 0; i < 3; ++i)
    check_close(g.data()[i], 2 * std::cos(x.data()[i]) * w.data()[i], 1e-14);
}
