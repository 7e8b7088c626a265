#pragma once
// Shared by the higher-order tests: random inputs, and central differences in float64 of a
// first derivative (whose correctness the first-order tests establish) as the reference for
// second derivatives.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

namespace second_derivatives {

inline zn::array<double> random_array(zn::shape s, unsigned seed, double lo = -1.0,
                                      double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  auto a = zn::array<double>::empty(s);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = d(gen);
  return a;
}

// Central differences of g (array -> array) at x, in direction e_j for each j: J[o, j].
inline std::vector<std::vector<double>> fd_jacobian(
    std::function<zn::array<double>(zn::array<double> const&)> const& g, zn::array<double> const& x,
    double h = 1e-5) {
  std::size_t n = x.size();
  std::vector<std::vector<double>> cols;
  for (std::size_t j = 0; j < n; ++j) {
    auto xp = zn::array<double>::empty(x.shape()), xm = zn::array<double>::empty(x.shape());
    for (std::size_t i = 0; i < n; ++i) xp.data()[i] = xm.data()[i] = x.data()[i];
    xp.data()[j] += h;
    xm.data()[j] -= h;
    auto gp = g(xp), gm = g(xm);
    std::vector<double> c(gp.size());
    for (std::size_t o = 0; o < c.size(); ++o) c[o] = (gp.data()[o] - gm.data()[o]) / (2 * h);
    cols.push_back(c);
  }
  return cols;
}

inline void check_close(double got, double want, double tol = 1e-6) {
  INFO("got " << got << ", want " << want);
  CHECK(std::abs(got - want) <= tol * std::max(1.0, std::abs(want)));
}

// H (n x n, row major) against central differences of the gradient.
template <class F>
void check_hessian_fd(F const& f, zn::array<double> const& x) {
  auto H = zn::hessian(f)(x);
  std::size_t n = x.size();
  REQUIRE(H.size() == n * n);
  auto cols = fd_jacobian([&](zn::array<double> const& xx) { return zn::grad(f)(xx); }, x);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) check_close(H.data()[i * n + j], cols[j][i]);
}

}  // namespace second_derivatives
