// expect: zenith::jit: inside a staged tensor function
#include <zenith/zenith.hpp>
int main() {
  zenith::tensor<double, 3> q{1.0, 2.0, 3.0};
  auto g = zenith::jit(zenith::grad([](auto const& x) {
    zenith::tensor<double, 3> y = x * 2.0;  // would drop the derivative: an error, not zeros
    return zenith::sum(y);
  }))(q);
  (void)g;
}
