// expect: zenith: cast of derivative numbers to another floating type is not supported
#include <zenith/zenith.hpp>
int main() {
  zenith::tensor<double, 2> q{1.0, 2.0};
  auto j = zenith::jacfwd([](auto const& x) { return zenith::cast<float>(x); })(q);
  (void)j;
}
