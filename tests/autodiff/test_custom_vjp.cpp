// custom_vjp: a user-supplied reverse rule, checked against central finite differences in
// double, against the gradient of the same function without the rule, and shown to be the rule
// actually used (a deliberately different rule changes the gradient).
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

namespace {

using fd::check_close;
using fd::random_array;
using A = zn::array<double>;

// softplus(x) = log(1 + e^x), written the stable way: max(x, 0) + log1p(e^-|x|). Its rule reads
// only x: d/dx = sigmoid(x).
auto stable_softplus = [](auto const& x) {
  return zn::maximum(x, 0.0) + zn::log1p(zn::exp(-zn::abs(x)));
};

// The rule, with a factor on the cotangent (1: the true derivative).
auto softplus_with_rule(double factor) {
  return zn::custom_vjp(
      stable_softplus,
      [](A const& x) {
        return std::pair{zn::eval(stable_softplus(x)), x};
      },
      [factor](A const& x, A const& ct) { return std::make_tuple(zn::sigmoid(x) * ct * factor); });
}

bool contains(std::string const& s, std::string const& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("custom_vjp: outside a trace the function is f", "[custom_vjp]") {
  auto softplus = softplus_with_rule(1.0);
  A x({4}, {-40.0, -1.0, 0.5, 40.0});
  A y = softplus(x);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(y.data()[i] == Approx(std::log1p(std::exp(x.data()[i]))).epsilon(1e-14));
  A y2 = softplus(x * 1.0);  // an expression argument is evaluated first
  CHECK(zn::allclose(y, y2, 0, 0));
}

TEST_CASE("custom_vjp: the rule's gradient matches finite differences", "[custom_vjp]") {
  auto softplus = softplus_with_rule(1.0);
  // Large |x| included: exp(40) would not be a problem in double, but the rule must hold there.
  auto x = random_array({3, 5}, 11, -4, 4);
  x.data()[0] = 40.0;
  x.data()[1] = -40.0;
  auto c = random_array({3, 5}, 12);
  auto loss = [&](auto const& v) { return zn::sum(softplus(v) * c); };
  auto [value, g] = zn::value_and_grad(loss)(x);
  CHECK(value.item() == Approx(zn::eval(loss(x)).item()).epsilon(1e-14));
  check_close(g, fd::numeric_grad(loss, 0, x), 1e-7);
  // sigmoid(x) * c, independently.
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(g.data()[i] ==
          Approx(c.data()[i] / (1 + std::exp(-x.data()[i]))).epsilon(1e-13).margin(1e-300));
}

TEST_CASE("custom_vjp: the user's rule is the one used", "[custom_vjp]") {
  auto wrong = softplus_with_rule(2.0);
  auto right = softplus_with_rule(1.0);
  auto x = random_array({7}, 13, -3, 3);
  A g1 = zn::grad([&](auto const& v) { return zn::sum(right(v)); })(x);
  A g2 = zn::grad([&](auto const& v) { return zn::sum(wrong(v)); })(x);
  // Without any rule, through the stable expression's own derivatives.
  A g0 = zn::grad([&](auto const& v) { return zn::sum(stable_softplus(v)); })(x);
  check_close(g1, g0, 1e-13);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(g2.data()[i] == 2 * g1.data()[i]);
}

TEST_CASE("custom_vjp inside a runtime loop under grad", "[custom_vjp]") {
  auto softplus = softplus_with_rule(1.0);
  std::vector<A> ws{random_array({3, 4}, 21), random_array({4, 4}, 22), random_array({4, 2}, 23)};
  auto x = random_array({5, 3}, 24);
  auto with_rule = [&](std::vector<A> const& w, A const& in) {
    A h = in;
    for (auto const& wi : w) h = softplus(zn::matmul(h, wi));  // the matmul is on the tape
    return zn::sum(h * h);
  };
  auto [g, gx] = zn::grad(with_rule, zn::argnums<0, 1>)(ws, x);
  REQUIRE(g.size() == 3);
  check_close(gx, fd::numeric_grad([&](A const& v) { return with_rule(ws, v); }, 0, x));
  for (std::size_t k = 0; k < 3; ++k) {
    auto at = [&](A const& wk) {
      auto w = ws;
      w[k] = wk;
      return with_rule(w, x);
    };
    check_close(g[k], fd::numeric_grad(at, 0, ws[k]));
  }
}

TEST_CASE("custom_vjp: several arguments, a tree, an untraced one", "[custom_vjp]") {
  // f(a, {b, c}, s) = a * b + c * s: an array, a tree, and an array not differentiated.
  using pair_t = std::vector<A>;
  auto f = zn::custom_vjp(
      [](A const& a, pair_t const& bc, A const& s) { return a * bc[0] + bc[1] * s; },
      [](A const& a, pair_t const& bc, A const& s) {
        return std::pair{zn::eval(a * bc[0] + bc[1] * s), std::make_tuple(a, bc[0], s)};
      },
      [](std::tuple<A, A, A> const& r, A const& ct) {
        auto const& [a, b, s] = r;
        pair_t gbc{zn::eval(a * ct), zn::eval(s * ct)};
        return std::make_tuple(b * ct, gbc, s * ct /* ignored: s is not traced */);
      });
  auto a = random_array({2, 3}, 31), b = random_array({2, 3}, 32), c = random_array({2, 3}, 33),
       s = random_array({2, 3}, 34);
  auto loss = [&](A const& a_, pair_t const& bc) { return zn::sum(zn::square(f(a_, bc, s))); };
  auto [ga, gbc] = zn::grad(loss, zn::argnums<0, 1>)(a, pair_t{b, c});
  check_close(ga, fd::numeric_grad([&](A const& v) { return loss(v, pair_t{b, c}); }, 0, a));
  REQUIRE(gbc.size() == 2);
  check_close(gbc[0], fd::numeric_grad([&](A const& v) { return loss(a, pair_t{v, c}); }, 0, b));
  check_close(gbc[1], fd::numeric_grad([&](A const& v) { return loss(a, pair_t{b, v}); }, 0, c));
  // The same array as two arguments: both contributions add up.
  A gaa = zn::grad([&](A const& v) { return zn::sum(f(v, pair_t{v, c}, s)); })(a);
  check_close(gaa, zn::eval(2.0 * a));
}

TEST_CASE("custom_vjp under vjp: the pullback can be called twice", "[custom_vjp]") {
  auto softplus = softplus_with_rule(1.0);
  auto x = random_array({2, 3}, 41);
  auto ct = random_array({2, 3}, 42);
  auto [y, pullback] = zn::vjp([&](A const& v) { return softplus(v) * 3.0; }, x);
  CHECK(zn::allclose(y, zn::eval(stable_softplus(x) * 3.0), 1e-14, 0));
  auto [g1] = pullback(ct);
  auto [g2] = pullback(ct);
  check_close(g1, zn::eval(3.0 * zn::sigmoid(x) * ct), 1e-14);
  CHECK(zn::allclose(g1, g2, 0, 0));
}

TEST_CASE("custom_vjp: errors are clear", "[custom_vjp]") {
  auto softplus = softplus_with_rule(1.0);
  auto x = random_array({2, 3}, 51);

  SECTION("jvp: no forward-mode rule, never a silent zero") {
    std::string msg;
    try {
      zn::jvp([&](A const& v) { return softplus(v); }, std::make_tuple(x), std::make_tuple(x));
    } catch (zn::value_error const& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(contains(msg, "custom_vjp"));
    CHECK(contains(msg, "no forward-mode rule"));
  }

  SECTION("a cotangent of the wrong shape") {
    auto bad = zn::custom_vjp([](A const& v) { return v * 2.0; },
                              [](A const& v) {
                                return std::pair{zn::eval(v * 2.0), 0};
                              },
                              [](int, A const& ct) { return std::make_tuple(zn::sum(ct)); });
    std::string msg;
    try {
      zn::grad([&](A const& v) { return zn::sum(bad(v)); })(x);
    } catch (zn::shape_error const& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(contains(msg, "custom_vjp"));
    CHECK(contains(msg, "()"));
    CHECK(contains(msg, "(2, 3)"));
  }

  SECTION("fwd reading a traced array through a closure") {
    std::string msg;
    try {
      auto loss = [](A const& w, A const& v) {
        auto scaled =
            zn::custom_vjp([w](A const& u) { return u * w; },  // w is traced, and not an argument
                           [w](A const& u) {
                             return std::pair{zn::eval(u * w), w};
                           },
                           [](A const& w_, A const& ct) { return std::make_tuple(w_ * ct); });
        return zn::sum(scaled(v));
      };
      zn::grad(loss, zn::argnums<0, 1>)(x, x);
    } catch (zn::value_error const& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(contains(msg, "custom_vjp"));
    CHECK(contains(msg, "closure"));
  }
}
