// A program that differentiates through the tape, built against a precompiled runtime.
#include <algorithm>
#include <cmath>
#include <zenith/zenith.hpp>
namespace zn = zenith;
int main() {
  auto f = [](zn::array<double> const& x) {
    zn::array<double> h = x;
    for (int i = 0; i < 3; ++i) h = zn::tanh(h) * 2.0;  // a runtime loop: the tape
    return zn::sum(h * h);
  };
  zn::array<double> x({3}, {0.1, -0.2, 0.3});
  auto g = zn::grad(f)(x);
  double worst = 0, step = 1e-6;
  for (std::size_t i = 0; i < 3; ++i) {
    zn::array<double> up = x + 0.0, down = x + 0.0;  // fresh buffers
    up(i) += step;
    down(i) -= step;
    double fd = (zn::eval(f(up)).item() - zn::eval(f(down)).item()) / (2 * step);
    worst = std::max(worst, std::abs(fd - g(i)));
  }
  return worst < 1e-6 ? 0 : 1;
}
