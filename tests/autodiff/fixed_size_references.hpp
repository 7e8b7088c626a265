#pragma once
// References shared by the fixed-size transform tests (test_jacfwd.cpp, test_jacrev.cpp):
// relative error, central differences in float64 of scalar and tensor functions, and a small
// vector function with its Jacobian written out.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
#include <type_traits>
#include <zenith/zenith.hpp>

namespace fixed_size_references {

namespace zn = zenith;

// Relative error with an absolute floor of 1 in the scale (derivatives near zero).
inline double rel_err(double got, double want) {
  return std::abs(got - want) / std::max(1.0, std::abs(want));
}

// Central difference of f at x, step scaled to x.
inline double central(std::function<double(double)> const& f, double x) {
  double const h = 1e-6 * std::max(1.0, std::abs(x));
  return (f(x + h) - f(x - h)) / (2 * h);
}

// f: R^3 -> R^2, with its Jacobian written out.
struct f32 {
  template <class Q>
  auto operator()(Q const& q) const {
    using T = typename Q::value_type;
    return zn::tensor<T, 2>{q(0) * zn::sin(q(1)) + q(2) * q(2),
                            zn::exp(q(0) * q(2)) / (1.0 + q(1))};
  }
};
inline zn::tensor<double, 2, 3> f32_jacobian(zn::tensor<double, 3> const& q) {
  double const x = q(0), y = q(1), z = q(2);
  double const e = std::exp(x * z);
  return {std::sin(y),     x * std::cos(y),          2 * z,
          z * e / (1 + y), -e / ((1 + y) * (1 + y)), x * e / (1 + y)};
}

// Central differences of a tensor function, row-major over (out..., in...).
template <class F, std::size_t... In>
auto central_jacobian(F const& f, zn::tensor<double, In...> const& q) {
  auto const y0 = f(q);
  constexpr std::size_t n = zn::tensor<double, In...>::count;
  constexpr std::size_t m = std::remove_cvref_t<decltype(y0)>::count;
  std::array<double, m * n> jac{};
  for (std::size_t i = 0; i < n; ++i) {
    double const h = 1e-6 * std::max(1.0, std::abs(q[i]));
    auto qp = q, qm = q;
    qp[i] += h;
    qm[i] -= h;
    auto const yp = f(qp), ym = f(qm);
    for (std::size_t o = 0; o < m; ++o) jac[o * n + i] = (yp[o] - ym[o]) / (2 * h);
  }
  return jac;
}

}  // namespace fixed_size_references
