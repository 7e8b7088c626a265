#pragma once
// The CPU kernel of softmax_node (expr/softmax.hpp). The input is evaluated once, in one fused
// pass, straight into the output buffer; each slice along the axis is then normalized in place:
//   max pass, exp(x - max) pass (stored for softmax, only summed for log_softmax), scale pass.
// The last axis (contiguous rows) is vectorized along the row; any other axis is vectorized
// across the contiguous columns after it, a block of columns at a time. Rows / column blocks
// are split across the thread pool in a fixed way above parallel_threshold(), so results are
// bitwise the same for a given thread count. bfloat16 / float16 compute in float.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "../../expr/softmax.hpp"
#include "evaluate.hpp"
#include "thread_pool.hpp"

namespace zenith {

namespace detail {

// Evaluates e as T into a fresh array this code may overwrite (never a buffer shared with e).
template <element T, expression E>
array<T> softmax_input(E const& e) {
  array<T> r = evaluate_untraced<T>(e);
  auto const& b = r.storage();
  if (b && b->owned() && b.use_count() == 1) return r;
  return evaluate_fresh<T>(r);  // a copy by the fused loop, which a recording keeps
}

// Lane helpers: the same code runs on a scalar C or an xsimd batch of C.
template <class C>
inline C sm_load(C const* p, C) {
  return *p;
}
template <class C, class A>
inline xsimd::batch<C, A> sm_load(C const* p, xsimd::batch<C, A>) {
  return xsimd::batch<C, A>::load_unaligned(p);
}
template <class C>
inline void sm_store(C* p, C v) {
  *p = v;
}
template <class C, class A>
inline void sm_store(C* p, xsimd::batch<C, A> const& v) {
  v.store_unaligned(p);
}
template <class C>
inline C sm_exp(C v) {
  return std::exp(v);
}
template <class C, class A>
inline xsimd::batch<C, A> sm_exp(xsimd::batch<C, A> const& v) {
  return xsimd::exp(v);
}
template <class C>
inline C sm_max(C a, C b) {
  return a < b ? b : a;
}
template <class C, class A>
inline xsimd::batch<C, A> sm_max(xsimd::batch<C, A> const& a, xsimd::batch<C, A> const& b) {
  return xsimd::max(a, b);
}

// Calls f(j, lane) for j in [0, w): full batches first (when Simd), then scalars.
template <bool Simd, class C, class F>
inline void sm_lanes(std::int64_t w, F&& f) {
  std::int64_t j = 0;
  if constexpr (Simd) {
    using B = xsimd::batch<C>;
    constexpr std::int64_t W = std::int64_t(B::size);
    for (; j + W <= w; j += W) f(j, B{});
  }
  for (; j < w; ++j) f(j, C{});
}

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
      for (std::int64_t i = 0; i < W; ++i) mx = sm_max(mx, t[i]);
    }
  }
  for (; j < n; ++j) mx = sm_max(mx, x[j]);

  C sum = 0;
  j = 0;
  if constexpr (Simd) {
    B s(C(0)), bm(mx);
    for (; j + W <= n; j += W) {
      B e = xsimd::exp(B::load_unaligned(x + j) - bm);
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
    sm_lanes<Simd, C>(n, [&](std::int64_t k, auto v) {
      using V = decltype(v);
      sm_store(x + k, V(sm_load(x + k, v) - V(mx)) - V(ls));
    });
  } else {
    sm_lanes<Simd, C>(n, [&](std::int64_t k, auto v) {
      using V = decltype(v);
      sm_store(x + k, V(sm_load(x + k, v) / V(sum)));
    });
  }
}

inline constexpr std::int64_t softmax_block = 256;  // columns per unit for a non-last axis

// Columns [0, w) of an (n x stride) row-major block: x[i * stride + j], normalized over i.
template <bool Log, bool Simd, class C>
void softmax_cols(C* x, std::int64_t n, std::int64_t stride, std::int64_t w) {
  alignas(64) C mx[softmax_block], sm[softmax_block];
  sm_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
    using V = decltype(v);
    V m = sm_load(x + j, v);
    for (std::int64_t i = 1; i < n; ++i) m = sm_max(m, sm_load(x + i * stride + j, v));
    sm_store(mx + j, m);
    sm_store(sm + j, V(C(0)));
  });
  for (std::int64_t i = 0; i < n; ++i) {
    C* row = x + i * stride;
    sm_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
      using V = decltype(v);
      V e = sm_exp(V(sm_load(row + j, v) - sm_load(mx + j, v)));
      if constexpr (!Log) sm_store(row + j, e);
      sm_store(sm + j, V(sm_load(sm + j, v) + e));
    });
  }
  if constexpr (Log) {
    for (std::int64_t j = 0; j < w; ++j) sm[j] = std::log(sm[j]);  // once per column: scalar
    for (std::int64_t i = 0; i < n; ++i) {
      C* row = x + i * stride;
      sm_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
        using V = decltype(v);
        sm_store(row + j, V(V(sm_load(row + j, v) - sm_load(mx + j, v)) - sm_load(sm + j, v)));
      });
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      C* row = x + i * stride;
      sm_lanes<Simd, C>(w, [&](std::int64_t j, auto v) {
        using V = decltype(v);
        sm_store(row + j, V(sm_load(row + j, v) / sm_load(sm + j, v)));
      });
    }
  }
}

// Normalizes the contiguous array x of shape s along axis, in place.
template <bool Log, bool Simd, class C>
void softmax_inplace_impl(C* x, zenith::shape const& s, std::size_t axis) {
  std::int64_t outer = 1, n = std::int64_t(s[axis]), inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= std::int64_t(s[i]);
  for (std::size_t i = axis + 1; i < s.size(); ++i) inner *= std::int64_t(s[i]);
  std::int64_t blocks = inner == 1 ? 1 : (inner + softmax_block - 1) / softmax_block;
  std::int64_t units = outer * blocks;
  auto run = [&](std::int64_t u0, std::int64_t u1) {
    for (std::int64_t u = u0; u < u1; ++u) {
      std::int64_t o = u / blocks, b = u % blocks;
      C* base = x + o * n * inner;
      if (inner == 1) {
        softmax_row<Log, Simd>(base, n);
      } else {
        std::int64_t j0 = b * softmax_block;
        softmax_cols<Log, Simd>(base + j0, n, inner, std::min(softmax_block, inner - j0));
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
  array<C> buf = detail::softmax_input<C>(node.input());
  detail::softmax_inplace<Op::log>(buf.data(), buf.shape(), node.axis);
  if constexpr (std::is_same_v<R, C>)
    return buf;
  else
    return detail::evaluate_untraced<R>(buf);
}

}  // namespace zenith
