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

// Whether a loop writing Ev into T can add to what the destination holds instead (`add` of
// run_row_scalar and of group_store.hpp's store_row): when T is the compute type, the sum then
// rounds as the expression out + e would.
template <class T, class Ev>
inline constexpr bool adds_in_place_v =
    std::is_same_v<T, typename Ev::compute_type> && !std::is_same_v<T, bool>;

// Writes elements [j, j_end) of the current row on the scalar path alone (SIMD off, or an
// expression without it), or adds them to what out holds (add, where adds_in_place_v): for the
// flattened loops of group_store.hpp and group_total.hpp, which would otherwise inline a copy of it
// into each of their variants.
template <class T, class Ev>
[[gnu::noinline]] void run_row_scalar(T* __restrict out, Ev const& ev, std::int64_t j,
                                      std::int64_t j_end, bool add = false) {
  if constexpr (adds_in_place_v<T, Ev>) {
    if (add) {
      for (; j < j_end; ++j) out[j] = ops::add::apply(out[j], T(ev.scalar(j)));
      return;
    }
  }
  for (; j < j_end; ++j) out[j] = T(ev.scalar(j));
}

// Writes elements [j, j_end) of the current row: with xsimd batches when `simd` (and Ev has a
// SIMD path), else all on the scalar path. A flag, not a template parameter: the scalar loop is
// every row's tail anyway, and each variant would be compiled again per expression.
// Elements at the same (row, j) always take the same path (SIMD batches on the grid j0, j0 + W,
// ... of the caller's j0, scalar tail after), so callers keep results independent of how a row
// is split between threads by starting pieces of a row only at multiples of `grain` (a multiple
// of every batch width).
template <row_access A, bool Unroll = true, class T, class Ev>
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
        // Unit strides everywhere (ds == 1): four independent batches per iteration, unless
        // the caller compiles the body once (Unroll false).
        if constexpr (Unroll) {
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
// evaluator (fused_run::run) instead of a private copy: copying a gradient's evaluator (a few
// hundred bytes, a reference count per kept buffer) costs as much as a short loop itself, and on
// a short loop the copy's one gain, that stores cannot alias it, is worth nothing.
inline constexpr std::int64_t in_place_up_to = 4096;

// Walks flat elements [lo, hi) of the coalesced space on ev; lo is a row start or a multiple of
// grain inside a row. `a` is what every leaf's inner stride is known to be (and the
// destination's is 1 unless a is strided): a runtime argument, so that the walk is compiled once
// per expression whichever access its rows take.
template <class T, class Ev>
void run_range(dest_view<T> const& dst, Ev& ev, loop_space const& ls, std::int64_t lo,
               std::int64_t hi, row_access a, bool simd) {
  std::size_t r = ls.rank;
  std::int64_t n = ls.dims[r - 1];
  std::array<std::int64_t, max_rank> idx{};
  std::int64_t row = lo / n, j = lo % n;
  for (std::size_t k = r - 1; k-- > 0;) {
    idx[k] = row % ls.dims[k];
    row /= ls.dims[k];
  }
  std::int64_t ds = dst.stride[r - 1];
  // The row loop for `a`, chosen once: a call per row through a pointer, as cheap as the direct
  // call a row loop compiled apart would be.
  using row_fn = void (*)(T*, std::int64_t, Ev const&, std::int64_t, std::int64_t, bool);
  row_fn run = &run_row<row_access::strided, !costly_batch_v<Ev>, T, Ev>;
  if constexpr (fused_simd_v<T, Ev>) {
    if (a == row_access::unit_or_broadcast)
      run = &run_row<row_access::unit_or_broadcast, !costly_batch_v<Ev>, T, Ev>;
    if constexpr (!costly_batch_v<Ev>)  // one copy of a costly body (costly_batch_v)
      if (a == row_access::unit) run = &run_row<row_access::unit, true, T, Ev>;
  }
  while (lo < hi) {
    std::int64_t j_end = std::min(n, j + (hi - lo));
    ev.start_row(idx.data(), r);
    std::int64_t off = 0;
    for (std::size_t k = 0; k + 1 < r; ++k) off += idx[k] * dst.stride[k];
    run(dst.base + off, ds, ev, j, j_end, simd);
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

// Where a leaf of an evaluator keeps its strides and rank: what the loop's set-up rewrites.
struct leaf_refs {
  small_vector<std::array<std::int64_t, max_rank>*, 16> strides;
  small_vector<std::size_t*, 16> ranks;
  // Out of line: each expression type's leaf walk calls it once per leaf, where the two
  // vectors' inlined growth was most of the walk's code.
  [[gnu::noinline]] void add(std::array<std::int64_t, max_rank>* stride, std::size_t* rank) {
    strides.push_back(stride);
    ranks.push_back(rank);
  }
};

// A fused loop with its space coalesced and its leaves regrouped, over an evaluator it names
// only by address.
struct fused_call {
  void* base = nullptr;  // the destination
  std::array<std::int64_t, max_rank> stride{};
  loop_space ls;
  bool unit = false, broadcast = false, simd = false;
};

// What the loop needs of an evaluator type Ev writing T: the loop over a range of elements and
// the evaluator's leaves, copies and reads. Compiled once per (T, Ev); everything around it
// (coalescing, the thread split, recording) is compiled once per program.
struct fused_kernel {
  // Elements [lo, hi) of c on the evaluator at ev, or on a copy of it (threads share ev, and a
  // private copy's address never escapes the loop).
  void (*range)(fused_call const& c, void* ev, bool copy, std::int64_t lo, std::int64_t hi);
  void (*leaves)(void* ev, leaf_refs& r);
  void (*reads)(void* ev, pointer_list& l);
  void* (*clone)(void const* ev);  // a heap copy, for a recorded step
  void (*destroy)(void* ev);       // of a clone
  bool has_simd;
};

template <class T, class Ev>
void fused_range(fused_call const& c, void* ev, bool copy, std::int64_t lo, std::int64_t hi) {
  Ev& e = *static_cast<Ev*>(ev);
  if (copy) {
    Ev local = e;
    return fused_range<T, Ev>(c, &local, false, lo, hi);
  }
  dest_view<T> dst{static_cast<T*>(c.base), c.stride};
  row_access a = row_access::strided;
  if (fused_simd_v<T, Ev> && c.simd && c.unit)
    a = c.broadcast || costly_batch_v<Ev> ? row_access::unit_or_broadcast : row_access::unit;
  run_range(dst, e, c.ls, lo, hi, a, fused_simd_v<T, Ev> && c.simd);
}

template <class T, class Ev>
inline constexpr fused_kernel fused_kernel_of = {
    &fused_range<T, Ev>,
    [](void* ev, leaf_refs& r) {
      static_cast<Ev*>(ev)->for_each_leaf([&](auto& leaf) { r.add(&leaf.stride, &leaf.rank); });
    },
    [](void* ev, pointer_list& l) { l.reads_leaves(*static_cast<Ev*>(ev)); },
    [](void const* ev) -> void* { return new Ev(*static_cast<Ev const*>(ev)); },
    [](void* ev) { delete static_cast<Ev*>(ev); },
    fused_simd_v<T, Ev>};

// A fused loop ready to run: what run_fused runs, and what a recording keeps of it (owning a
// copy of the evaluator then; core/recording.hpp).
class fused_run {
 public:
  fused_run(fused_kernel const& k, fused_call const& c, void* ev, bool owned)
      : k_(&k), c_(c), ev_(ev), owned_(owned) {}
  fused_run(fused_run&& o) noexcept : k_(o.k_), c_(o.c_), ev_(o.ev_), owned_(o.owned_) {
    o.owned_ = false;
  }
  fused_run& operator=(fused_run&&) = delete;
  ~fused_run() {
    if (owned_) k_->destroy(ev_);
  }

  [[gnu::noinline]] void run() {
    std::int64_t total = std::int64_t(c_.ls.total);
    std::size_t threads = thread_pool::instance().size();
    if (std::size_t(total) < parallel_threshold() || threads <= 1)
      return k_->range(c_, ev_, total > in_place_up_to, 0, total);

    // Blocks of `grain` elements, grouped into tasks of about elements_per_task elements (at
    // least 4 tasks per thread); the pool hands tasks to whichever thread is free, so a thread
    // slowed down by another process leaves its share to the others.
    loop_space const& ls = c_.ls;
    std::int64_t row_len = ls.dims[ls.rank - 1];
    std::int64_t blocks_per_row = (row_len + grain - 1) / grain;
    std::int64_t blocks = total / row_len * blocks_per_row;
    std::int64_t per_task = std::max<std::int64_t>(1, elements_per_task / grain);
    per_task = std::min(per_task, std::max<std::int64_t>(1, blocks / std::int64_t(4 * threads)));
    std::int64_t tasks = (blocks + per_task - 1) / per_task;
    if (tasks == 1) return k_->range(c_, ev_, true, 0, total);
    thread_pool::instance().parallel_for(std::size_t(tasks), [&](std::size_t t) {
      std::int64_t u0 = std::int64_t(t) * per_task, u1 = std::min(blocks, u0 + per_task);
      k_->range(c_, ev_, true, block_start(u0, row_len, blocks_per_row),
                u1 == blocks ? total : block_start(u1, row_len, blocks_per_row));
    });
  }

  void pointers(pointer_list& l) {
    l.writes(c_.base);
    k_->reads(ev_, l);
  }

 private:
  fused_kernel const* k_;
  fused_call c_;
  void* ev_;
  bool owned_;
};

// Evaluates the evaluator at ev (of kernel k, built for shape s) into base at the given
// strides. Leaves' strides are regrouped in place. Out of line: it is the same for every
// expression.
[[gnu::noinline]] inline void run_fused_with(fused_kernel const& k, void* base,
                                             std::array<std::int64_t, max_rank> const& dst_stride,
                                             void* ev, zenith::shape const& s) {
  if (s.numel() == 0) return;
  leaf_refs leaves;
  k.leaves(ev, leaves);
  stride_list strides;
  strides.push_back(dst_stride);
  for (auto* st : leaves.strides) strides.push_back(*st);
  fused_call c;
  c.base = base;
  c.ls = coalesce(s, strides);
  c.stride = regroup(dst_stride, c.ls);
  // unit: every inner stride is 1 or 0 (the unit-stride path); broadcast: some are 0.
  c.unit = c.stride[c.ls.rank - 1] == 1;
  for (std::size_t i = 0; i < leaves.strides.size(); ++i) {
    auto& st = *leaves.strides[i];
    st = regroup(st, c.ls);
    *leaves.ranks[i] = c.ls.rank;
    std::int64_t inner = st[c.ls.rank - 1];
    c.unit = c.unit && (inner == 1 || inner == 0);
    c.broadcast = c.broadcast || inner == 0;
  }
  c.simd = k.has_simd && simd_enabled();
  if (active_recording()) {
    fused_run step(k, c, k.clone(ev), true);
    return run_step(step);
  }
  // Not recording: the same loop, on ev itself rather than a copy.
  fused_run(k, c, ev, false).run();
}

}  // namespace detail

// Evaluates ev (built for shape s) into dst. Leaves' strides are regrouped in place.
//
// Determinism: which path (SIMD batch or scalar tail) computes an element depends only on its
// position in its row, never on the number of threads or on how work is handed out, so results
// are bitwise identical for every thread count.
template <class T, class Ev>
void run_fused(dest_view<T> dst, Ev& ev, zenith::shape const& s) {
  detail::run_fused_with(detail::fused_kernel_of<T, Ev>, dst.base, dst.stride, &ev, s);
}

}  // namespace zenith
