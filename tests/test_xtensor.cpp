// Zero-copy interop with xtensor: both directions share memory, shapes carry over, expressions
// over the adapted arrays compute what a plain loop computes.
#if __has_include(<xtensor/xtensor.hpp>)

#include <catch2/catch.hpp>
#include <cmath>
#include <type_traits>
#include <xtensor/xarray.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>
#include <zenith/interop/xtensor.hpp>
#include <zenith/zenith.hpp>

namespace zn = zenith;

namespace {
// Values with a fractional part and both signs, different at every index.
double value_at(std::size_t i) { return 0.37 * double(i) - 2.1 + 0.01 * double(i % 7); }
}  // namespace

TEST_CASE("to_xtensor adapts a zenith array without copying", "[xtensor]") {
  std::vector<float> init(2 * 3 * 5);
  for (std::size_t i = 0; i < init.size(); ++i) init[i] = float(value_at(i));
  zn::array<float> a({2, 3, 5}, init);
  auto x = zn::to_xtensor(a);

  REQUIRE(x.dimension() == 3);
  CHECK(x.shape()[0] == 2);
  CHECK(x.shape()[1] == 3);
  CHECK(x.shape()[2] == 5);
  CHECK(x.size() == a.size());
  CHECK(x.data() == a.data());
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 5; ++k) CHECK(x(i, j, k) == a(i, j, k));

  // A const array gives a read-only adaptor over the same memory.
  zn::array<float> const& ca = a;
  auto cx = zn::to_xtensor(ca);
  static_assert(std::is_const_v<std::remove_reference_t<decltype(*cx.data())>>);
  CHECK(cx.data() == a.data());
  CHECK(cx(1, 1, 1) == a(1, 1, 1));

  // Writes go both ways.
  x(1, 2, 3) = 42.f;
  CHECK(a(1, 2, 3) == 42.f);
  a(0, 1, 4) = -7.f;
  CHECK(x(0, 1, 4) == -7.f);

  // An xtensor expression over the adaptor reads zenith's values.
  xt::xarray<float> y = xt::exp(x) * 2.f + x;
  REQUIRE(y.size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    double v = a.data()[i];
    CHECK(y.data()[i] == Approx(std::exp(v) * 2 + v).epsilon(1e-6));
  }

  // Write-through assignment into the adaptor lands in a's buffer.
  xt::noalias(x) = x * 3.f;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double before = i == 1 * 15 + 2 * 5 + 3 ? 42.0 : i == 0 * 15 + 1 * 5 + 4 ? -7.0 : init[i];
    CHECK(a.data()[i] == Approx(before * 3).epsilon(1e-6));
  }
}

TEST_CASE("to_xtensor<N> gives a fixed-rank adaptor and checks the rank", "[xtensor]") {
  zn::array<double> a = zn::arange<double>(12);
  zn::array<double> m = zn::reshape(a, {3, 4});
  auto x = zn::to_xtensor<2>(m);
  static_assert(std::tuple_size_v<std::decay_t<decltype(x.shape())>> == 2);
  CHECK(x.shape()[0] == 3);
  CHECK(x.shape()[1] == 4);
  CHECK(x(2, 1) == 9.0);
  x(2, 1) = 0.5;
  CHECK(m(2, 1) == 0.5);
  CHECK_THROWS_AS(zn::to_xtensor<3>(m), zn::shape_error);
}

TEST_CASE("from_xtensor views an xt::xarray's memory", "[xtensor]") {
  xt::xarray<double> x = xt::zeros<double>({4, 6});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = value_at(i);
  auto v = zn::from_xtensor(x);
  static_assert(std::is_same_v<decltype(v), zn::array<double>>);

  REQUIRE(v.shape() == zn::shape{4, 6});
  CHECK(v.data() == x.data());
  v(3, 5) = 11.0;
  CHECK(x(3, 5) == 11.0);
  x(0, 2) = -4.0;
  CHECK(v(0, 2) == -4.0);

  // A zenith expression over the view, against a plain loop over xtensor's values.
  zn::array<double> row({6}, {1, 2, 3, 4, 5, 6});
  zn::array<double> r = zn::sin(v) * 2.0 + row;
  REQUIRE(r.shape() == zn::shape{4, 6});
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 6; ++j)
      CHECK(r(i, j) == Approx(std::sin(x(i, j)) * 2 + double(j + 1)).epsilon(1e-12));
  CHECK(r.data() != x.data());  // a fresh result, not written into the view

  // zenith::assign writes through the view into the xarray.
  std::vector<double> before(x.begin(), x.end());
  zn::assign(v, v * v - 1.0);
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(x.data()[i] == Approx(before[i] * before[i] - 1).epsilon(1e-12));
}

TEST_CASE("from_xtensor views an xt::xtensor, size-1 axes included", "[xtensor]") {
  xt::xtensor<float, 3> x = xt::zeros<float>({2, 1, 3});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = float(value_at(i));
  auto v = zn::from_xtensor(x);
  static_assert(std::is_same_v<decltype(v), zn::array<float>>);
  REQUIRE(v.shape() == zn::shape{2, 1, 3});
  CHECK(v.data() == x.data());
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 3; ++k) CHECK(v(i, 0, k) == x(i, 0, k));

  xt::xtensor<std::int32_t, 1> ints = {3, -1, 4};
  auto vi = zn::from_xtensor(ints);
  static_assert(std::is_same_v<decltype(vi), zn::array<std::int32_t>>);
  vi(1) = 10;
  CHECK(ints(1) == 10);
}

TEST_CASE("from_xtensor rejects memory that is not row-major contiguous", "[xtensor]") {
  xt::xarray<float, xt::layout_type::column_major> cm = xt::zeros<float>({3, 4});
  CHECK_THROWS_AS(zn::from_xtensor(cm), zn::value_error);
  CHECK_THROWS_WITH(zn::from_xtensor(cm),
                    Catch::Contains("column_major") && Catch::Contains("(3, 4)"));
  // A column-major container with a single non-trivial axis is contiguous either way.
  xt::xarray<float, xt::layout_type::column_major> col = xt::zeros<float>({5, 1});
  CHECK(zn::from_xtensor(col).shape() == zn::shape{5, 1});
}

TEST_CASE("zenith -> xtensor -> zenith round trip shares one buffer", "[xtensor]") {
  zn::array<float> a = zn::linspace<float>(-1, 1, 9);
  zn::array<float> m = zn::reshape(a, {3, 3});
  auto x = zn::to_xtensor(m);
  auto back = zn::from_xtensor(x);
  CHECK(back.data() == m.data());
  REQUIRE(back.shape() == m.shape());
  back(2, 2) = 100.f;
  CHECK(m(2, 2) == 100.f);
  CHECK(x(2, 2) == 100.f);

  // And xtensor -> zenith -> xtensor.
  xt::xarray<double> y = {{1.0, 2.0}, {3.0, 4.0}};
  auto zy = zn::from_xtensor(y);
  auto yy = zn::to_xtensor(zy);
  CHECK(yy.data() == y.data());
  yy(1, 0) = -3.0;
  CHECK(y(1, 0) == -3.0);
  CHECK(zy(1, 0) == -3.0);
}

#endif  // __has_include(<xtensor/xtensor.hpp>)
