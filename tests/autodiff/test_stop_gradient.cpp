// stop_gradient: the value passes through, no derivative does, in every transform: grad
// (static pass and tape), vjp, jvp, and the fixed-size forward mode (nested too).
#include <catch2/catch.hpp>
#include <cmath>
#include <tuple>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

using fd::check_close;
using fd::random_array;

TEST_CASE("stop_gradient passes values through", "[stop_gradient]") {
  auto x = random_array({3, 4}, 1);
  CHECK(zn::allclose(zn::eval(zn::stop_gradient(x * 2.0)), zn::eval(x * 2.0), 0, 0));
  auto i = zn::eval(zn::cast<int>(x * 10.0));
  CHECK(zn::eval(zn::stop_gradient(i)).data()[5] == i.data()[5]);
  CHECK(zn::stop_gradient(2.5) == 2.5);
}

TEST_CASE("no derivative flows through stop_gradient", "[stop_gradient]") {
  auto x = random_array({5}, 2, 0.2, 1.5);
  // f = sum(x * stop(x^2)): df/dx = stop(x^2) only (the x^2 factor is a constant).
  auto f = [](auto const& x) { return zn::sum(x * zn::stop_gradient(x * x)); };
  zn::array<double> g = zn::grad(f)(x);
  check_close(g, zn::eval(x * x), 1e-15);

  SECTION("through the tape") {
    auto h = [](zn::array<double> const& x) {
      zn::array<double> s = zn::stop_gradient(zn::exp(x));
      zn::array<double> y = zn::sin(x) * s;
      return zn::sum(y);
    };
    zn::array<double> gh = zn::grad(h)(x);
    check_close(gh, zn::eval(zn::cos(x) * zn::exp(x)), 1e-14);
  }
  SECTION("vjp and jvp") {
    auto k = [](auto const& x) { return zn::tanh(x) + zn::stop_gradient(zn::square(x)); };
    auto t = random_array({5}, 3);
    auto [y, ty] = zn::jvp(k, std::make_tuple(x), std::make_tuple(t));
    check_close(y, zn::eval(zn::tanh(x) + x * x), 1e-15);
    check_close(ty, zn::eval((1.0 - zn::square(zn::tanh(x))) * t), 1e-14);
    auto [out, pullback] = zn::vjp(k, x);
    auto [gx] = pullback(t);
    check_close(gx, ty, 1e-14);
  }
}

TEST_CASE("stop_gradient in fixed-size forward mode", "[stop_gradient][jacfwd]") {
  zn::tensor<double, 2> const q{0.7, -0.4};
  // f(q) = (q0 * stop(q1), sin(q0) + stop(q0 q1)): J = [[q1, 0], [cos q0, 0]].
  auto f = [](auto const& q) {
    using T = std::remove_cvref_t<decltype(q(0))>;
    return zn::tensor<T, 2>{q(0) * zn::stop_gradient(q(1)),
                            zn::sin(q(0)) + zn::stop_gradient(q(0) * q(1))};
  };
  zn::tensor<double, 2, 2> const j = zn::jacfwd(f)(q);
  CHECK(j(0, 0) == Approx(q(1)).epsilon(1e-15));
  CHECK(j(0, 1) == 0.0);
  CHECK(j(1, 0) == Approx(std::cos(q(0))).epsilon(1e-15));
  CHECK(j(1, 1) == 0.0);
  // Nested (forward over forward): stop_gradient drops the inner derivatives too.
  auto e = [](auto const& q) { return q(0) * q(0) * q(1) + zn::stop_gradient(q(0) * q(0) * q(1)); };
  zn::tensor<double, 2, 2> const h = zn::hessian(e)(q);
  CHECK(h(0, 0) == Approx(2 * q(1)).epsilon(1e-15));
  CHECK(h(0, 1) == Approx(2 * q(0)).epsilon(1e-15));
  CHECK(h(1, 1) == 0.0);
}
