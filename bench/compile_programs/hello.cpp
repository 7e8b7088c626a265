// The README's first program: one expression, evaluated and printed.
#include <iostream>
#include <zenith/zenith.hpp>
namespace zn = zenith;

int main() {
  zn::array<float> m({2, 3}, {1, 2, 3, 4, 5, 6});
  zn::array<float> row({3}, {10, 20, 30});
  auto e = zn::exp(m) * 2.f + row;  // lazy: an expression, not an array yet
  zn::array<float> y = e;           // one fused, vectorised, threaded pass
  std::cout << y << '\n';
}
