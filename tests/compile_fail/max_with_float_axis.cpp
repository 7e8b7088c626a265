// expect: max(zenith::array<float>&, double) || no matching function for call to 'max'
// Axes are integers only: max(x, 0.5) must not compile (elementwise max is maximum).
#include <zenith/zenith.hpp>
int main() {
  zenith::array<float> x({3}, {1, 2, 3});
  auto m = zenith::max(x, 0.5);
  (void)m;
}
