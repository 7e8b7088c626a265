#include <zenith/zenith.hpp>
namespace zn = zenith;
int main() {
  zn::array<float> a({2, 2}, {1, 2, 3, 4});
  zn::array<float> b = a * 2.f + 1.f;
  return b(1, 1) == 9.f ? 0 : 1;
}
