// The higher-order examples of docs/autodiff.md, compiled and run by ctest as
// doc.autodiff_higher.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <zenith/zenith.hpp>

namespace zn = zenith;

#include "check.hpp"

void higher_order() {
  // [doc:ad-higher-order]
  auto f = [](auto const& x) { return zn::sum(zn::exp(x) * x); };  // d2f/dx_i^2 = (2 + x_i) e^x_i
  zn::array<double> x({3}, {0.0, 0.5, 1.0}), v({3}, {1.0, 0.0, -1.0});
  zn::array<double> H = zn::hessian(f)(x);  // shape (3, 3), diagonal here
  auto [g, hv] = zn::jvp(zn::grad(f), std::make_tuple(x), std::make_tuple(v));    // g, H v
  auto g2 = zn::grad([&](auto const& y) { return zn::sum(zn::grad(f)(y)); })(x);  // H 1
  zn::array<double> J = zn::jacrev([](auto const& y) { return zn::tanh(y) * 2.0; })(x);
  // [/doc:ad-higher-order]
  for (std::size_t i = 0; i < 3; ++i) {
    double xi = x(i), d2 = (2 + xi) * std::exp(xi);
    CHECK(std::abs(H(i, i) - d2) < 1e-12 && std::abs(g2(i) - d2) < 1e-12);
    CHECK(std::abs(hv(i) - d2 * v(i)) < 1e-12 && std::abs(g(i) - (1 + xi) * std::exp(xi)) < 1e-12);
    double t = std::tanh(xi);
    CHECK(std::abs(J(i, i) - 2 * (1 - t * t)) < 1e-14);
    for (std::size_t j = 0; j < 3; ++j)
      if (j != i) CHECK(H(i, j) == 0.0 && J(i, j) == 0.0);
  }
}

int main() {
  higher_order();
  std::puts("doc.autodiff_higher: ok");
}
