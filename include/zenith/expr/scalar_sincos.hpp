#pragma once
// sin(x) and cos(x) of one double together, as inline code: xsimd's sincos (one range
// reduction, two polynomials; within an ulp or so of libm) on a two-lane batch, of which lane 0
// is used.
//
// Forward-mode derivative scalars use it (ops::value_and_partial, autodiff/dual.hpp): sin and
// cos of a dual each need both values, and a libm call in the middle of fixed-size derivative
// code makes the compiler spill every vector register around it (all are call-clobbered). For
// the 7-joint arm Jacobian (bench/fk_jacobian) the inline form took 253 -> 205 ns, where a
// hand-written straight-line reduction (no branch, so sin and cos share it) only reached 250:
// xsimd's branch for |x| <= pi/4 skips the reduction that joint angles rarely need.
#include <cmath>
#include <type_traits>

#include "simd_headers.hpp"

namespace zenith::detail {

struct sin_cos {
  double sin, cos;
};

// A two-lane batch of doubles on this target, or void.
using double_pair_batch = xsimd::make_sized_batch_t<double, 2>;

[[gnu::always_inline, gnu::flatten]] inline sin_cos scalar_sincos(double x) {
  if constexpr (std::is_void_v<double_pair_batch>) {
    return {std::sin(x), std::cos(x)};
  } else {
    auto const [s, c] = xsimd::sincos(double_pair_batch(x));
    return {s.get(0), c.get(0)};
  }
}

}  // namespace zenith::detail
