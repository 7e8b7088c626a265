#pragma once
// The CPU kernel of layer_norm_node (expr/layer_norm.hpp). The input is evaluated once, in one
// fused pass, straight into the output buffer; each slice along the axis is then normalized in
// place: a mean pass, a pass summing squared deviations from it (two passes, so a large mean
// does not cancel the variance away), and a scale pass. Rows along the last axis are vectorized
// along the row, other axes across the columns after it (along_axis.hpp). bfloat16 / float16
// compute in float.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../../expr/layer_norm.hpp"
#include "along_axis.hpp"
#include "evaluate.hpp"

namespace zenith {

namespace detail {

// One contiguous row x[0, n) along the last axis.
template <bool Simd, class C>
void layer_norm_row(C* x, std::int64_t n, C eps) {
  C mu = sum_lanes<Simd, C>(n, [&](std::int64_t j, auto v) { return lane_load(x + j, v); }) / C(n);
  C ss = sum_lanes<Simd, C>(n, [&](std::int64_t j, auto v) {
    using V = decltype(v);
    V d = lane_load(x + j, v) - V(mu);
    return V(d * d);
  });
  C r = C(1) / std::sqrt(ss / C(n) + eps);
  for_lanes<Simd, C>(n, [&](std::int64_t j, auto v) {
    using V = decltype(v);
    lane_store(x + j, V(V(lane_load(x + j, v) - V(mu)) * V(r)));
  });
}

// Columns [0, w) of an (n x stride) row-major block: x[i * stride + j], normalized over i.
template <bool Simd, class C>
void layer_norm_cols(C* x, std::int64_t n, std::int64_t stride, std::int64_t w, C eps) {
  alignas(64) C mu[column_block], r[column_block];
  for_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
    using V = decltype(v);
    V s = lane_load(x + j, v);
    for (std::int64_t i = 1; i < n; ++i) s += lane_load(x + i * stride + j, v);
    lane_store(mu + j, V(s / V(C(n))));
  });
  for_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
    using V = decltype(v);
    V m = lane_load(mu + j, v), ss(C(0));
    for (std::int64_t i = 0; i < n; ++i) {
      V d = lane_load(x + i * stride + j, v) - m;
      ss += d * d;
    }
    lane_store(r + j, ss);
  });
  for (std::int64_t j = 0; j < w; ++j) r[j] = C(1) / std::sqrt(r[j] / C(n) + eps);  // per column
  for (std::int64_t i = 0; i < n; ++i) {
    C* row = x + i * stride;
    for_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
      using V = decltype(v);
      lane_store(row + j, V(V(lane_load(row + j, v) - lane_load(mu + j, v)) * lane_load(r + j, v)));
    });
  }
}

// layer_norm in place over one axis: what layer_norm_inplace runs, and what a recording keeps
// of it (core/recording.hpp).
template <class C>
struct layer_norm_step {
  C* x;
  zenith::shape s;
  std::size_t axis;
  C eps;
  template <bool Simd>
  void run_with() {
    C e = eps;
    for_each_slice(
        x, s, axis, [e](C* row, std::int64_t n) { layer_norm_row<Simd>(row, n, e); },
        [e](C* p, std::int64_t n, std::int64_t stride, std::int64_t w) {
          layer_norm_cols<Simd>(p, n, stride, w, e);
        });
  }
  void run() {
    if (simd_enabled())
      run_with<true>();
    else
      run_with<false>();
  }
  void pointers(pointer_list& l) { l.writes(x); }
};

template <class C>
void layer_norm_inplace(C* x, zenith::shape const& s, std::size_t axis, double eps) {
  if (s.numel() == 0) return;
  layer_norm_step<C> step{x, s, axis, C(eps)};
  run_step(step);
}

}  // namespace detail

// The layer_norm barrier: found by ADL from the evaluator, returns a fresh array.
template <class E>
array<value_t<layer_norm_node<E>>> eval_barrier(layer_norm_node<E> const& node) {
  using R = value_t<layer_norm_node<E>>;
  using C = compute_t<R>;
  array<C> buf = detail::overwritable_input<C>(node.input());
  detail::layer_norm_inplace(buf.data(), buf.shape(), node.axis, node.eps);
  if constexpr (std::is_same_v<R, C>)
    return buf;
  else
    return detail::evaluate_untraced<R>(buf);
}

}  // namespace zenith
