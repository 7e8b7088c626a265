// softmax and log_softmax against a plain double-precision loop along every axis, with large
// inputs, integer and 16-bit inputs, expression and barrier inputs, SIMD vs scalar, threads.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>
#include <zenith/zenith.hpp>

#include "along_axis_reference.hpp"

namespace zn = zenith;

namespace {

using namespace along_axis;

// Softmax (or its log) along axis of row-major data, in double, the textbook stable way.
std::vector<double> ref_softmax(std::vector<double> const& x, zn::shape const& s, std::size_t axis,
                                bool log) {
  std::vector<double> y(x.size());
  for_each_slice(s, axis, [&](std::size_t n, auto at) {
    double mx = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) mx = std::max(mx, x[at(i)]);
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += std::exp(x[at(i)] - mx);
    for (std::size_t i = 0; i < n; ++i)
      y[at(i)] = log ? x[at(i)] - mx - std::log(sum) : std::exp(x[at(i)] - mx) / sum;
  });
  return y;
}

// Every slice along axis sums to 1.
template <class T>
void check_sums_to_one(zn::array<T> const& y, std::size_t axis, double tol) {
  for_each_slice(y.shape(), axis, [&](std::size_t n, auto at) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += double(y.data()[at(i)]);
    REQUIRE(sum == Approx(1.0).epsilon(tol));
  });
}

template <class T>
void check_all_axes(zn::shape s, double tol, float lo = -3.f, float hi = 3.f) {
  auto x = random_array<T>(s, unsigned(s.numel()), lo, hi);
  auto xv = values(x);
  int r = int(s.size());
  for (int axis = -r; axis < r; ++axis) {
    std::size_t a = std::size_t(axis < 0 ? axis + r : axis);
    INFO("shape " << s.str() << " axis " << axis);
    zn::array<T> y = zn::softmax(x, axis);
    REQUIRE(y.shape() == s);
    check_against_ref(y, ref_softmax(xv, s, a, false), tol);
    check_sums_to_one(y, a, tol * 10);
    zn::array<T> ly = zn::log_softmax(x, axis);
    check_against_ref(ly, ref_softmax(xv, s, a, true), tol);
  }
  CHECK(values(x) == xv);  // normalized in the output buffer, never in the input
}

}  // namespace

TEST_CASE("softmax and log_softmax along every axis match a double loop", "[softmax]") {
  for (zn::shape s : {zn::shape{7, 13}, zn::shape{3, 4, 5}, zn::shape{1}, zn::shape{13},
                      zn::shape{2, 300, 3}, zn::shape{3, 2, 1000}}) {
    check_all_axes<float>(s, 2e-6);
    check_all_axes<double>(s, 1e-13);
  }
  // The default axis is the last.
  auto x = random_array<float>({3, 4, 5}, 1);
  zn::array<float> a = zn::softmax(x), b = zn::softmax(x, 2);
  CHECK(values(a) == values(b));
}

TEST_CASE("softmax is stable for large inputs", "[softmax]") {
  check_all_axes<float>({7, 13}, 2e-6, 990.f, 1010.f);
  check_all_axes<double>({3, 4, 5}, 1e-12, -1010.f, -990.f);
  // A spread that overflows exp unless each slice's own maximum is subtracted.
  check_all_axes<float>({3, 4, 5}, 2e-6, -200.f, 200.f);
  check_all_axes<float>({7, 13}, 2e-6, -200.f, 200.f);
  check_all_axes<float>({5, 67}, 2e-6, -200.f, 200.f);  // rows longer than a SIMD batch
  check_all_axes<double>({3, 70}, 1e-12, -1000.f, 1000.f);
  // Tents peaking mid-slice (rows of 67: the peak is in neither the first SIMD batch nor the
  // tail), far above the rest: only the true maximum keeps exp finite.
  {
    std::vector<float> v(5 * 67);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = 500.f - 15.f * std::abs(float(i % 67) - float(37 + i / 67));
    zn::array<float> ramp({5, 67}, v);
    zn::array<float> ramp_t = zn::transpose(ramp);
    for (auto const& [x, axis] : {std::pair{ramp, 1}, std::pair{ramp_t, 0}}) {
      zn::array<float> y = zn::softmax(x, axis), ly = zn::log_softmax(x, axis);
      check_against_ref(y, ref_softmax(values(x), x.shape(), std::size_t(axis), false), 2e-6);
      check_against_ref(ly, ref_softmax(values(x), x.shape(), std::size_t(axis), true), 2e-6);
    }
  }
  zn::array<float> x({2, 3}, {1000.f, 1000.f, 1000.f, 0.f, -1000.f, 1000.f});
  zn::array<float> y = zn::softmax(x);
  for (int j = 0; j < 3; ++j) CHECK(y(0, j) == Approx(1.0 / 3));
  CHECK(y(1, 0) == 0.f);
  CHECK(y(1, 1) == 0.f);
  CHECK(y(1, 2) == 1.f);
  zn::array<float> ly = zn::log_softmax(x);
  CHECK(ly(1, 1) == Approx(-2000.f));  // finite, where log(softmax) would be -inf
  CHECK(ly(1, 2) == 0.f);
  // -inf entries get probability zero.
  float inf = std::numeric_limits<float>::infinity();
  zn::array<float> m({4}, {0.f, -inf, 0.f, -inf});
  zn::array<float> pm = zn::softmax(m);
  CHECK(pm(0) == 0.5f);
  CHECK(pm(1) == 0.f);
}

TEST_CASE("softmax element types and inputs", "[softmax]") {
  // Integers and bools give float32.
  zn::array<std::int32_t> xi({2, 3}, {1, 2, 3, -4, 0, 4});
  auto si = zn::softmax(xi, 0);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(si)>, float>);
  zn::array<float> yi = si;
  check_against_ref(yi, ref_softmax(values(xi), xi.shape(), 0, false), 1e-6);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::log_softmax(xi > 0))>, float>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::softmax(xi * 1.0))>, float>);

  // bfloat16 / float16 compute in float and round once.
  auto xb = random_array<zn::bfloat16>({5, 7}, 2);
  zn::array<zn::bfloat16> yb = zn::softmax(xb, 1);
  check_against_ref(yb, ref_softmax(values(xb), xb.shape(), 1, false), 1e-2);
  auto xh = random_array<zn::float16>({5, 7}, 3);
  zn::array<zn::float16> yh = zn::log_softmax(xh, 0);
  check_against_ref(yh, ref_softmax(values(xh), xh.shape(), 0, true), 2e-3);

  // An expression input is evaluated once, straight into the output.
  auto x = random_array<float>({7, 13}, 4);
  zn::array<float> x2 = x * 2.f - 1.f;
  auto before = zn::cpu_memory_stats().allocations;
  zn::array<float> y = zn::softmax(x * 2.f - 1.f, 0);
  CHECK(zn::cpu_memory_stats().allocations - before == 1);
  check_against_ref(y, ref_softmax(values(x2), x2.shape(), 0, false), 2e-6);

  // A barrier input, and softmax inside a bigger expression.
  auto w = random_array<float>({13, 6}, 5);
  zn::array<float> xw = zn::matmul(x, w);
  zn::array<float> z = zn::log_softmax(zn::matmul(x, w)) * 2.f + 1.f;
  auto ref = ref_softmax(values(xw), xw.shape(), 1, true);
  for (auto& v : ref) v = v * 2 + 1;
  check_against_ref(z, ref, 2e-6);

  // Empty input.
  zn::array<float> e = zn::softmax(zn::zeros<float>({0, 5}));
  CHECK(e.shape() == zn::shape{0, 5});
}

TEST_CASE("softmax SIMD and scalar paths agree; threaded rows match", "[softmax]") {
  auto x = random_array<float>({64, 1001}, 6);  // above the threading threshold
  auto xv = values(x);
  for (int axis : {0, 1}) {
    zn::array<float> v = zn::softmax(x, axis), lv = zn::log_softmax(x, axis);
    zn::set_simd_enabled(false);
    zn::array<float> s = zn::softmax(x, axis), ls = zn::log_softmax(x, axis);
    zn::set_simd_enabled(true);
    check_against_ref(v, ref_softmax(xv, x.shape(), std::size_t(axis), false), 2e-6);
    check_against_ref(lv, ref_softmax(xv, x.shape(), std::size_t(axis), true), 2e-6);
    check_against_ref(s, values(v), 2e-6);
    check_against_ref(ls, values(lv), 2e-6);
    // Bitwise the same on a second run (fixed split over the pool).
    zn::array<float> again = zn::softmax(x, axis);
    CHECK(values(again) == values(v));
  }
}

TEST_CASE("softmax errors", "[softmax][errors]") {
  auto x = zn::zeros<float>({2, 3});
  CHECK_THROWS_AS(zn::softmax(x, 2), zn::shape_error);
  CHECK_THROWS_WITH(zn::softmax(x, -3), Catch::Contains("softmax") && Catch::Contains("axis -3"));
  CHECK_THROWS_WITH(zn::log_softmax(x, 5), Catch::Contains("log_softmax"));
}
