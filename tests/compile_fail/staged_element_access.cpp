// expect: zenith::jit: inside a staged tensor function
#include <zenith/zenith.hpp>
int main() {
  zenith::tensor<double, 3> q{1.0, 2.0, 3.0};
  auto g = zenith::jit(zenith::grad([](auto const& x) { return zenith::sin(x(0)) * x(1); }))(q);
  (void)g;
}
