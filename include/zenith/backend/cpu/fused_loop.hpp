#pragma once
// The one fused pass: writes an elementwise evaluator tree into a strided destination.
// Dimensions are coalesced first (a contiguous expression becomes one long row), then the rows
// are walked with xsimd batches over the inner dimension and a scalar tail, split across the
// thread pool above a size threshold.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "../../core/recording.hpp"
#include "../../core/small_vector.hpp"
#include "evaluator.hpp"
#include "thread_pool.hpp"

namespace zenith {

namespace detail {
inline std::atomic<bool>& simd_enabled_flag() {
  static std::atomic<bool> on{true};
  return on;
}
inline std::atomic<std::size_t>& parallel_threshold_ref() {
  static std::atomic<std::size_t> n{1u << 15};
  return n;
}
}  // namespace detail

// Turns the xsimd path off (everything runs the scalar path); for tests and debugging.
inline void set_simd_enabled(bool on) { detail::simd_enabled_flag() = on; }
inline bool simd_enabled() { return detail::simd_enabled_flag(); }
// Arrays with fewer elements than this are evaluated on the calling thread only.
inline void set_parallel_threshold(std::size_t n) { detail::parallel_threshold_ref() = n; }
inline std::size_t parallel_threshold() { return detail::parallel_threshold_ref(); }

// A strided destination for the fused loop.
template <class T>
struct dest_view {
  T* base;
  std::array<std::int64_t, max_rank> stride;
};

// The iteration space after coalescing: shape and, per leaf, strides.
struct loop_space {
  std::size_t rank = 0;
  std::array<std::int64_t, max_rank> dims{};
  std::array<std::size_t, max_rank> source_axis{};  // innermost original axis of each group
  std::size_t total = 0;
};

// The strides of a loop's destination and leaves, the input of coalesce: held inline up to
// `inline_count` of them, so that setting up a loop allocates nothing (a small array's whole
// evaluation is a few hundred nanoseconds).
class stride_list {
 public:
  using strides = std::array<std::int64_t, max_rank>;
  static constexpr std::size_t inline_count = 16;

  stride_list() = default;
  stride_list(std::initializer_list<strides> l) {  // NOLINT: coalesce(s, {{30, 6, 1}, ...})
    for (auto const& st : l) push_back(st);
  }
  stride_list(std::vector<strides> const& v) {  // NOLINT
    for (auto const& st : v) push_back(st);
  }

  void push_back(strides const& st) { list_.push_back(st); }
  strides const* begin() const { return list_.begin(); }
  strides const* end() const { return list_.end(); }

 private:
  detail::small_vector<strides, inline_count> list_;
};

// Merges adjacent axes along which every stride vector is jointly contiguous; drops size-1 axes.
inline loop_space coalesce(zenith::shape const& s, stride_list const& strides) {
  loop_space ls;
  ls.total = s.numel();
  std::size_t r = s.size();
  for (std::size_t k = 0; k < r; ++k) {
    if (s[k] == 1) continue;
    bool merge = ls.rank > 0;
    if (merge) {
      std::size_t prev = ls.source_axis[ls.rank - 1];
      for (auto const& st : strides)
        if (st[prev] != st[k] * std::int64_t(s[k])) {
          merge = false;
          break;
        }
    }
    if (merge) {
      ls.dims[ls.rank - 1] *= std::int64_t(s[k]);
      ls.source_axis[ls.rank - 1] = k;
    } else {
      ls.dims[ls.rank] = std::int64_t(s[k]);
      ls.source_axis[ls.rank] = k;
      ++ls.rank;
    }
  }
  if (ls.rank == 0) {  // a single element
    ls.rank = 1;
    ls.dims[0] = 1;
    ls.source_axis[0] = max_rank;  // no source axis: stride 0
  }
  return ls;
}

inline std::array<std::int64_t, max_rank> regroup(std::array<std::int64_t, max_rank> const& st,
                                                  loop_space const& ls) {
  std::array<std::int64_t, max_rank> out{};
  for (std::size_t g = 0; g < ls.rank; ++g)
    out[g] = ls.source_axis[g] < max_rank ? st[ls.source_axis[g]] : 0;
  return out;
}

namespace detail {

template <class T, class C>
inline void store_batch(T* p, std::int64_t ds, xsimd::batch<C> const& b) {
  if constexpr (std::is_same_v<T, C>) {
    if (ds == 1) {
      b.store_unaligned(p);
      return;
    }
  }
  alignas(64) C tmp[xsimd::batch<C>::size];
  b.store_aligned(tmp);
  for (std::size_t i = 0; i < xsimd::batch<C>::size; ++i) p[std::int64_t(i) * ds] = T(tmp[i]);
}

// Whether the loop writing Ev into T has a SIMD path. The lane type is the compute type, or for
// a comparison at the root that of its operands.
template <class T, class Ev, class L = simd_lane_t<Ev>>
inline constexpr bool fused_simd_v =
    !std::is_same_v<L, bool> && simd_type_v<L> && Ev::template vectorizable<L>() &&
    (std::is_same_v<T, bool> || !std::is_same_v<typename Ev::compute_type, bool>);

// Writes elements [j, j_end) of the current row: with xsimd batches when `simd` (and Ev has a
// SIMD path), else all on the scalar path. A flag, not a template parameter: the scalar loop is
// every row's tail anyway, and each variant would be compiled again per expression.
// Elements at the same (row, j) always take the same path (SIMD batches on the grid j0, j0 + W,
// ... of the caller's j0, scalar tail after), so callers keep results independent of how a row
// is split between threads by starting pieces of a row only at multiples of `grain` (a multiple
// of every batch width).
template <row_access A, class T, class Ev>
inline void run_row(T* __restrict out, std::int64_t ds, Ev const& ev, std::int64_t j,
                    std::int64_t j_end, bool simd) {
  using C = typename Ev::compute_type;
  if constexpr (fused_simd_v<T, Ev>) {
    if (simd) {
      constexpr std::int64_t W = std::int64_t(xsimd::batch<simd_lane_t<Ev>>::size);
      if constexpr (std::is_same_v<C, bool>) {
        // A comparison at the root: its xsimd mask is stored as bytes.
        for (; j + W <= j_end; j += W) {
          if (ds == 1) {
            ev.template simd<A>(j).store_unaligned(out + j);
          } else {
            alignas(64) bool tmp[W];
            ev.template simd<A>(j).store_aligned(tmp);
            for (std::int64_t i = 0; i < W; ++i) out[(j + i) * ds] = tmp[i];
          }
        }
      } else if constexpr (A != row_access::strided && std::is_same_v<T, C>) {
        // Unit strides everywhere (ds == 1): four independent batches per iteration.
        for (; j + 4 * W <= j_end; j += 4 * W) {
          auto b0 = ev.template simd<A>(j);
          auto b1 = ev.template simd<A>(j + W);
          auto b2 = ev.template simd<A>(j + 2 * W);
          auto b3 = ev.template simd<A>(j + 3 * W);
          b0.store_unaligned(out + j);
          b1.store_unaligned(out + j + W);
          b2.store_unaligned(out + j + 2 * W);
          b3.store_unaligned(out + j + 3 * W);
        }
        for (; j + W <= j_end; j += W) ev.template simd<A>(j).store_unaligned(out + j);
      } else {
        for (; j + W <= j_end; j += W) store_batch<T, C>(out + j * ds, ds, ev.template simd<A>(j));
      }
    }
  }
  for (; j < j_end; ++j) out[j * ds] = T(ev.scalar(j));
}

// Rows are cut into blocks of `grain` elements (the last block of a row may be shorter); work is
// handed out in whole blocks, so a piece of a row always starts at a multiple of grain.
inline constexpr std::int64_t grain = 64;

// Loops over at most this many elements that run on one thread run on their step's own
// evaluator (fused_step::run) instead of a private copy: copying a gradient's evaluator (a few
// hundred bytes, a reference count per kept buffer) cost a fifth of a replayed
// stochastic_volatility at one element (bench/RESULTS.md), and on a short loop the copy's one
// gain, that stores cannot alias it, is worth nothing.
inline constexpr std::int64_t in_place_up_to = 4096;

// Walks flat elements [lo, hi) of the coalesced space on ev; lo is a row start or a multiple of
// grain inside a row. A is what every leaf's inner stride is known to be (and the destination's
// is 1 unless A is strided).
template <row_access A, class T, class Ev>
void run_range(dest_view<T> const& dst, Ev& ev, loop_space const& ls, std::int64_t lo,
               std::int64_t hi, bool simd) {
  std::size_t r = ls.rank;
  std::int64_t n = ls.dims[r - 1];
  std::array<std::int64_t, max_rank> idx{};
  std::int64_t row = lo / n, j = lo % n;
  for (std::size_t k = r - 1; k-- > 0;) {
    idx[k] = row % ls.dims[k];
    row /= ls.dims[k];
  }
  std::int64_t ds = dst.stride[r - 1];
  while (lo < hi) {
    std::int64_t j_end = std::min(n, j + (hi - lo));
    ev.start_row(idx.data(), r);
    std::int64_t off = 0;
    for (std::size_t k = 0; k + 1 < r; ++k) off += idx[k] * dst.stride[k];
    run_row<A>(dst.base + off, ds, ev, j, j_end, simd);
    lo += j_end - j;
    j = 0;
    for (std::size_t k = r - 1; k-- > 0;) {
      if (++idx[k] < ls.dims[k]) break;
      idx[k] = 0;
    }
  }
}

// The flat index where block u starts (blocks never straddle rows).
inline std::int64_t block_start(std::int64_t u, std::int64_t row_len, std::int64_t blocks_per_row) {
  std::int64_t row = u / blocks_per_row, b = u % blocks_per_row;
  return row * row_len + std::min(row_len, b * grain);
}

// Elements a thread takes at a time: large enough that handing out work costs nothing, small
// enough that a thread slowed down (by another process, say) leaves the rest to the others.
inline constexpr std::int64_t elements_per_task = std::int64_t(1) << 16;

}  // namespace detail

namespace detail {

// A fused loop with its space coalesced and its leaves regrouped: what run_fused runs, and what
// a recording keeps of it (core/recording.hpp).
template <class T, class Ev>
struct fused_step {
  // Ev may be a reference (run_fused outside a recording); a copy is always of the evaluator.
  using evaluator = std::remove_cvref_t<Ev>;

  dest_view<T> dst;
  Ev ev;
  loop_space ls;
  bool unit = false, broadcast = false;

  void run() {
    if constexpr (!std::is_reference_v<Ev>) {
      // A recorded step: the same loop on the evaluator it owns, compiled once per Ev.
      fused_step<T, evaluator&>{dst, ev, ls, unit, broadcast}.run();
    } else {
      run_here();
    }
  }

  void pointers(pointer_list& l) {
    l.writes(dst.base);
    l.reads_leaves(ev);
  }

 private:
  void run_here() {
    // On a private copy of ev: its address never escapes, so stores cannot alias it, and
    // threads can share ev.
    auto range = [&](std::int64_t lo, std::int64_t hi) {
      evaluator copy = ev;
      range_on(copy, lo, hi);
    };

    std::int64_t total = std::int64_t(ls.total);
    std::size_t threads = thread_pool::instance().size();
    if (std::size_t(total) < parallel_threshold() || threads <= 1)
      return total <= in_place_up_to ? range_on(ev, 0, total) : range(0, total);

    // Blocks of `grain` elements, grouped into tasks of about elements_per_task elements (at
    // least 4 tasks per thread); the pool hands tasks to whichever thread is free, so a thread
    // slowed down by another process leaves its share to the others.
    std::int64_t row_len = ls.dims[ls.rank - 1];
    std::int64_t blocks_per_row = (row_len + grain - 1) / grain;
    std::int64_t blocks = total / row_len * blocks_per_row;
    std::int64_t per_task = std::max<std::int64_t>(1, elements_per_task / grain);
    per_task = std::min(per_task, std::max<std::int64_t>(1, blocks / std::int64_t(4 * threads)));
    std::int64_t tasks = (blocks + per_task - 1) / per_task;
    if (tasks == 1) return range(0, total);
    thread_pool::instance().parallel_for(std::size_t(tasks), [&](std::size_t t) {
      std::int64_t u0 = std::int64_t(t) * per_task, u1 = std::min(blocks, u0 + per_task);
      range(block_start(u0, row_len, blocks_per_row),
            u1 == blocks ? total : block_start(u1, row_len, blocks_per_row));
    });
  }

  // Elements [lo, hi) evaluated by e (ev or a copy of it) on the loop's path.
  void range_on(evaluator& e, std::int64_t lo, std::int64_t hi) {
    bool simd = fused_simd_v<T, evaluator> && simd_enabled();
    if constexpr (fused_simd_v<T, evaluator>) {
      if (simd && unit) {
        if (broadcast) return run_range<row_access::unit_or_broadcast>(dst, e, ls, lo, hi, true);
        return run_range<row_access::unit>(dst, e, ls, lo, hi, true);
      }
    }
    run_range<row_access::strided>(dst, e, ls, lo, hi, simd);
  }
};

}  // namespace detail

// Evaluates ev (built for shape s) into dst. Leaves' strides are regrouped in place.
//
// Determinism: which path (SIMD batch or scalar tail) computes an element depends only on its
// position in its row, never on the number of threads or on how work is handed out, so results
// are bitwise identical for every thread count.
template <class T, class Ev>
void run_fused(dest_view<T> dst, Ev& ev, zenith::shape const& s) {
  if (s.numel() == 0) return;
  stride_list strides;
  strides.push_back(dst.stride);
  ev.for_each_leaf([&](auto& leaf) { strides.push_back(leaf.stride); });
  loop_space ls = coalesce(s, strides);
  dst.stride = regroup(dst.stride, ls);
  // unit: every inner stride is 1 or 0 (the unit-stride path); broadcast: some are 0.
  bool unit = dst.stride[ls.rank - 1] == 1, broadcast = false;
  ev.for_each_leaf([&](auto& leaf) {
    leaf.stride = regroup(leaf.stride, ls);
    leaf.rank = ls.rank;
    std::int64_t inner = leaf.stride[ls.rank - 1];
    unit = unit && (inner == 1 || inner == 0);
    broadcast = broadcast || inner == 0;
  });
  if (detail::active_recording()) {
    detail::fused_step<T, Ev> step{dst, ev, ls, unit, broadcast};
    return detail::run_step(step);
  }
  // Not recording: the same loop, on ev itself rather than a copy.
  detail::fused_step<T, Ev&> step{dst, ev, ls, unit, broadcast};
  step.run();
}

}  // namespace zenith
