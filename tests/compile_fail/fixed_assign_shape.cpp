// expect: zenith: the expression's fixed shape differs from the tensor's
#include <zenith/zenith.hpp>
int main() {
  zenith::tensor<double, 4> a{1, 2, 3, 4};
  zenith::tensor<double, 3> c = a * 2.0;
  (void)c;
}
