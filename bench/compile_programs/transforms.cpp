// Every transform on arrays: grad, value_and_grad, vjp, jvp, jacfwd, jacrev, hessian,
// grad(grad(f)) and jvp(grad(f)), checked against each other and against finite differences.
#include <cmath>
#include <cstdio>
#include <tuple>
#include <zenith/zenith.hpp>

namespace zn = zenith;

int failures = 0;
void check(bool ok, char const* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

int main() {
  // A small model: f(x) = sum(tanh(W x) * x) + log(1 + sum(x^2)).
  zn::array<double> w({3, 3}, {0.5, -0.2, 0.1, 0.3, 0.8, -0.4, -0.1, 0.2, 0.6});
  zn::array<double> x({3}, {0.3, -0.7, 1.1}), v({3}, {1.0, 0.5, -0.25});
  auto f = [&](auto const& x) {
    return zn::sum(zn::tanh(zn::matmul(w, x)) * x) + zn::log(1.0 + zn::sum(zn::square(x)));
  };
  auto vec_f = [&](auto const& x) { return zn::sin(x) * zn::exp(-x); };

  zn::array<double> g = zn::grad(f)(x);
  auto [value, g2] = zn::value_and_grad(f)(x);
  check(zn::allclose(g, g2), "value_and_grad");

  // Finite differences of f.
  for (std::size_t i = 0; i < 3; ++i) {
    zn::array<double> xp = zn::eval(x * 1.0), xm = zn::eval(x * 1.0);
    xp(i) += 1e-6;
    xm(i) -= 1e-6;
    double fd = (zn::eval(f(xp)).item() - zn::eval(f(xm)).item()) / 2e-6;
    check(std::abs(fd - g(i)) < 1e-6, "grad vs finite differences");
  }

  auto [y, pullback] = zn::vjp(vec_f, x);
  auto [ct] = pullback(zn::ones<double>({3}));
  auto [y2, ty] = zn::jvp(vec_f, std::make_tuple(x), std::make_tuple(zn::ones<double>({3})));
  check(zn::allclose(ct, ty), "vjp and jvp of an elementwise function");

  zn::array<double> jf = zn::jacfwd(vec_f)(x);
  zn::array<double> jr = zn::jacrev(vec_f)(x);
  check(jf.shape() == zn::shape{3, 3} && zn::allclose(jf, jr), "jacfwd and jacrev");

  zn::array<double> hess = zn::hessian(f)(x);
  auto [gg, hv] = zn::jvp(zn::grad(f), std::make_tuple(x), std::make_tuple(v));
  zn::array<double> hv_direct = zn::matmul(hess, v);
  check(zn::allclose(hv, hv_direct), "jvp(grad(f)) against hessian(f) v");
  zn::array<double> h1 = zn::grad([&](auto const& y) { return zn::sum(zn::grad(f)(y)); })(x);
  zn::array<double> h1_direct = zn::sum(hess, 0);
  check(zn::allclose(h1, h1_direct), "grad(grad(f)) against hessian(f)");

  // The Hessian against finite differences of the gradient.
  for (std::size_t i = 0; i < 3; ++i) {
    zn::array<double> xp = zn::eval(x * 1.0), xm = zn::eval(x * 1.0);
    xp(i) += 1e-5;
    xm(i) -= 1e-5;
    zn::array<double> gp = zn::grad(f)(xp), gm = zn::grad(f)(xm);
    for (std::size_t j = 0; j < 3; ++j)
      check(std::abs((gp(j) - gm(j)) / 2e-5 - hess(j, i)) < 1e-6, "hessian vs differences");
  }
  std::printf("f = %.6f, %d failures\n", value.item(), failures);
  return failures == 0 ? 0 : 1;
}
