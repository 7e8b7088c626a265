// expect: array(<brace-enclosed initializer list>, int) || no matching constructor for
// Raw pointers come in through copy_from/view only: array<float>({2, 3}, 0) must not compile.
#include <zenith/zenith.hpp>
int main() {
  zenith::array<float> a({2, 3}, 0);
  (void)a;
}
