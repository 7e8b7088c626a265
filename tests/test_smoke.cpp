#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

namespace zn = zenith;

TEST_CASE("a fused expression with a broadcast row", "[smoke]") {
  zn::array<float> m({2, 3}, {1, 2, 3, 4, 5, 6});
  zn::array<float> row({3}, {10, 20, 30});
  zn::array<float> y = zn::exp(m) * 2.f + row;
  REQUIRE(y.shape() == zn::shape{2, 3});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      CHECK(y(i, j) == Approx(std::exp(double(m(i, j))) * 2 + row(j)).epsilon(1e-6));
}
