#pragma once
// The shared parts of a CPU reduction's loops (backend/cpu/reduce.hpp): the loop geometry after
// ordering and coalescing, walking its rows, splitting work into a fixed tree of tasks, and the
// accumulation kernels (plain reductions, and argmax / argmin with their positions).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

// xsimd (its warnings silenced) before the other zenith headers
#include "../../expr/simd_headers.hpp"

#include "../../expr/reduce.hpp"
#include "fused_loop.hpp"  // parallel_threshold
#include "thread_pool.hpp"

namespace zenith::detail::red {

inline constexpr std::int64_t block_elems = 8192;    // case A: elements per block
inline constexpr std::int64_t block_b_elems = 2048;  // case B: elements per block, about
inline constexpr std::int64_t block_rows = 16;       // case B: reduced rows per block, at least
inline constexpr std::int64_t chunk_cols = 1024;     // case B: kept elements per work item

// The loop after ordering and coalescing: dims [K1 | R | K2]; case A has no K2.
struct geometry {
  std::size_t n = 0;
  std::array<std::int64_t, max_rank> dims{};
  std::array<std::int64_t, max_rank> ost{};  // output strides, 0 on reduced dims
  std::size_t nk1 = 0, nr = 0, nk2 = 0;
  std::int64_t count = 1;  // reduced elements per output
  std::int64_t k1 = 1, k2 = 1;
  // Case B: reduced rows per block (about block_b_elems elements, at least block_rows rows), and
  // whether short contiguous rows are folded (see item_b::block_fold).
  std::int64_t rows_per_block = block_rows;
  bool fold = false;
  // Whether a kernel compiled with SIMD loops (its Simd parameter) runs them: false when
  // simd_enabled() is off. A flag rather than a third variant per expression: each path's
  // scalar loop is there anyway for the tails.
  bool simd = true;
  // A mean run by sum's loops (reduce_into): the sums are divided by count as they are written.
  bool mean = false;
};

// The output of an accumulator s: Op's finalize, or for a mean run by sum's loops the sum
// divided by the count, as reduce_mean's finalize divides.
template <class Op, class S>
auto finalize(S const& s, geometry const& g) {
  if constexpr (std::is_same_v<Op, ops::reduce_sum>) {
    if (g.mean) return ops::reduce_mean::finalize(s, std::size_t(g.count));
  }
  return Op::finalize(s, std::size_t(g.count));
}

inline void unflatten(std::int64_t flat, geometry const& g, std::size_t d0, std::size_t d1,
                      std::int64_t* idx) {
  for (std::size_t k = d1; k-- > d0;) {
    idx[k] = flat % g.dims[k];
    flat /= g.dims[k];
  }
}
inline void increment(geometry const& g, std::size_t d0, std::size_t d1, std::int64_t* idx) {
  for (std::size_t k = d1; k-- > d0;) {
    if (++idx[k] < g.dims[k]) return;
    idx[k] = 0;
  }
}
inline std::int64_t out_offset(geometry const& g, std::int64_t const* idx, std::size_t d0,
                               std::size_t d1) {
  std::int64_t off = 0;
  for (std::size_t k = d0; k < d1; ++k) off += idx[k] * g.ost[k];
  return off;
}

// Walks the flat range [lo, hi) of the sub-space of dims [d0, d1) (the last one is the row):
// sets idx[d0 .. d1-2] and calls f(j, j_end, flat index of the row's start) per row segment.
template <class F>
void walk(geometry const& g, std::size_t d0, std::size_t d1, std::int64_t* idx, std::int64_t lo,
          std::int64_t hi, F&& f) {
  std::int64_t L = g.dims[d1 - 1];
  std::int64_t row = lo / L, j = lo % L;
  for (std::size_t k = d1 - 1; k-- > d0;) {
    idx[k] = row % g.dims[k];
    row /= g.dims[k];
  }
  while (lo < hi) {
    std::int64_t j_end = std::min(L, j + (hi - lo));
    f(j, j_end, lo - j);
    lo += j_end - j;
    j = 0;
    increment(g, d0, d1 - 1, idx);
  }
}

// Threads for `work` input elements (1 below the parallel threshold).
inline std::size_t threads_for(std::int64_t work) {
  std::size_t t = thread_pool::instance().size();
  return (t > 1 && work >= std::int64_t(parallel_threshold())) ? t : 1;
}
// Tree depth at which to cut subtrees into parallel tasks: at least 4 tasks per thread.
inline std::size_t task_depth(std::size_t threads) {
  std::size_t d = 0;
  while ((std::size_t(1) << d) < 4 * threads) ++d;
  return d;
}
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The fixed pairwise tree over blocks [lo, hi): split at lo + (hi - lo) / 2.
inline void collect_tasks(std::int64_t lo, std::int64_t hi, std::size_t depth,
                          std::vector<std::array<std::int64_t, 2>>& tasks) {
  if (depth == 0 || hi - lo == 1) {
    tasks.push_back({lo, hi});
    return;
  }
  std::int64_t mid = lo + (hi - lo) / 2;
  collect_tasks(lo, mid, depth - 1, tasks);
  collect_tasks(mid, hi, depth - 1, tasks);
}
// Combines task results in the same tree collect_tasks cut; merge(a, b) folds b into a.
template <class R, class Merge>
R& combine_tasks(std::int64_t lo, std::int64_t hi, std::size_t depth, R* res, std::size_t& k,
                 Merge const& merge) {
  if (depth == 0 || hi - lo == 1) return res[k++];
  std::int64_t mid = lo + (hi - lo) / 2;
  R& a = combine_tasks(lo, mid, depth - 1, res, k, merge);
  R& b = combine_tasks(mid, hi, depth - 1, res, k, merge);
  merge(a, b);
  return a;
}

// Accumulation kernels.

// A plain array of n values (std::vector<bool> has no bool& elements).
template <class A>
class row_buffer {
 public:
  explicit row_buffer(std::size_t n = 0) : p_(n ? new A[n]() : nullptr), n_(n) {}
  row_buffer(row_buffer const& o) : row_buffer(o.n_) { std::copy_n(o.p_.get(), n_, p_.get()); }
  row_buffer(row_buffer&&) noexcept = default;
  row_buffer& operator=(row_buffer const&) = delete;
  A* data() { return p_.get(); }
  A const* data() const { return p_.get(); }
  A& operator[](std::size_t i) { return p_[i]; }
  A const& operator[](std::size_t i) const { return p_[i]; }

 private:
  std::unique_ptr<A[]> p_;
  std::size_t n_;
};

// Plain reductions: the state is the accumulator itself.
template <class Op, class A>
struct simple_kernel {
  static constexpr bool indexed = false;
  using state = A;
  static state init() { return Op::template identity<A>(); }
  static void push(state& s, A x, std::int64_t) { s = Op::combine(s, x); }
  static state merge(state a, state b) { return Op::combine(a, b); }

  // Rows of states for case B.
  struct rows {
    row_buffer<A> v;
    explicit rows(std::size_t w = 0) : v(w) {}
    void reset(std::size_t w) { std::fill_n(v.data(), w, init()); }
    state get(std::int64_t k) const { return v[std::size_t(k)]; }
  };
  template <bool Simd>
  static void merge_rows(rows& a, rows const& b, std::size_t w, bool simd) {
    std::size_t k = 0;
    if constexpr (Simd) {
      using B = xsimd::batch<A>;
      if (simd)
        for (; k + B::size <= w; k += B::size)
          Op::simd(B::load_unaligned(&a.v[k]), B::load_unaligned(&b.v[k])).store_unaligned(&a.v[k]);
    }
    for (; k < w; ++k) a.v[k] = Op::combine(a.v[k], b.v[k]);
  }
};

// argmax / argmin: (value, index) states.
template <class Op, class A>
struct arg_kernel {
  static constexpr bool indexed = true;
  using state = typename Op::template state<A>;
  static state init() { return {Op::template identity<A>(), -1}; }
  static void push(state& s, A x, std::int64_t pos) {
    if (Op::better(x, s.value)) {
      s.value = x;
      s.index = pos;
    }
  }
  static state merge(state a, state b) { return Op::combine(a, b); }

  struct rows {
    row_buffer<A> v;
    row_buffer<std::int64_t> i;
    explicit rows(std::size_t w = 0) : v(w), i(w) {}
    void reset(std::size_t w) {
      std::fill_n(v.data(), w, Op::template identity<A>());
      std::fill_n(i.data(), w, std::int64_t(-1));
    }
    state get(std::int64_t k) const { return {v[std::size_t(k)], i[std::size_t(k)]}; }
  };
  template <bool>
  static void merge_rows(rows& a, rows const& b, std::size_t w, bool) {
    for (std::size_t k = 0; k < w; ++k) {
      state s = Op::combine(state{a.v[k], a.i[k]}, state{b.v[k], b.i[k]});
      a.v[k] = s.value;
      a.i[k] = s.index;
    }
  }
};

template <class Op, class A>
using kernel_for =
    std::conditional_t<indexed_reduction<Op>, arg_kernel<Op, A>, simple_kernel<Op, A>>;

// The expression a reduction reads, behind function pointers. The functions that read it (a
// block of case A, a block of case B) are compiled once per expression and loop variant; the
// loops around them, which split the work into blocks, trees and threads and write the outputs
// (run_a, run_b), once per reduction and compute type. A call per block (thousands of
// elements, or rows of them) costs nothing next to the block.
template <class Op, class A>
struct reduce_source {
  using K = kernel_for<Op, A>;
  void* ev;  // the evaluator, which the block functions start row by row
  // Case A: reduces elements [lo, hi) of the reduced sub-space for the output whose kept
  // indices are in idx[0 .. nk1).
  typename K::state (*block_a)(void* ev, geometry const& g, std::int64_t* idx, std::int64_t lo,
                               std::int64_t hi);
  // Case A with one block per output: the states of outputs [lo, hi) into s (a call per run of
  // outputs rather than per output, whose row may be only a few elements).
  void (*outputs_a)(void* ev, geometry const& g, std::int64_t lo, std::int64_t hi,
                    typename K::state* s);
  // Case B: accumulates reduced rows [rlo, rhi) of the kept elements [c0, c1) (K2 flat) at the K1
  // index in idx[0 .. nk1) into acc, which it resets first.
  void (*block_b)(void* ev, geometry const& g, std::int64_t* idx, typename K::rows& acc,
                  std::int64_t rlo, std::int64_t rhi, std::int64_t c0, std::int64_t c1);
  // A copy of the evaluator for another thread, built at `at` (size bytes, aligned to 64), and
  // its end.
  std::size_t size;
  void* (*clone_at)(void const* ev, void* at);
  void (*destroy)(void* ev);
};

// The evaluator one task of a reduction reads: the source's own where one thread runs the whole
// reduction, else a copy of it (row starts write into an evaluator), on the stack when it fits.
class task_evaluator {
 public:
  template <class Src>
  task_evaluator(Src const& src, bool copy) : ev_(src.ev) {
    if (!copy) return;
    void* at = local_;
    if (src.size > sizeof(local_)) {
      heap_.reset(::operator new(src.size, std::align_val_t(64)));
      at = heap_.get();
    }
    ev_ = src.clone_at(src.ev, at);
    destroy_ = src.destroy;
  }
  task_evaluator(task_evaluator const&) = delete;
  task_evaluator& operator=(task_evaluator const&) = delete;
  ~task_evaluator() {
    if (destroy_) destroy_(ev_);
  }
  void* get() const { return ev_; }

 private:
  struct aligned_delete {
    void operator()(void* p) const { ::operator delete(p, std::align_val_t(64)); }
  };

  alignas(64) std::byte local_[512];
  void* ev_;
  void (*destroy_)(void*) = nullptr;
  std::unique_ptr<void, aligned_delete> heap_;  // released after the copy in it is destroyed
};

template <class Ev>
void* clone_evaluator_at(void const* ev, void* at) {
  static_assert(alignof(Ev) <= 64);
  return ::new (at) Ev(*static_cast<Ev const*>(ev));
}
template <class Ev>
void destroy_evaluator(void* ev) {
  static_cast<Ev*>(ev)->~Ev();
}

}  // namespace zenith::detail::red
