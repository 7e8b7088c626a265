#pragma once
// exp on xsimd batches of float or double: the SIMD form of ops::exp (and of what is built on
// it: sigmoid, softmax, logsumexp).
//
// xsimd's exp (cephes) evaluates a rational function, a vector division per batch, and turns
// k = round(x / ln 2) into integers with a float-to-int conversion, which AVX2 lacks for
// doubles (xsimd converts element by element) and which GCC splits into halves on AVX-512 (two
// stores read back as one vector: a store-forwarding stall per batch). On an AVX-512 host that
// came to 2.2 ns per double. Here the conversion is the "shifter" trick: adding 1.5 * 2^52 to
// x / ln 2 rounds it to an integer that sits in the low bits of the sum, read back through a
// bit cast; e^r on |r| <= ln 2 / 2 is a polynomial (degree 11 for double, 6 for float), so
// there is no division. The result is within 1 ulp of the correctly rounded value
// (tests/test_simd_exp.cpp checks it against std::exp over the whole range, subnormal results
// included).
//
// AVX-512 scales by 2^k in one instruction (vscalefpd: one rounding, subnormal and infinite
// results included) and keeps NaN through the clamp, in place of the integer arithmetic that
// builds 2^k from two factors and the final NaN select: 18 instructions per batch instead of
// 30, and exp is throughput-bound (log_sum_exp at N = 8192 spends three quarters of its time
// here; bench/RESULTS.md).
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include "simd_headers.hpp"

namespace zenith::detail {

template <class T>
struct exp_constants;
template <>
struct exp_constants<double> {
  using bits = std::int64_t;
  static constexpr int mantissa = 52, bias = 1023;
  // q(r) ~ (e^r - 1 - r) / r^2 on |r| <= ln 2 / 2, highest power first: a Chebyshev fit
  // (mpmath.chebyfit, 50 digits), within 1.1e-16 of q, so e^r within 0.1 ulp before rounding.
  static constexpr double q[] = {2.5100569275813683e-08, 2.7620327428268239e-07,
                                 2.7557268072890098e-06, 2.4801520792572694e-05,
                                 0.00019841269863303223, 0.0013888888917538296,
                                 0.0083333333333300112,  0.041666666666623477,
                                 0.16666666666666669,    0.50000000000000011};
  static constexpr double shifter = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr double log2e = 1.4426950408889634;
  // ln 2 in two parts; the first has 21 trailing zero bits, so k * ln2_hi is exact.
  static constexpr double ln2_hi = 0.693147180369123816490;
  static constexpr double ln2_lo = 1.90821492927058770002e-10;
  // Beyond these exp is inf, and 0 (below the smallest subnormal); k stays where 2^k is two
  // normal factors.
  static constexpr double lo = -746.0, hi = 710.0;
};
template <>
struct exp_constants<float> {
  using bits = std::int32_t;
  static constexpr int mantissa = 23, bias = 127;
  static constexpr float q[] = {0.00139263256f, 0.00836329275f, 0.0416665538f, 0.166665763f,
                                0.5f};           // within 6.6e-8 of q: e^r within 0.13 ulp
  static constexpr float shifter = 12582912.0f;  // 1.5 * 2^23
  static constexpr float log2e = 1.44269504f;
  static constexpr float ln2_hi = 0.693145751953125f;  // 12 trailing zero bits
  static constexpr float ln2_lo = 1.42860676533018e-06f;
  static constexpr float lo = -104.0f, hi = 89.0f;
};

#if XSIMD_WITH_AVX512F
template <class A>
inline constexpr bool has_scalef = std::is_base_of_v<xsimd::avx512f, A>;
#else
template <class A>
inline constexpr bool has_scalef = false;
#endif

// min(hi, max(lo, x)). Where the arch scales by 2^k in one instruction, a NaN x stays NaN
// (x86's max and min return their second operand when either is NaN) and carries through to the
// result; elsewhere it becomes lo and simd_exp selects x at the end.
template <class T, class A>
[[gnu::always_inline]] inline xsimd::batch<T, A> clamp_keeping_nan(xsimd::batch<T, A> const& x,
                                                                   xsimd::batch<T, A> const& lo,
                                                                   xsimd::batch<T, A> const& hi) {
#if XSIMD_WITH_AVX512F
  if constexpr (has_scalef<A>) {
    if constexpr (std::is_same_v<T, double>)
      return _mm512_min_pd(hi, _mm512_max_pd(lo, x));
    else
      return _mm512_min_ps(hi, _mm512_max_ps(lo, x));
  } else
#endif
    return xsimd::min(xsimd::max(x, lo), hi);
}

// p * 2^k for integral k (as a floating-point batch), rounded once; only where has_scalef<A>.
template <class T, class A>
[[gnu::always_inline]] inline xsimd::batch<T, A> scale_by_pow2(xsimd::batch<T, A> const& p,
                                                               xsimd::batch<T, A> const& k) {
  static_assert(has_scalef<A>, "scale_by_pow2 needs AVX-512");
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_same_v<T, double>)
    return _mm512_scalef_pd(p, k);
  else
    return _mm512_scalef_ps(p, k);
#else
  return p * k;
#endif
}

// Inlined where it is used, as xsimd's functions are: called, it took a batch through memory
// and a call per batch.
template <class T, class A>
[[gnu::always_inline]] inline xsimd::batch<T, A> simd_exp(xsimd::batch<T, A> const& x) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  using B = xsimd::batch<T, A>;
  using K = exp_constants<T>;
  B const xc = clamp_keeping_nan(x, B(K::lo), B(K::hi));
  B const t = xsimd::fma(xc, B(K::log2e), B(K::shifter));  // shifter + round(x / ln 2)
  B const kf = t - B(K::shifter);
  B r = xsimd::fnma(kf, B(K::ln2_hi), xc);
  r = xsimd::fnma(kf, B(K::ln2_lo), r);
  // e^r = 1 + r + r^2 q(r), q by Horner.
  constexpr std::size_t terms = std::size(K::q);
  B q(K::q[0]);
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    ((q = xsimd::fma(q, r, B(K::q[J + 1]))), ...);
  }
  (std::make_index_sequence<terms - 1>{});
  B const p = xsimd::fma(q, r * r, r) + B(T(1));
  if constexpr (has_scalef<A>) {
    return scale_by_pow2(p, kf);  // a NaN x gave NaN kf and p: NaN out
  } else {
    using I = xsimd::batch<typename K::bits, A>;
    // 2^k as two normal factors 2^k1 2^k2, so that results down to the subnormals round once.
    // (k1 = round(k / 2) by the same trick: AVX2 has no arithmetic shift of 64-bit lanes.)
    I const bits_shifter = xsimd::bitwise_cast<I>(B(K::shifter));
    I const k = xsimd::bitwise_cast<I>(t) - bits_shifter;
    I const k1 = xsimd::bitwise_cast<I>(xsimd::fma(kf, B(T(0.5)), B(K::shifter))) - bits_shifter;
    I const k2 = k - k1;
    B const s1 = xsimd::bitwise_cast<B>((k1 + I(K::bias)) << K::mantissa);
    B const s2 = xsimd::bitwise_cast<B>((k2 + I(K::bias)) << K::mantissa);
    B const e = p * s1 * s2;
    return xsimd::select(xsimd::isnan(x), x, e);  // NaN in, NaN out
  }
}

}  // namespace zenith::detail
