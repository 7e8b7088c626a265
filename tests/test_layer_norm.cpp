// layer_norm against a plain double-precision loop along every axis, with large means, integer
// and 16-bit inputs, expression and barrier inputs, SIMD vs scalar, threads, and bad input.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>
#include <zenith/zenith.hpp>

#include "along_axis_reference.hpp"

namespace zn = zenith;

namespace {

using namespace along_axis;

// (x - mean) / sqrt(var + eps) along axis of row-major data, in double, the textbook way.
std::vector<double> ref_layer_norm(std::vector<double> const& x, zn::shape const& s,
                                   std::size_t axis, double eps) {
  std::vector<double> y(x.size());
  for_each_slice(s, axis, [&](std::size_t n, auto at) {
    double mu = 0, var = 0;
    for (std::size_t i = 0; i < n; ++i) mu += x[at(i)];
    mu /= double(n);
    for (std::size_t i = 0; i < n; ++i) var += (x[at(i)] - mu) * (x[at(i)] - mu);
    var /= double(n);
    for (std::size_t i = 0; i < n; ++i) y[at(i)] = (x[at(i)] - mu) / std::sqrt(var + eps);
  });
  return y;
}

template <class T>
void check_all_axes(zn::shape s, double tol, float lo = -3.f, float hi = 3.f) {
  auto x = random_array<T>(s, unsigned(s.numel()), lo, hi);
  auto xv = values(x);
  int r = int(s.size());
  for (int axis = -r; axis < r; ++axis) {
    std::size_t a = std::size_t(axis < 0 ? axis + r : axis);
    INFO("shape " << s.str() << " axis " << axis);
    zn::array<T> y = zn::layer_norm(x, axis);
    REQUIRE(y.shape() == s);
    check_against_ref(y, ref_layer_norm(xv, s, a, 1e-5), tol);
    zn::array<T> y2 = zn::layer_norm(x, axis, 0.5);
    check_against_ref(y2, ref_layer_norm(xv, s, a, 0.5), tol);
  }
  CHECK(values(x) == xv);  // normalized in the output buffer, never in the input
}

}  // namespace

TEST_CASE("layer_norm along every axis matches a double loop", "[layer_norm]") {
  for (zn::shape s : {zn::shape{7, 13}, zn::shape{3, 4, 5}, zn::shape{2}, zn::shape{13},
                      zn::shape{2, 300, 3}, zn::shape{3, 2, 1000}}) {
    check_all_axes<float>(s, 2e-5);
    check_all_axes<double>(s, 1e-12);
  }
  // The default axis is the last; a slice of one element normalizes to zero.
  auto x = random_array<float>({3, 4, 5}, 1);
  zn::array<float> a = zn::layer_norm(x), b = zn::layer_norm(x, 2);
  CHECK(values(a) == values(b));
  zn::array<double> one = zn::layer_norm(zn::array<double>({2, 1}, {5.0, -7.0}));
  CHECK(one(0, 0) == 0.0);
  CHECK(one(1, 0) == 0.0);
  // Each normalized slice has mean 0 and variance var / (var + eps).
  auto z = random_array<double>({4, 50}, 2);
  zn::array<double> yz = zn::layer_norm(z, 1, 1e-3);
  zn::array<double> mu = zn::mean(yz, 1), v = zn::var(yz, 1), vz = zn::var(z, 1);
  for (int i = 0; i < 4; ++i) {
    CHECK(std::abs(mu(i)) < 1e-14);
    CHECK(v(i) == Approx(vz(i) / (vz(i) + 1e-3)).epsilon(1e-12));
  }
}

TEST_CASE("layer_norm of slices with a large mean keeps its precision", "[layer_norm]") {
  // A one-pass E[x^2] - E[x]^2 would lose every digit of the variance here.
  check_all_axes<float>({5, 67}, 2e-3, 1000.f, 1001.f);
  check_all_axes<double>({3, 70}, 1e-9, 1e6f, 1e6f + 1.f);
  // Constant slices: zero variance, eps keeps the result finite (zero).
  zn::array<float> c = zn::layer_norm(zn::full<float>({3, 8}, 4.25f));
  for (float v : values(c)) CHECK(v == 0.f);
}

TEST_CASE("layer_norm element types and inputs", "[layer_norm]") {
  // Integers and bools give float32.
  zn::array<std::int32_t> xi({2, 3}, {1, 2, 3, -4, 0, 4});
  auto ni = zn::layer_norm(xi, 0);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(ni)>, float>);
  zn::array<float> yi = ni;
  check_against_ref(yi, ref_layer_norm(values(xi), xi.shape(), 0, 1e-5), 1e-5);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::layer_norm(xi > 0))>, float>);

  // bfloat16 / float16 compute in float and round once.
  auto xb = random_array<zn::bfloat16>({5, 7}, 2);
  zn::array<zn::bfloat16> yb = zn::layer_norm(xb, 1);
  check_against_ref(yb, ref_layer_norm(values(xb), xb.shape(), 1, 1e-5), 1e-2);
  auto xh = random_array<zn::float16>({5, 7}, 3);
  zn::array<zn::float16> yh = zn::layer_norm(xh, 0);
  check_against_ref(yh, ref_layer_norm(values(xh), xh.shape(), 0, 1e-5), 2e-3);

  // An expression input is evaluated once, straight into the output; scale and shift fuse into
  // the pass that reads the result.
  auto x = random_array<float>({7, 13}, 4);
  auto gamma = random_array<float>({13}, 5), beta = random_array<float>({13}, 6);
  zn::array<float> x2 = x * 2.f - 1.f;
  auto before = zn::cpu_memory_stats().allocations;
  zn::array<float> y = zn::layer_norm(x * 2.f - 1.f);
  CHECK(zn::cpu_memory_stats().allocations - before == 1);
  check_against_ref(y, ref_layer_norm(values(x2), x2.shape(), 1, 1e-5), 2e-5);
  zn::array<float> affine = zn::layer_norm(x * 2.f - 1.f) * gamma + beta;
  auto want = ref_layer_norm(values(x2), x2.shape(), 1, 1e-5);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = want[i] * gamma(i % 13) + beta(i % 13);
  check_against_ref(affine, want, 2e-5);

  // A barrier input, and layer_norm inside a bigger expression.
  auto w = random_array<float>({13, 6}, 7);
  zn::array<float> xw = zn::matmul(x, w);
  zn::array<float> z = zn::tanh(zn::layer_norm(zn::matmul(x, w), 0));
  auto ref = ref_layer_norm(values(xw), xw.shape(), 0, 1e-5);
  for (auto& v : ref) v = std::tanh(v);
  check_against_ref(z, ref, 2e-5);

  // Empty input.
  zn::array<float> e = zn::layer_norm(zn::zeros<float>({0, 5}));
  CHECK(e.shape() == zn::shape{0, 5});
}

TEST_CASE("layer_norm SIMD and scalar paths agree; threaded rows match", "[layer_norm]") {
  auto x = random_array<float>({64, 1001}, 8);  // above the threading threshold
  auto xv = values(x);
  for (int axis : {0, 1}) {
    zn::array<float> v = zn::layer_norm(x, axis);
    zn::set_simd_enabled(false);
    zn::array<float> s = zn::layer_norm(x, axis);
    zn::set_simd_enabled(true);
    check_against_ref(v, ref_layer_norm(xv, x.shape(), std::size_t(axis), 1e-5), 2e-5);
    check_against_ref(s, values(v), 2e-5);
    // Bitwise the same on a second run (fixed split over the pool).
    zn::array<float> again = zn::layer_norm(x, axis);
    CHECK(values(again) == values(v));
  }
}

TEST_CASE("layer_norm rejects a bad axis or eps with the op and shape named", "[layer_norm]") {
  auto x = random_array<float>({3, 4}, 9);
  CHECK_THROWS_AS(zn::layer_norm(x, 2), zn::shape_error);
  CHECK_THROWS_WITH(zn::layer_norm(x, 1, 0.0), Catch::Contains("layer_norm") &&
                                                   Catch::Contains("eps") &&
                                                   Catch::Contains("(3, 4)"));
  CHECK_THROWS_AS(zn::layer_norm(x, 1, -1e-5), zn::value_error);
  CHECK_THROWS_AS(zn::layer_norm(x, 1, std::nan("")), zn::value_error);
  CHECK_THROWS_WITH(zn::layer_norm(zn::array<float>({}, {1.f})), Catch::Contains("layer_norm"));
}
