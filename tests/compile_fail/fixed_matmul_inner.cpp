// expect: zenith: matmul inner dimensions differ
#include <zenith/zenith.hpp>
int main() {
  zenith::tensor<double, 2, 3> a{};
  zenith::tensor<double, 2, 3> b{};
  auto c = zenith::matmul(a, b);
  (void)c;
}
