#pragma once
// sin(x) and cos(x) of one double together, as inline straight-line code: one range reduction
// and two polynomials (fdlibm's kernels), within 1.5 ulps of the exact values (libm: 0.52).
//
// Forward-mode derivative scalars use it (ops::value_and_partial, autodiff/dual.hpp): sin and
// cos of a dual each need both values. A libm call in the middle of fixed-size derivative code
// makes the compiler spill every vector register around it (all are call-clobbered). Straight-
// line code has a second use: the sin and the cos of one angle, written as two calls the
// textbook way, compute it once (the compiler merges the two copies, which it cannot do for
// code with branches, such as xsimd's sincos). Arguments beyond 2^20 pi / 2, inf and NaN take
// libm's sin and cos on a branch that is never taken for joint angles.
#include <bit>
#include <cmath>
#include <cstdint>

namespace zenith::detail {

struct sin_cos {
  double sin, cos;
};

[[gnu::always_inline]] inline sin_cos scalar_sincos(double x) {
  // k = nearest integer to x / (pi / 2); r = x - k pi / 2 with pi / 2 in three parts (the
  // first product is exact for |k| < 2^20, the other two add the bits it lacks).
  constexpr double two_over_pi = 0x1.45f306dc9c883p-1;
  constexpr double pio2_1 = 0x1.921fb54442d18p0, pio2_2 = 0x1.1a62633145c07p-54,
                   pio2_3 = -0x1.f1976b7ed8fbcp-110;
  bool const in_range = std::fabs(x) <= 0x1.921fb54442d18p20;  // |k| < 2^20; false for NaN
  double const k = std::nearbyint(x * two_over_pi);
  double r = std::fma(-k, pio2_1, x);
  r = std::fma(-k, pio2_2, r);
  r = std::fma(-k, pio2_3, r);
  // fdlibm's __kernel_sin and __kernel_cos on |r| <= pi / 4 (no tail term).
  double const z = r * r;
  double const ps = 8.33333333332248946124e-03 +
                    z * (-1.98412698298579493134e-04 +
                         z * (2.75573137070700676789e-06 +
                              z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)));
  double const s = r + (z * r) * (-1.66666666666666324348e-01 + z * ps);
  double const pc =
      z * (4.16666666666666019037e-02 +
           z * (-1.38888888888741095749e-03 +
                z * (2.48015872894767294178e-05 +
                     z * (-2.75573143513906633035e-07 +
                          z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))));
  double const hz = 0.5 * z;
  double const w = 1.0 - hz;
  double const c = w + (((1.0 - w) - hz) + z * pc);
  // The quadrant k mod 4: sin(x) = s, c, -s, -c and cos(x) = c, -s, -c, s.
  // (k converted only where it fits: out of range, inf or NaN it would be undefined)
  auto const n = static_cast<std::uint64_t>(static_cast<std::int64_t>(in_range ? k : 0.0));
  bool const swap = n & 1;
  std::uint64_t const sin_sign = (n & 2) << 62, cos_sign = ((n + 1) & 2) << 62;
  double const sv = std::bit_cast<double>(std::bit_cast<std::uint64_t>(swap ? c : s) ^ sin_sign);
  double const cv = std::bit_cast<double>(std::bit_cast<std::uint64_t>(swap ? s : c) ^ cos_sign);
  if (__builtin_expect(!in_range, 0)) return {std::sin(x), std::cos(x)};
  return {x == 0 ? x : sv, cv};  // sin(-0) = -0 (the reduction gives +0)
}

}  // namespace zenith::detail
