// Gradients of scalar functions built from transcendentals, as a statistics or physics user
// writes them: a few losses over arrays, in double and float, each gradient checked against its
// closed form.
#include <cmath>
#include <cstdio>
#include <zenith/zenith.hpp>

namespace zn = zenith;

int main() {
  std::size_t const n = 1000;
  auto x = zn::array<double>::empty({n});
  auto y = zn::array<double>::empty({n});
  for (std::size_t i = 0; i < n; ++i) {
    x.data()[i] = 0.1 + 2.0 * double(i) / double(n);
    y.data()[i] = std::cos(0.01 * double(i));
  }
  auto xf = zn::array<float>::empty({n});
  for (std::size_t i = 0; i < n; ++i) xf.data()[i] = float(x.data()[i]);

  auto f1 = [](auto const& x) {
    return zn::sum(zn::exp(-x) * zn::sin(x) + zn::sqrt(x) * zn::tanh(x * 2.0) - x * x);
  };
  auto f2 = [](auto const& x, auto const& y) { return zn::sum(zn::sin(x) * y); };
  auto f3 = [](auto const& x, auto const& y) { return zn::mean(zn::log(x) * zn::cos(y) + x * y); };
  auto f4 = [](auto const& x) { return zn::sum(zn::tanh(x) * x); };

  auto g1 = zn::grad(f1)(x);
  auto g2 = zn::grad(f2)(x, y);
  auto g3 = zn::grad(f3)(x, y);
  auto g4 = zn::grad(f4)(xf);
  zn::array<float> z = xf * zn::sin(xf) + zn::exp(-xf * xf);

  double worst = 0, worst_float = 0;  // absolute errors, in double and in float
  for (std::size_t i = 0; i < n; ++i) {
    double a = x.data()[i], b = y.data()[i], t = std::tanh(2 * a), tf = std::tanh(a);
    double e1 = -std::exp(-a) * std::sin(a) + std::exp(-a) * std::cos(a) + t / (2 * std::sqrt(a)) +
                2 * std::sqrt(a) * (1 - t * t) - 2 * a;
    double e3 = (std::cos(b) / a + b) / double(n);
    worst = std::max({worst, std::abs(g1(i) - e1), std::abs(g2(i) - std::cos(a) * b),
                      std::abs(g3(i) - e3) * double(n)});
    worst_float = std::max({worst_float, std::abs(double(g4(i)) - ((1 - tf * tf) * a + tf)),
                            std::abs(double(z(i)) - (a * std::sin(a) + std::exp(-a * a)))});
  }
  std::printf("largest error: %.2e in double, %.2e in float\n", worst, worst_float);
  return worst < 1e-12 && worst_float < 1e-5 ? 0 : 1;
}
