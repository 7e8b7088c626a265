// expect: zenith: fixed-size shapes do not broadcast
#include <zenith/zenith.hpp>
int main() {
  zenith::tensor<double, 3> a{1, 2, 3};
  zenith::tensor<double, 4> b{1, 2, 3, 4};
  zenith::tensor<double, 3> c = a + b;
  (void)c;
}
