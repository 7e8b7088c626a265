// jvp (forward mode on arrays): tangents against central finite differences in double, and
// against vjp (<ct, J t> computed both ways), through every kind of node and through
// materialized intermediates.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

namespace {

using fd::random_array;

double dot(zn::array<double> const& a, zn::array<double> const& b) {
  return zn::eval(zn::sum(a * b)).item();
}

// Checks jvp of a unary f at x along t: against (f(x + h t) - f(x - h t)) / 2h, and against vjp:
// <ct, J t> == <J^T ct, t> for a random ct.
template <class F>
void check_jvp(F const& f, zn::array<double> const& x, unsigned seed) {
  auto t = random_array(x.shape(), seed);
  auto [y, ty] = zn::jvp(f, std::make_tuple(x), std::make_tuple(t));
  zn::array<double> y0 = f(x);
  REQUIRE(y.shape() == y0.shape());
  REQUIRE(ty.shape() == y0.shape());
  CHECK(zn::allclose(y, y0, 1e-15, 0));
  double h = 1e-6;
  zn::array<double> up = f(zn::array<double>(x + h * t));
  zn::array<double> down = f(zn::array<double>(x - h * t));
  for (std::size_t i = 0; i < ty.size(); ++i) {
    double fd = (up.data()[i] - down.data()[i]) / (2 * h);
    INFO("element " << i << ": jvp " << ty.data()[i] << ", finite difference " << fd);
    CHECK(std::abs(ty.data()[i] - fd) <= 1e-6 * std::max(1.0, std::abs(fd)));
  }
  auto ct = random_array(y0.shape(), seed + 1);
  auto [out, pullback] = zn::vjp(f, x);
  auto [gx] = pullback(ct);
  double lhs = dot(ct, ty), rhs = dot(gx, t);
  CHECK(lhs == Approx(rhs).epsilon(1e-12));
}

}  // namespace

TEST_CASE("jvp through elementwise ops, broadcasting and reductions", "[jvp]") {
  auto x = random_array({3, 4}, 1, 0.2, 1.5);
  auto b = random_array({3, 1}, 2), c = random_array({4}, 3);
  check_jvp([&](auto const& x) { return zn::sin(x) * b + zn::exp(-x * c) / (x + 1.0); }, x, 10);
  check_jvp([&](auto const& x) { return zn::sum(zn::tanh(x) * x, 1); }, x, 11);
  check_jvp([&](auto const& x) { return zn::mean(zn::square(x + c), 0); }, x, 12);
  check_jvp([&](auto const& x) { return zn::max(x * b, 1, true) + zn::min(x, 0, true); }, x, 13);
  check_jvp([&](auto const& x) { return zn::prod(x, 1); }, x, 14);
  check_jvp([&](auto const& x) { return zn::logsumexp(x * 3.0, 0); }, x, 15);
  check_jvp([&](auto const& x) { return zn::where(x > 0.8, zn::log(x), zn::pow(x, 1.5)); }, x, 16);
  check_jvp([&](auto const& x) { return zn::var(x, 1, true) + zn::std(x, 0, true); }, x, 17);
  check_jvp([&](auto const& x) { return zn::sum(zn::maximum(x, 0.9) * zn::abs(x - 0.5)); }, x, 18);
}

TEST_CASE("jvp through views, matmul, softmax, layer_norm and concatenate", "[jvp]") {
  auto x = random_array({3, 4}, 4);
  auto w = random_array({4, 2}, 5), v = random_array({5, 3}, 6);
  check_jvp([&](auto const& x) { return zn::transpose(x) * 2.0 + zn::reshape(x, {4, 3}); }, x, 20);
  check_jvp(
      [&](auto const& x) { return zn::slice(x, 1, 1, 4, 2) + zn::expand_dims(zn::sum(x, 1), 1); },
      x, 21);
  check_jvp([&](auto const& x) { return zn::tanh(zn::matmul(x, w)); }, x, 22);
  check_jvp([&](auto const& x) { return zn::matmul(v, zn::sin(x)); }, x, 23);
  check_jvp([&](auto const& x) { return zn::softmax(x * 2.0, 1); }, x, 24);
  check_jvp([&](auto const& x) { return zn::log_softmax(x, 0); }, x, 25);
  check_jvp([&](auto const& x) { return zn::layer_norm(x * 2.0, 1); }, x, 28);
  check_jvp([&](auto const& x) { return zn::layer_norm(zn::matmul(v, zn::sin(x)), 0, 0.1); }, x,
            29);
  check_jvp([&](auto const& x) { return zn::concatenate(std::tuple(x, zn::exp(x)), 1); }, x, 26);
  check_jvp([&](auto const& x) { return zn::stack(std::vector{x * 2.0, x * 3.0}, 0); }, x, 27);
}

TEST_CASE("jvp through materialized intermediates, trees and several primals", "[jvp]") {
  auto x = random_array({4, 3}, 7);
  std::vector<zn::array<double>> ws{random_array({3, 5}, 8), random_array({5, 2}, 9)};
  auto mlp = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& x) {
    zn::array<double> h = x;
    for (auto const& w : ws) h = zn::tanh(zn::matmul(h, w));
    return h * h;
  };
  std::vector<zn::array<double>> tw{random_array({3, 5}, 10), random_array({5, 2}, 11)};
  auto tx = random_array({4, 3}, 12);
  auto [y, ty] = zn::jvp(mlp, std::make_tuple(ws, x), std::make_tuple(tw, tx));
  // Against finite differences along (tw, tx) jointly.
  double h = 1e-6;
  auto shifted = [&](double s) {
    std::vector<zn::array<double>> w2{zn::array<double>(ws[0] + s * tw[0]),
                                      zn::array<double>(ws[1] + s * tw[1])};
    return zn::array<double>(mlp(w2, zn::array<double>(x + s * tx)));
  };
  zn::array<double> up = shifted(h), down = shifted(-h);
  for (std::size_t i = 0; i < ty.size(); ++i) {
    double fd = (up.data()[i] - down.data()[i]) / (2 * h);
    CHECK(std::abs(ty.data()[i] - fd) <= 1e-6 * std::max(1.0, std::abs(fd)));
  }
  // <ct, J t> both ways, through the tape.
  auto ct = random_array(y.shape(), 13);
  auto [out, pullback] = zn::vjp(mlp, ws, x);
  auto [gws, gx] = pullback(ct);
  double rhs = dot(gws[0], tw[0]) + dot(gws[1], tw[1]) + dot(gx, tx);
  CHECK(dot(ct, ty) == Approx(rhs).epsilon(1e-12));
}

TEST_CASE("jvp errors", "[jvp]") {
  auto x = random_array({3}, 14);
  auto f = [](auto const& x) { return zn::sin(x); };
  CHECK_THROWS_AS(zn::jvp(f, std::make_tuple(x), std::make_tuple(random_array({4}, 1))),
                  zn::shape_error);
  CHECK_THROWS_WITH(zn::jvp(f, std::make_tuple(x), std::make_tuple(random_array({4}, 1))),
                    Catch::Contains("jvp") && Catch::Contains("(4,)") && Catch::Contains("(3,)"));
  std::vector<zn::array<double>> one{x}, two{x, x};
  auto g = [](std::vector<zn::array<double>> const& v) { return v[0] * 2.0; };
  CHECK_THROWS_WITH(zn::jvp(g, std::make_tuple(one), std::make_tuple(two)),
                    Catch::Contains("jvp") && Catch::Contains("structure"));
}

// Nesting needs nothing of the program: the nested tests themselves are in
// autodiff/higher_order/.
TEST_CASE("nested transforms work in every program, against the closed form", "[jvp][grad]") {
  auto x = random_array({3}, 15), t = random_array({3}, 16);
  auto f = [](auto const& x) { return zn::sum(zn::sin(x) * x); };
  auto df = [&](zn::array<double> const& x) { return zn::sum(zn::grad(f)(x)); };
  zn::array<double> d2 = 2.0 * zn::cos(x) - x * zn::sin(x);  // d/dx (sin x + x cos x)
  CHECK(zn::allclose(zn::grad(df)(x), d2, 1e-12, 1e-12));
  auto [g, tg] = zn::jvp(zn::grad(f), std::make_tuple(x), std::make_tuple(t));
  CHECK(zn::allclose(tg, d2 * t, 1e-12, 1e-12));
  auto [y, pullback] = zn::vjp([](auto const& v) { return v * 2.0; }, x);
  auto uses_pullback = [&, pullback = pullback](zn::array<double> const& v) {
    return zn::sum(std::get<0>(pullback(v)));
  };
  CHECK(zn::allclose(zn::grad(uses_pullback)(x), zn::full<double>({3}, 2.0), 0, 0));
}
