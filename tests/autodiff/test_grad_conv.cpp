// Derivatives of conv2d against central finite differences in double: the gradient with respect
// to the input and the filter (strides, padding, dilation, an expression operand), vjp and jvp
// agreeing, and a small convolutional model trained through a runtime loop (the tape).
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <tuple>
#include <vector>

#include "finite_differences.hpp"

using fd::check_close;
using fd::check_grads;
using fd::numeric_grad;
using fd::random_array;

TEST_CASE("grad through conv2d", "[grad][rules][conv]") {
  auto x = random_array({2, 3, 7, 6}, 31), w = random_array({4, 3, 3, 2}, 32);
  auto t = random_array({2, 4, 4, 6}, 33);
  check_grads(
      [&](auto const& x_, auto const& w_) {
        return zn::sum(zn::tanh(zn::conv2d(x_, w_, {{2, 1}, {1, 1}, {1, 2}})) * t);
      },
      x, w);
  // An operand that is an expression; a 1x1 filter; the output squared (two reads of it).
  auto w1 = random_array({5, 3, 1, 1}, 34);
  check_grads([](auto const& x_,
                 auto const& w_) { return zn::sum(zn::square(zn::conv2d(zn::sin(x_), w_ * 2.0))); },
              x, w1);
}

TEST_CASE("vjp and jvp of conv2d agree", "[grad][rules][conv]") {
  auto x = random_array({1, 2, 6, 6}, 41), w = random_array({3, 2, 3, 3}, 42);
  auto tx = random_array({1, 2, 6, 6}, 43), tw = random_array({3, 2, 3, 3}, 44);
  auto f = [](zn::array<double> const& a, zn::array<double> const& b) {
    return zn::conv2d(a, b, {{1, 1}, {1, 1}, {1, 1}});
  };
  auto [y, ty] = zn::jvp(f, std::make_tuple(x, w), std::make_tuple(tx, tw));
  auto ct = random_array(y.shape(), 45);
  auto [y2, pullback] = zn::vjp(f, x, w);
  auto [cx, cw] = pullback(ct);
  double forward = zn::eval(zn::sum(ct * ty)).item();
  double reverse = zn::eval(zn::sum(cx * tx) + zn::sum(cw * tw)).item();
  CHECK(forward == Approx(reverse).epsilon(1e-12));
}

TEST_CASE("a convolutional model through the tape", "[grad][tape][conv]") {
  auto model = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& in) {
    zn::array<double> h = in;
    for (auto const& w : ws) h = zn::tanh(zn::conv2d(h, w, {{1, 1}, {1, 1}, {1, 1}}));
    return zn::mean(zn::square(h));
  };
  std::vector<zn::array<double>> ws{random_array({3, 2, 3, 3}, 51), random_array({2, 3, 3, 3}, 52)};
  auto in = random_array({2, 2, 5, 5}, 53);
  std::vector<zn::array<double>> g = zn::grad(model)(ws, in);
  auto as_first = [&](zn::array<double> const& w0) { return model({w0, ws[1]}, in); };
  auto as_second = [&](zn::array<double> const& w1) { return model({ws[0], w1}, in); };
  check_close(g[0], numeric_grad(as_first, 0, ws[0]));
  check_close(g[1], numeric_grad(as_second, 0, ws[1]));
}
