#pragma once
// What the CPU kernels that normalize slices along one axis in place (softmax, layer_norm)
// share: the input evaluated into a buffer they may overwrite, lane helpers that run the same
// code on a scalar or an xsimd batch, and the walk over the slices split across the thread pool.
//
// The last axis (contiguous rows) is vectorized along the row; any other axis is vectorized
// across the contiguous columns after it, a block of columns at a time. Rows / column blocks are
// split across the pool in a fixed way above parallel_threshold(), so results are bitwise the
// same for a given thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>

// xsimd (its warnings silenced) before the other zenith headers
#include "../../expr/simd_exp.hpp"

#include "evaluate.hpp"
#include "thread_pool.hpp"

namespace zenith::detail {

// Evaluates e as T into a fresh array this code may overwrite (never a buffer shared with e).
template <element T, expression E>
array<T> overwritable_input(E const& e) {
  array<T> r = evaluate_untraced<T>(e);
  auto const& b = r.storage();
  if (b && b->owned() && b.use_count() == 1) return r;
  return evaluate_fresh<T>(r);  // a copy by the fused loop, which a recording keeps
}

// Lane helpers: the same code runs on a scalar C or an xsimd batch of C.
template <class C>
inline C lane_load(C const* p, C) {
  return *p;
}
template <class C, class A>
inline xsimd::batch<C, A> lane_load(C const* p, xsimd::batch<C, A>) {
  return xsimd::batch<C, A>::load_unaligned(p);
}
template <class C>
inline void lane_store(C* p, C v) {
  *p = v;
}
template <class C, class A>
inline void lane_store(C* p, xsimd::batch<C, A> const& v) {
  v.store_unaligned(p);
}
template <class C>
inline C lane_exp(C v) {
  return std::exp(v);
}
template <class C, class A>
inline xsimd::batch<C, A> lane_exp(xsimd::batch<C, A> const& v) {
  return detail::simd_exp(v);
}
template <class C>
inline C lane_max(C a, C b) {
  return a < b ? b : a;
}
template <class C, class A>
inline xsimd::batch<C, A> lane_max(xsimd::batch<C, A> const& a, xsimd::batch<C, A> const& b) {
  return xsimd::max(a, b);
}

// Calls f(j, lane) for j in [0, w): full batches first (when Simd), then scalars.
template <bool Simd, class C, class F>
inline void for_lanes(std::int64_t w, F&& f) {
  std::int64_t j = 0;
  if constexpr (Simd) {
    using B = xsimd::batch<C>;
    constexpr std::int64_t W = std::int64_t(B::size);
    for (; j + W <= w; j += W) f(j, B{});
  }
  for (; j < w; ++j) f(j, C{});
}

// The sum of f(j, lane) over j in [0, n): batches summed lane-wise, then across, then the tail.
template <bool Simd, class C, class F>
inline C sum_lanes(std::int64_t n, F&& f) {
  std::int64_t j = 0;
  C total = 0;
  if constexpr (Simd) {
    using B = xsimd::batch<C>;
    constexpr std::int64_t W = std::int64_t(B::size);
    B s(C(0));
    for (; j + W <= n; j += W) s += f(j, B{});
    total = xsimd::hadd(s);
  }
  for (; j < n; ++j) total += f(j, C{});
  return total;
}

inline constexpr std::int64_t column_block = 256;  // columns per unit for a non-last axis

// Walks the slices along axis of the contiguous array x of shape s: row(p, n) for each
// contiguous row of n (when axis is the last, or nothing follows it), cols(p, n, stride, w) for
// each block of w <= column_block columns x[i * stride + j] otherwise.
template <class C, class Row, class Cols>
void for_each_slice(C* x, zenith::shape const& s, std::size_t axis, Row&& row, Cols&& cols) {
  std::int64_t outer = 1, n = std::int64_t(s[axis]), inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= std::int64_t(s[i]);
  for (std::size_t i = axis + 1; i < s.size(); ++i) inner *= std::int64_t(s[i]);
  std::int64_t blocks = inner == 1 ? 1 : (inner + column_block - 1) / column_block;
  std::int64_t units = outer * blocks;
  auto run = [&](std::int64_t u0, std::int64_t u1) {
    for (std::int64_t u = u0; u < u1; ++u) {
      std::int64_t o = u / blocks, b = u % blocks;
      C* base = x + o * n * inner;
      if (inner == 1) {
        row(base, n);
      } else {
        std::int64_t j0 = b * column_block;
        cols(base + j0, n, inner, std::min(column_block, inner - j0));
      }
    }
  };
  std::size_t threads = thread_pool::instance().size();
  if (s.numel() < parallel_threshold() || threads == 1 || units == 1) {
    run(0, units);
    return;
  }
  std::int64_t chunks = std::min(units, std::int64_t(threads));
  std::int64_t per = (units + chunks - 1) / chunks;
  thread_pool::instance().parallel_for(std::size_t(chunks), [&](std::size_t c) {
    std::int64_t u0 = std::int64_t(c) * per;
    run(u0, std::min(units, u0 + per));
  });
}

}  // namespace zenith::detail
