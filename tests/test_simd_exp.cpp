// The SIMD exp (expr/simd_exp.hpp) against std::exp: within 1 ulp over the whole range of
// finite results, subnormal ones included, on every batch width this build has, and exact at
// the special values.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <zenith/expr/simd_exp.hpp>

namespace {

// Distance in units in the last place between two finite numbers of one sign (or both zero).
template <class T>
std::int64_t ulps(T a, T b) {
  using I = std::conditional_t<sizeof(T) == 8, std::int64_t, std::int32_t>;
  if (a == b) return 0;
  I ia, ib;
  std::memcpy(&ia, &a, sizeof(T));
  std::memcpy(&ib, &b, sizeof(T));
  if ((ia < 0) != (ib < 0)) return std::numeric_limits<std::int64_t>::max();
  return ia > ib ? std::int64_t(ia) - ib : std::int64_t(ib) - ia;
}

template <class T, class A>
T exp_lane0(T x) {
  using B = xsimd::batch<T, A>;
  alignas(64) T out[B::size];
  zenith::detail::simd_exp(B(x)).store_aligned(out);
  return out[0];
}

// The worst ulp distance over n random inputs in [lo, hi], every lane of the batch used.
template <class T, class A>
std::int64_t worst_ulps(double lo, double hi, int n, unsigned seed) {
  using B = xsimd::batch<T, A>;
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::int64_t worst = 0;
  for (int i = 0; i < n; i += int(B::size)) {
    alignas(64) T x[B::size], y[B::size];
    for (auto& v : x) v = T(d(gen));
    zenith::detail::simd_exp(B::load_aligned(x)).store_aligned(y);
    for (std::size_t l = 0; l < B::size; ++l) {
      std::int64_t const u = ulps(y[l], std::exp(x[l]));
      if (u > worst) {
        worst = u;
        INFO("exp(" << x[l] << ") = " << y[l] << ", std::exp " << std::exp(x[l]));
        CHECK(u <= 1);
      }
    }
  }
  return worst;
}

template <class A>
void check_arch() {
  INFO("arch " << A::name());
  // Double: results from the smallest subnormal (x = -745.1) to the largest finite (709.78).
  CHECK(worst_ulps<double, A>(-745.1, 709.78, 200000, 1) <= 1);
  CHECK(worst_ulps<double, A>(-1, 1, 200000, 2) <= 1);
  CHECK(worst_ulps<double, A>(-745.1, -700, 50000, 3) <= 1);  // subnormal results
  CHECK(worst_ulps<float, A>(-103.9f, 88.7f, 200000, 4) <= 1);
  CHECK(worst_ulps<float, A>(-1, 1, 200000, 5) <= 1);

  double const inf = std::numeric_limits<double>::infinity();
  CHECK(exp_lane0<double, A>(0.0) == 1.0);
  CHECK(exp_lane0<double, A>(-0.0) == 1.0);
  CHECK(ulps(exp_lane0<double, A>(1.0), std::exp(1.0)) <= 1);
  CHECK(exp_lane0<double, A>(709.79) == inf);
  CHECK(exp_lane0<double, A>(1e300) == inf);
  CHECK(exp_lane0<double, A>(inf) == inf);
  CHECK(exp_lane0<double, A>(-745.2) == 0.0);
  CHECK(exp_lane0<double, A>(-1e300) == 0.0);
  CHECK(exp_lane0<double, A>(-inf) == 0.0);
  CHECK(std::isnan(exp_lane0<double, A>(std::nan(""))));
  CHECK(exp_lane0<float, A>(88.8f) == std::numeric_limits<float>::infinity());
  CHECK(exp_lane0<float, A>(-104.0f) == 0.0f);
  CHECK(exp_lane0<float, A>(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(exp_lane0<float, A>(std::nanf(""))));

  // A NaN lane stays NaN and leaves its neighbours alone.
  using B = xsimd::batch<double, A>;
  alignas(64) double in[B::size], out[B::size];
  for (std::size_t l = 0; l < B::size; ++l) in[l] = double(l) - 1.0;
  in[B::size - 1] = std::nan("");
  zenith::detail::simd_exp(B::load_aligned(in)).store_aligned(out);
  for (std::size_t l = 0; l + 1 < B::size; ++l) CHECK(out[l] == exp_lane0<double, A>(in[l]));
  CHECK(std::isnan(out[B::size - 1]));
}

// Two batch widths give the same bits: the scaling by 2^k (one vscalefpd on AVX-512, two
// integer-built factors elsewhere) rounds once either way, and the polynomial is the same.
template <class T, class A1, class A2>
void check_same_bits(double lo, double hi, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  int differ = 0;
  for (int i = 0; i < 100000; ++i) {
    T const x = T(d(gen));
    T const a = exp_lane0<T, A1>(x), b = exp_lane0<T, A2>(x);
    if (std::memcmp(&a, &b, sizeof(T)) != 0 && ++differ == 1)
      FAIL_CHECK("exp(" << x << "): " << A1::name() << " " << a << ", " << A2::name() << " " << b);
  }
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("SIMD exp is within 1 ulp of std::exp on every batch width", "[elementwise][exp]") {
  check_arch<xsimd::default_arch>();
#if XSIMD_WITH_AVX2
  check_arch<xsimd::avx2>();
#endif
#if XSIMD_WITH_SSE4_2
  check_arch<xsimd::sse4_2>();
#endif
#if XSIMD_WITH_AVX512F
  check_arch<xsimd::avx512f>();
#endif
}

#if XSIMD_WITH_AVX512F && XSIMD_WITH_AVX2
TEST_CASE("SIMD exp on AVX-512 gives AVX2's bits", "[elementwise][exp]") {
  check_same_bits<double, xsimd::avx512f, xsimd::avx2>(-745.1, 709.78, 11);
  check_same_bits<double, xsimd::avx512f, xsimd::avx2>(-745.2, -708, 12);  // subnormal results
  check_same_bits<float, xsimd::avx512f, xsimd::avx2>(-103.9, 88.7, 13);
  check_same_bits<float, xsimd::avx512f, xsimd::avx2>(-104, -87, 14);  // subnormal results
}
#endif
