#pragma once
// The CPU kernel of softmax_node (expr/softmax.hpp). The input is evaluated once, in one fused
// pass, straight into the output buffer; each slice along the axis is then normalized in place:
//   max pass, exp(x - max) pass (stored for softmax, only summed for log_softmax), scale pass.
// Rows along the last axis are vectorized along the row, other axes across the columns after it
// (along_axis.hpp). bfloat16 / float16 compute in float.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

// xsimd (its warnings silenced) before the other zenith headers
#include "../../expr/simd_exp.hpp"

#include "../../expr/softmax.hpp"
#include "along_axis.hpp"
#include "evaluate.hpp"

namespace zenith {

namespace detail {

// One contiguous row x[0, n) along the last axis.
template <bool Log, bool Simd, class C>
void softmax_row(C* x, std::int64_t n) {
  using B = xsimd::batch<C>;
  constexpr std::int64_t W = std::int64_t(B::size);
  C mx = -std::numeric_limits<C>::infinity();
  std::int64_t j = 0;
  if constexpr (Simd) {
    if (n >= W) {
      B m = B::load_unaligned(x);
      for (j = W; j + W <= n; j += W) m = xsimd::max(m, B::load_unaligned(x + j));
      alignas(64) C t[W];
      m.store_aligned(t);
      for (std::int64_t i = 0; i < W; ++i) mx = lane_max(mx, t[i]);
    }
  }
  for (; j < n; ++j) mx = lane_max(mx, x[j]);

  C sum = 0;
  j = 0;
  if constexpr (Simd) {
    B s(C(0)), bm(mx);
    for (; j + W <= n; j += W) {
      B e = detail::simd_exp(B::load_unaligned(x + j) - bm);
      if constexpr (!Log) e.store_unaligned(x + j);
      s += e;
    }
    sum = xsimd::hadd(s);
  }
  for (; j < n; ++j) {
    C e = std::exp(x[j] - mx);
    if constexpr (!Log) x[j] = e;
    sum += e;
  }

  if constexpr (Log) {
    C ls = std::log(sum);
    for_lanes<Simd, C>(n, [&](std::int64_t k, auto v) {
      using V = decltype(v);
      lane_store(x + k, V(lane_load(x + k, v) - V(mx)) - V(ls));
    });
  } else {
    for_lanes<Simd, C>(n, [&](std::int64_t k, auto v) {
      using V = decltype(v);
      lane_store(x + k, V(lane_load(x + k, v) / V(sum)));
    });
  }
}

// Columns [0, w) of an (n x stride) row-major block: x[i * stride + j], normalized over i.
template <bool Log, bool Simd, class C>
void softmax_cols(C* x, std::int64_t n, std::int64_t stride, std::int64_t w) {
  alignas(64) C mx[column_block], sm[column_block];
  for_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
    using V = decltype(v);
    V m = lane_load(x + j, v);
    for (std::int64_t i = 1; i < n; ++i) m = lane_max(m, lane_load(x + i * stride + j, v));
    lane_store(mx + j, m);
    lane_store(sm + j, V(C(0)));
  });
  for (std::int64_t i = 0; i < n; ++i) {
    C* row = x + i * stride;
    for_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
      using V = decltype(v);
      V e = lane_exp(V(lane_load(row + j, v) - lane_load(mx + j, v)));
      if constexpr (!Log) lane_store(row + j, e);
      lane_store(sm + j, V(lane_load(sm + j, v) + e));
    });
  }
  if constexpr (Log) {
    for (std::int64_t j = 0; j < w; ++j) sm[j] = std::log(sm[j]);  // once per column: scalar
    for (std::int64_t i = 0; i < n; ++i) {
      C* row = x + i * stride;
      for_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
        using V = decltype(v);
        lane_store(row + j,
                   V(V(lane_load(row + j, v) - lane_load(mx + j, v)) - lane_load(sm + j, v)));
      });
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      C* row = x + i * stride;
      for_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
        using V = decltype(v);
        lane_store(row + j, V(lane_load(row + j, v) / lane_load(sm + j, v)));
      });
    }
  }
}

// Normalizes the contiguous array x of shape s along axis, in place.
template <bool Log, bool Simd, class C>
void softmax_inplace_impl(C* x, zenith::shape const& s, std::size_t axis) {
  for_each_slice(
      x, s, axis, [](C* row, std::int64_t n) { softmax_row<Log, Simd>(row, n); },
      [](C* p, std::int64_t n, std::int64_t stride, std::int64_t w) {
        softmax_cols<Log, Simd>(p, n, stride, w);
      });
}

// softmax in place over one axis: what softmax_inplace runs, and what a recording keeps of it
// (core/recording.hpp).
template <bool Log, class C>
struct softmax_step {
  C* x;
  zenith::shape s;
  std::size_t axis;
  void run() {
    if (simd_enabled())
      softmax_inplace_impl<Log, true>(x, s, axis);
    else
      softmax_inplace_impl<Log, false>(x, s, axis);
  }
  void pointers(pointer_list& l) { l.writes(x); }
};

template <bool Log, class C>
void softmax_inplace(C* x, zenith::shape const& s, std::size_t axis) {
  if (s.numel() == 0) return;
  softmax_step<Log, C> step{x, s, axis};
  run_step(step);
}

}  // namespace detail

// The softmax / log_softmax barrier: found by ADL from the evaluator, returns a fresh array.
template <class Op, class E>
array<value_t<softmax_node<Op, E>>> eval_barrier(softmax_node<Op, E> const& node) {
  using R = value_t<softmax_node<Op, E>>;
  using C = compute_t<R>;
  array<C> buf = detail::overwritable_input<C>(node.input());
  detail::softmax_inplace<Op::log>(buf.data(), buf.shape(), node.axis);
  if constexpr (std::is_same_v<R, C>)
    return buf;
  else
    return detail::evaluate_untraced<R>(buf);
}

}  // namespace zenith
