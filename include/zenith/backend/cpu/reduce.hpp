#pragma once
// CPU evaluation of reductions: eval_barrier(reduce_node const&).
//
// The child expression is never materialized. Its evaluator (the same one the fused loop uses)
// is built, its leaves' strides are permuted so that the loop runs over
//   case A  [kept..., reduced...]                  when the innermost axis is reduced, or
//   case B  [kept outer..., reduced..., kept inner] when the innermost axis is kept,
// and adjacent axes are coalesced. Case A reduces rows with several xsimd batch accumulators and
// a horizontal reduce; case B accumulates whole rows of the kept inner axes, a batch at a time.
//
// Summation order is fixed by the shapes alone: the reduced elements of each output are split
// into blocks (case A: 8192 elements, case B: 16 rows or about 2048 elements), and block results
// are combined in a fixed pairwise tree. That makes float sums accurate (error grows with log n,
// not n), and makes results bitwise identical run to run and whatever the thread count: threads
// only decide who computes which outputs or which subtrees, never the order of additions.
//
// logsumexp is two passes over the child: the max, then the sum of exp(x - max).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

// xsimd (its warnings silenced) before the other zenith headers
#include "../../expr/simd_headers.hpp"

#include "../../core/creation.hpp"
#include "../../core/small_vector.hpp"
#include "../../expr/reduce.hpp"
#include "evaluate.hpp"
#include "fused_loop.hpp"
#include "thread_pool.hpp"

namespace zenith {

template <class Op, class C>
array<typename reduce_node<Op, C>::value_type> eval_barrier(reduce_node<Op, C> const& e);

namespace detail::red {

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
};

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

// ---- accumulation kernels -------------------------------------------------------------------

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

// ---- case A: the innermost loop dimension is reduced -----------------------------------------

// A block's state while its elements are pushed in pieces: fused_group.hpp runs a block as
// several pieces, other loops running between them. The SIMD path keeps four batch accumulators
// (one per batch of each 4-batch step) beside the scalar state. Pieces whose length is a
// multiple of 4 batches (all but a block's last) leave nothing to the one-batch and scalar
// tails, so a block pushed in such pieces adds exactly what it adds in one piece.
template <class Op, class K, class A, bool Simd>
struct block_acc {
  typename K::state s = K::init();
  typename K::state result() const { return s; }
};
template <class Op, class K, class A>
struct block_acc<Op, K, A, true> {
  using B = xsimd::batch<A>;
  B a0 = B(Op::template identity<A>()), a1 = a0, a2 = a0, a3 = a0;
  typename K::state s = K::init();
  bool used = false;  // whether any batch was added (else the accumulators hold identities)
  typename K::state result() const {
    if (!used) return s;
    return K::merge(Op::hreduce(Op::simd(Op::simd(a0, a1), Op::simd(a2, a3))), s);
  }
};

// A second output written in the same pass as a reduction, at the same element positions: none
// by default. fused_group.hpp's gradient loop stores a cotangent there
// (backend/cpu/fused_group.hpp).
struct no_side_store {
  no_side_store row() const { return {}; }
  void start_row(std::int64_t const*, std::size_t) {}
  void batch(std::int64_t) {}
  void scalar(std::int64_t) {}
};

// accumulate_a's scalar path, into state s: one instantiation per evaluator whichever loop
// variant calls it.
template <class Op, class K, class Ev, class Side>
void accumulate_scalar(typename K::state& s, Ev& ev, geometry const& g, std::int64_t* idx,
                       std::int64_t lo, std::int64_t hi, Side&& side) {
  using A = typename Ev::compute_type;
  walk(g, g.nk1, g.n, idx, lo, hi, [&](std::int64_t j, std::int64_t je, std::int64_t rowpos) {
    ev.start_row(idx, g.n);
    auto sd = side.row();
    sd.start_row(idx, g.n);
    for (; j < je; ++j) {
      K::push(s, A(ev.scalar(j)), rowpos + j);
      sd.scalar(j);
    }
  });
}

// Pushes elements [lo, hi) of the reduced sub-space for the output whose kept indices are in
// idx[0 .. nk1) into acc (the SIMD path for plain reductions only). Positions (for argmax) are
// flat indices into the reduced sub-space. Acc is a block_acc, with batches when Simd (used when
// simd). side.row() gets every element the reduction reads, a batch where the reduction reads a
// batch.
template <class Op, class K, bool Simd, bool Unit, class Ev, class Acc, class Side = no_side_store>
void accumulate_a(Acc& acc, Ev& ev, geometry const& g, std::int64_t* idx, std::int64_t lo,
                  std::int64_t hi, bool simd, Side&& side = {}) {
  using A = typename Ev::compute_type;
  if constexpr (Simd) {
    static_assert(!K::indexed);
    if (simd) {
      using B = xsimd::batch<A>;
      constexpr std::int64_t W = std::int64_t(B::size);
      walk(g, g.nk1, g.n, idx, lo, hi, [&](std::int64_t j, std::int64_t je, std::int64_t) {
        ev.start_row(idx, g.n);
        auto sd = side.row();
        sd.start_row(idx, g.n);
        acc.used = acc.used || j + W <= je;
        // Local copies: the captured accumulators live in memory, and GCC does not inline this
        // lambda, so accumulating into them directly costs a load and a store per batch.
        B b0 = acc.a0, b1 = acc.a1, b2 = acc.a2, b3 = acc.a3;
        for (; j + 4 * W <= je; j += 4 * W) {
          b0 = Op::simd(b0, ev.template simd<unit_access<Unit>>(j));
          b1 = Op::simd(b1, ev.template simd<unit_access<Unit>>(j + W));
          b2 = Op::simd(b2, ev.template simd<unit_access<Unit>>(j + 2 * W));
          b3 = Op::simd(b3, ev.template simd<unit_access<Unit>>(j + 3 * W));
          sd.batch(j);
          sd.batch(j + W);
          sd.batch(j + 2 * W);
          sd.batch(j + 3 * W);
        }
        for (; j + W <= je; j += W) {
          b0 = Op::simd(b0, ev.template simd<unit_access<Unit>>(j));
          sd.batch(j);
        }
        acc.a0 = b0, acc.a1 = b1, acc.a2 = b2, acc.a3 = b3;
        for (; j < je; ++j) {
          K::push(acc.s, A(ev.scalar(j)), 0);
          sd.scalar(j);
        }
      });
      return;
    }
  }
  accumulate_scalar<Op, K>(acc.s, ev, g, idx, lo, hi, side);
}

// Reduces elements [lo, hi) of the reduced sub-space for the output whose kept indices are in
// idx[0 .. nk1).
template <class Op, class K, bool Simd, bool Unit, class Ev>
typename K::state block_a(Ev& ev, geometry const& g, std::int64_t* idx, std::int64_t lo,
                          std::int64_t hi) {
  using A = typename Ev::compute_type;
  if constexpr (Simd && K::indexed) {
    if (!g.simd) {
      typename K::state s = K::init();
      accumulate_scalar<Op, K>(s, ev, g, idx, lo, hi, no_side_store{});
      return s;
    }
    typename K::state s = K::init();
    // Per-lane best value and its position relative to lo, kept as A (exact: lo..hi is at most
    // one block, far below 2^24).
    using B = xsimd::batch<A>;
    constexpr std::size_t W = B::size;
    alignas(64) A lane_pos[W];
    for (std::size_t l = 0; l < W; ++l) lane_pos[l] = A(l);
    B const iota = B::load_aligned(lane_pos);
    B bv(Op::template identity<A>()), bi(A(-1));
    walk(g, g.nk1, g.n, idx, lo, hi, [&](std::int64_t j, std::int64_t je, std::int64_t rowpos) {
      ev.start_row(idx, g.n);
      for (; j + std::int64_t(W) <= je; j += std::int64_t(W)) {
        B x = ev.template simd<unit_access<Unit>>(j);
        auto m = Op::simd_better(x, bv);
        bv = xsimd::select(m, x, bv);
        bi = xsimd::select(m, B(A(rowpos + j - lo)) + iota, bi);
      }
      for (; j < je; ++j) K::push(s, A(ev.scalar(j)), rowpos + j);
    });
    alignas(64) A lv[W], li[W];
    bv.store_aligned(lv);
    bi.store_aligned(li);
    for (std::size_t l = 0; l < W; ++l)
      s = K::merge(s, {lv[l], li[l] < A(0) ? std::int64_t(-1) : std::int64_t(li[l]) + lo});
    return s;
  } else {
    block_acc<Op, K, A, Simd> acc;
    accumulate_a<Op, K, Simd, Unit>(acc, ev, g, idx, lo, hi, g.simd);
    return acc.result();
  }
}

template <class Op, class K, bool Simd, bool Unit, class Ev>
typename K::state tree_a(Ev& ev, geometry const& g, std::int64_t* idx, std::int64_t lo,
                         std::int64_t hi) {
  if (hi - lo == 1)
    return block_a<Op, K, Simd, Unit>(ev, g, idx, lo * block_elems,
                                      std::min(g.count, (lo + 1) * block_elems));
  std::int64_t mid = lo + (hi - lo) / 2;
  auto a = tree_a<Op, K, Simd, Unit>(ev, g, idx, lo, mid);
  auto b = tree_a<Op, K, Simd, Unit>(ev, g, idx, mid, hi);
  return K::merge(a, b);
}

template <class Op, bool Simd, bool Unit, class T, class Ev>
void run_a(Ev const& ev0, geometry const& g, T* out) {
  using A = typename Ev::compute_type;
  using K = kernel_for<Op, A>;
  std::int64_t nout = g.k1, nb = ceil_div(g.count, block_elems);
  auto one = [&](Ev& ev, std::int64_t o) {
    std::array<std::int64_t, max_rank> idx{};
    unflatten(o, g, 0, g.nk1, idx.data());
    std::int64_t off = out_offset(g, idx.data(), 0, g.nk1);
    auto s = tree_a<Op, K, Simd, Unit>(ev, g, idx.data(), 0, nb);
    out[off] = T(Op::finalize(s, std::size_t(g.count)));
  };
  std::size_t threads = threads_for(nout * g.count);
  if (threads == 1 || (nout >= std::int64_t(threads))) {
    std::int64_t nchunks = std::min<std::int64_t>(nout, std::int64_t(threads) * 4);
    std::int64_t per = ceil_div(nout, nchunks);
    nchunks = ceil_div(nout, per);
    auto body = [&](std::size_t c) {
      Ev ev = ev0;
      std::int64_t lo = std::int64_t(c) * per, hi = std::min(nout, lo + per);
      for (std::int64_t o = lo; o < hi; ++o) one(ev, o);
    };
    if (threads == 1 || nchunks == 1)
      for (std::int64_t c = 0; c < nchunks; ++c) body(std::size_t(c));
    else
      thread_pool::instance().parallel_for(std::size_t(nchunks), body);
    return;
  }
  // Few outputs, many elements each: the subtrees of each output's tree run in parallel.
  std::size_t depth = task_depth(threads);
  std::vector<std::array<std::int64_t, 2>> tasks;
  collect_tasks(0, nb, depth, tasks);
  row_buffer<typename K::state> res(tasks.size());
  for (std::int64_t o = 0; o < nout; ++o) {
    std::array<std::int64_t, max_rank> idx0{};
    unflatten(o, g, 0, g.nk1, idx0.data());
    thread_pool::instance().parallel_for(tasks.size(), [&](std::size_t t) {
      Ev ev = ev0;
      auto idx = idx0;
      res[t] = tree_a<Op, K, Simd, Unit>(ev, g, idx.data(), tasks[t][0], tasks[t][1]);
    });
    std::size_t k = 0;
    auto& s = combine_tasks(0, nb, depth, res.data(), k,
                            [](auto& a, auto const& b) { a = K::merge(a, b); });
    out[out_offset(g, idx0.data(), 0, g.nk1)] = T(Op::finalize(s, std::size_t(g.count)));
  }
}

// Whether case B's rows are short (one kept dim of fewer than W elements) and follow each other
// in memory in every leaf, so that block_fold applies.
template <class Ev>
bool fold_ok(Ev ev, geometry const& g, std::size_t W) {
  if (g.nk2 != 1 || g.nr == 0 || g.dims[g.n - 1] >= std::int64_t(W)) return false;
  bool ok = true;
  ev.for_each_leaf([&](auto& leaf) { ok = ok && leaf.stride[g.n - 2] == g.dims[g.n - 1]; });
  return ok;
}

// ---- case B: the innermost loop dimension is kept --------------------------------------------

// One work item: the outputs at K1 index q and K2 flat range [c0, c1).
template <class Op, class K, bool Simd, bool Unit, class Ev>
struct item_b {
  using A = typename Ev::compute_type;
  using rows = typename K::rows;
  Ev& ev;
  geometry const& g;
  std::array<std::int64_t, max_rank> idx{};
  std::int64_t c0, c1;
  std::size_t w;
  std::size_t d2;  // first K2 dim

  item_b(Ev& e, geometry const& geo, std::int64_t q, std::int64_t lo, std::int64_t hi)
      : ev(e), g(geo), c0(lo), c1(hi), w(std::size_t(hi - lo)), d2(geo.nk1 + geo.nr) {
    unflatten(q, g, 0, g.nk1, idx.data());
  }

  // Folds elements [j, je) of the current row (reduced row r) into acc[base + j ...].
  void segment(rows& acc, std::int64_t r, std::int64_t j, std::int64_t je, std::int64_t base) {
    [[maybe_unused]] bool const simd = g.simd;  // a local: no store to the rows can change it
    if constexpr (K::indexed) {
      if constexpr (Simd) {
        // Updates are rare after the first rows: test a batch, update its lanes only if one
        // of them improves.
        using B = xsimd::batch<A>;
        constexpr std::int64_t W = std::int64_t(B::size);
        for (; simd && j + W <= je; j += W) {
          B x = ev.template simd<unit_access<Unit>>(j);
          if (!xsimd::any(Op::simd_better(x, B::load_unaligned(acc.v.data() + base + j)))) continue;
          alignas(64) A xs[B::size];
          x.store_aligned(xs);
          for (std::int64_t l = 0; l < W; ++l) {
            std::size_t k = std::size_t(base + j + l);
            if (Op::better(xs[l], acc.v[k])) {
              acc.v[k] = xs[l];
              acc.i[k] = r;
            }
          }
        }
      }
      for (; j < je; ++j) {
        A x = A(ev.scalar(j));
        std::size_t k = std::size_t(base + j);
        if (Op::better(x, acc.v[k])) {
          acc.v[k] = x;
          acc.i[k] = r;
        }
      }
    } else {
      A* a = acc.v.data() + base;
      if constexpr (Simd) {
        using B = xsimd::batch<A>;
        constexpr std::int64_t W = std::int64_t(B::size);
        if (simd)
          for (; j + W <= je; j += W)
            Op::simd(B::load_unaligned(a + j), ev.template simd<unit_access<Unit>>(j))
                .store_unaligned(a + j);
      }
      for (; j < je; ++j) a[j] = Op::combine(a[j], A(ev.scalar(j)));
    }
  }

  // Accumulates reduced rows [rlo, rhi) into acc (reset first).
  void block(rows& acc, std::int64_t rlo, std::int64_t rhi) {
    acc.reset(w);
    unflatten(rlo, g, g.nk1, d2, idx.data());
    for (std::int64_t r = rlo; r < rhi; ++r) {
      if (g.nk2 == 1) {  // the kept elements are one row segment
        ev.start_row(idx.data(), g.n);
        segment(acc, r, c0, c1, -c0);
      } else {
        walk(g, d2, g.n, idx.data(), c0, c1, [&](std::int64_t j, std::int64_t je, std::int64_t rp) {
          ev.start_row(idx.data(), g.n);
          segment(acc, r, j, je, rp - c0);  // acc index of element j is rp - c0 + j
        });
      }
      increment(g, g.nk1, d2, idx.data());
    }
  }

  // Short rows (L2 < W kept elements) that follow each other in memory (the innermost reduced
  // dim has stride L2 in every leaf): a run of m rows is m * L2 contiguous elements, read with
  // full batches into P = L2 / gcd(L2, W) rotating accumulators, in which lane l of accumulator p
  // always holds column (p * W + l) % L2. E.g. sum(x, 0) for x of shape (n, 3).
  void block_fold(rows& acc, std::int64_t rlo, std::int64_t rhi) {
    using B = xsimd::batch<A>;
    constexpr std::int64_t W = std::int64_t(B::size);
    std::int64_t L2 = g.dims[g.n - 1];
    std::int64_t P = L2 / std::gcd(L2, W);
    std::array<B, B::size> accs;
    accs.fill(B(Op::template identity<A>()));
    acc.reset(w);
    A* a = acc.v.data();
    std::size_t dr = d2 - 1;  // the innermost reduced dim
    for (std::int64_t r = rlo; r < rhi;) {
      unflatten(r, g, g.nk1, d2, idx.data());
      std::int64_t m = std::min(rhi - r, g.dims[dr] - idx[dr]);
      ev.start_row(idx.data(), g.n);
      std::int64_t len = m * L2, j = 0, t = 0;
      for (; j + W <= len; j += W) {
        accs[std::size_t(t)] =
            Op::simd(accs[std::size_t(t)], ev.template simd<row_access::unit>(j));
        if (++t == P) t = 0;
      }
      for (; j < len; ++j) a[j % L2] = Op::combine(a[j % L2], A(ev.scalar(j)));
      r += m;
    }
    alignas(64) A lanes[B::size];
    for (std::int64_t p = 0; p < P; ++p) {
      accs[std::size_t(p)].store_aligned(lanes);
      for (std::int64_t l = 0; l < W; ++l) {
        std::int64_t col = (p * W + l) % L2;
        a[col] = Op::combine(a[col], lanes[l]);
      }
    }
  }

  // The pairwise tree over blocks [lo, hi) into acc; scratch holds one row set per level.
  void tree(rows& acc, std::int64_t lo, std::int64_t hi, std::vector<rows>& scratch,
            std::size_t level) {
    if (hi - lo == 1) {
      std::int64_t rb = g.rows_per_block;
      if constexpr (Simd && !K::indexed) {
        if (g.fold) return block_fold(acc, lo * rb, std::min(g.count, (lo + 1) * rb));
      }
      block(acc, lo * rb, std::min(g.count, (lo + 1) * rb));
      return;
    }
    std::int64_t mid = lo + (hi - lo) / 2;
    tree(acc, lo, mid, scratch, level + 1);
    tree(scratch[level], mid, hi, scratch, level + 1);
    K::template merge_rows<Simd>(acc, scratch[level], w, g.simd);
  }

  static std::vector<rows> make_scratch(std::int64_t nblocks, std::size_t w) {
    std::size_t levels = 1;
    while ((std::int64_t(1) << levels) < nblocks) ++levels;
    return std::vector<rows>(levels + 1, rows(w));
  }

  template <class T>
  void write(rows const& acc, T* out) {
    std::int64_t off1 = out_offset(g, idx.data(), 0, g.nk1);
    walk(g, d2, g.n, idx.data(), c0, c1, [&](std::int64_t j, std::int64_t je, std::int64_t rp) {
      std::int64_t off = off1 + out_offset(g, idx.data(), d2, g.n - 1);
      std::int64_t os = g.ost[g.n - 1];
      for (; j < je; ++j)
        out[off + j * os] = T(Op::finalize(acc.get(rp - c0 + j), std::size_t(g.count)));
    });
  }
};

template <class Op, bool Simd, bool Unit, class T, class Ev>
void run_b(Ev const& ev0, geometry const& g0, T* out) {
  using A = typename Ev::compute_type;
  using K = kernel_for<Op, A>;
  using item = item_b<Op, K, Simd, Unit, Ev>;
  using rows = typename K::rows;
  geometry g = g0;
  g.rows_per_block = std::max(block_rows, block_b_elems / std::min(g.k2, chunk_cols));
  if constexpr (Simd && Unit && !K::indexed)
    g.fold = g.simd && fold_ok(ev0, g, xsimd::batch<A>::size);
  std::int64_t nchunks = ceil_div(g.k2, chunk_cols);
  std::int64_t items = g.k1 * nchunks;
  std::int64_t nb = ceil_div(g.count, g.rows_per_block);
  auto range = [&](std::int64_t it) {
    std::int64_t c = it % nchunks;
    return std::array<std::int64_t, 3>{it / nchunks, c * chunk_cols,
                                       std::min(g.k2, (c + 1) * chunk_cols)};
  };
  std::size_t threads = threads_for(g.k1 * g.k2 * g.count);
  if (threads == 1 || items >= std::int64_t(threads) || nb == 1) {
    std::int64_t nparts = std::min<std::int64_t>(items, std::int64_t(threads) * 4);
    std::int64_t per = ceil_div(items, nparts);
    nparts = ceil_div(items, per);
    auto body = [&](std::size_t p) {
      Ev ev = ev0;
      std::size_t wmax = std::size_t(std::min(g.k2, chunk_cols));
      rows acc(wmax);
      auto scratch = item::make_scratch(nb, wmax);
      std::int64_t lo = std::int64_t(p) * per, hi = std::min(items, lo + per);
      for (std::int64_t it = lo; it < hi; ++it) {
        auto [q, c0, c1] = range(it);
        item x(ev, g, q, c0, c1);
        x.tree(acc, 0, nb, scratch, 0);
        x.write(acc, out);
      }
    };
    if (threads == 1 || nparts == 1)
      for (std::int64_t p = 0; p < nparts; ++p) body(std::size_t(p));
    else
      thread_pool::instance().parallel_for(std::size_t(nparts), body);
    return;
  }
  // Few work items with many reduced rows: subtrees run in parallel, combined in tree order.
  std::size_t depth = task_depth(threads);
  std::vector<std::array<std::int64_t, 2>> tasks;
  collect_tasks(0, nb, depth, tasks);
  for (std::int64_t it = 0; it < items; ++it) {
    auto [q, c0, c1] = range(it);
    std::size_t w = std::size_t(c1 - c0);
    std::vector<rows> res(tasks.size(), rows(w));
    // The bindings are copied into the lambda: clang before 16 cannot capture them.
    thread_pool::instance().parallel_for(tasks.size(), [&, q = q, c0 = c0, c1 = c1](std::size_t t) {
      Ev ev = ev0;
      item x(ev, g, q, c0, c1);
      auto scratch = item::make_scratch(tasks[t][1] - tasks[t][0], w);
      x.tree(res[t], tasks[t][0], tasks[t][1], scratch, 0);
    });
    std::size_t k = 0;
    auto& acc = combine_tasks(0, nb, depth, res.data(), k, [&](rows& a, rows const& b) {
      K::template merge_rows<Simd>(a, b, w, g.simd);
    });
    Ev ev = ev0;
    item(ev, g, q, c0, c1).write(acc, out);
  }
}

// ---- set-up: order, coalesce, dispatch -------------------------------------------------------

template <class A>
constexpr std::size_t simd_width() {
  if constexpr (simd_type_v<A>)
    return xsimd::batch<A>::size;
  else
    return 1;
}

// An evaluator with its leaves permuted and coalesced for one loop order, and the loop.
template <class Ev>
struct plan {
  Ev ev;
  geometry g;
  bool unit = true;
};

// Axes in a loop order: as many as a shape has, inline (a reduction allocates no bookkeeping).
using axis_list = small_vector<std::size_t, max_rank>;

template <class Ev>
plan<Ev> make_plan(Ev const& ev0, axis_list const& perm, zenith::shape const& S,
                   std::array<std::int64_t, max_rank> const& ost) {
  plan<Ev> p{ev0, {}, true};
  std::size_t r = S.size();
  zenith::shape sp;
  std::array<std::int64_t, max_rank> ostp{};
  if (r > 0) {
    views::transpose t;
    for (std::size_t k = 0; k < r; ++k) {
      t.perm[k] = perm[k];
      sp.push_back(S[perm[k]]);
      ostp[k] = ost[perm[k]];
    }
    affine_map m = t.map(S);
    p.ev.for_each_leaf([&](auto& leaf) { leaf.apply(m); });
  }
  stride_list strides;
  strides.push_back(ostp);
  p.ev.for_each_leaf([&](auto& leaf) { strides.push_back(leaf.stride); });
  loop_space ls = coalesce(sp, strides);
  geometry& g = p.g;
  g.n = ls.rank;
  g.dims = ls.dims;
  g.ost = regroup(ostp, ls);
  p.ev.for_each_leaf([&](auto& leaf) {
    leaf.stride = regroup(leaf.stride, ls);
    leaf.rank = ls.rank;
    p.unit = p.unit && leaf.stride[ls.rank - 1] == 1;
  });
  // Trailing kept dims are K2 (none in case A), then the reduced dims, then K1.
  std::size_t k = g.n;
  while (k > 0 && g.ost[k - 1] != 0) --k;
  g.nk2 = g.n - k;
  while (k > 0 && g.ost[k - 1] == 0) --k;
  g.nr = g.n - g.nk2 - k;
  g.nk1 = k;
  g.count = 1;
  for (std::size_t d = g.nk1; d < g.nk1 + g.nr; ++d) g.count *= g.dims[d];
  g.k1 = 1;
  for (std::size_t d = 0; d < g.nk1; ++d) g.k1 *= g.dims[d];
  g.k2 = 1;
  for (std::size_t d = g.nk1 + g.nr; d < g.n; ++d) g.k2 *= g.dims[d];
  return p;
}

// Output strides on the child's axes (0 on reduced ones), for an output of shape out_shape
// with or without the reduced axes kept as 1.
inline std::array<std::int64_t, max_rank> output_strides(zenith::shape const& out_shape,
                                                         std::size_t r, std::uint32_t mask) {
  std::array<std::int64_t, max_rank> ost{};
  auto os = row_major_strides(out_shape);
  bool keep = out_shape.size() == r;
  std::size_t ko = 0;
  for (std::size_t k = 0; k < r; ++k) {
    if (mask >> k & 1) {
      ost[k] = 0;
      if (keep) ++ko;
    } else {
      ost[k] = os[ko++];
    }
  }
  return ost;
}

// The two loop orders a reduction can take (perm_b is empty when case B has no rows), which one
// the memory layout favours, and the kept axis with the closest elements (max_rank if none).
struct loop_orders {
  axis_list perm_a, perm_b;
  bool natural_a = true;
  std::size_t kin = max_rank;
};

// Sorts axes by descending key, keeping the order of equal keys (at most max_rank of them, so an
// insertion sort, which needs no scratch buffer as std::stable_sort does).
inline void sort_axes_by_key(axis_list& axes, std::array<std::uint64_t, max_rank> const& key) {
  for (std::size_t i = 1; i < axes.size(); ++i)
    for (std::size_t j = i; j > 0 && key[axes[j - 1]] < key[axes[j]]; --j)
      std::swap(axes[j - 1], axes[j]);
}

// Chooses the loop orders from the leaves' strides alone. Not a template, so that every
// reduction instantiation shares one copy.
inline loop_orders order_axes(zenith::shape const& S, std::uint32_t mask,
                              stride_list const& leaf_strides, bool keep_reduced_order) {
  std::size_t r = S.size();
  loop_orders o;
  // Order the axes by how far apart their elements are in memory (summed over the leaves);
  // an axis no leaf moves along (broadcast) sorts outermost.
  std::array<std::uint64_t, max_rank> key{};
  for (auto const& stride : leaf_strides)
    for (std::size_t k = 0; k < r; ++k)
      key[k] += std::uint64_t(stride[k] < 0 ? -stride[k] : stride[k]);
  for (std::size_t k = 0; k < r; ++k)
    if (key[k] == 0) key[k] = std::numeric_limits<std::uint64_t>::max();
  axis_list kept, red;
  for (std::size_t k = 0; k < r; ++k) (mask >> k & 1 ? red : kept).push_back(k);
  sort_axes_by_key(kept, key);
  // argmax / argmin positions are row-major over the reduced axes: keep their order.
  if (!keep_reduced_order) sort_axes_by_key(red, key);
  // The axis with the closest elements decides the natural case: A when it is reduced, B when
  // it is kept (then the kept axes inside every reduced axis form the rows).
  std::size_t inner = max_rank;
  for (std::size_t k = 0; k < r; ++k)
    if (S[k] > 1 && (inner == max_rank || key[k] <= key[inner])) inner = k;
  auto& perm_a = o.perm_a;
  auto& perm_b = o.perm_b;
  perm_a = kept;
  for (std::size_t k : red) perm_a.push_back(k);
  auto& kin = o.kin;
  for (std::size_t k : kept)
    if (S[k] > 1) kin = k;
  auto& natural_a = o.natural_a;
  natural_a = inner == max_rank || (mask >> inner & 1);
  if (!natural_a) {
    std::uint64_t min_red = std::numeric_limits<std::uint64_t>::max();
    bool any_red = false;
    for (std::size_t k : red)
      if (S[k] > 1) {
        min_red = any_red ? std::min(min_red, key[k]) : key[k];
        any_red = true;
      }
    axis_list k2;
    for (std::size_t k : kept) (any_red && key[k] >= min_red ? perm_b : k2).push_back(k);
    for (std::size_t k : red) perm_b.push_back(k);
    for (std::size_t k : k2) perm_b.push_back(k);
  } else if (kin != max_rank) {  // the alternative to A: rows along kin
    for (std::size_t k : kept)
      if (k != kin) perm_b.push_back(k);
    for (std::size_t k : red) perm_b.push_back(k);
    perm_b.push_back(kin);
  }
  return o;
}

// A planned reduction: what reduce_into runs, and what a recording keeps of it
// (core/recording.hpp).
template <class Op, class T, class A, class Ev>
struct reduce_step {
  Ev ev;
  geometry g;
  bool unit = true;
  T* out;

  void run() {
    using E = std::remove_cvref_t<Ev>;
    if constexpr (!std::is_reference_v<Ev>) {
      // A recorded step: the same loops on the evaluator it owns, compiled once per Ev.
      reduce_step<Op, T, A, E&>{ev, g, unit, out}.run();
      return;
    }
    constexpr bool can_simd = !std::is_same_v<A, bool> && simd_type_v<A> &&
                              std::is_same_v<typename E::compute_type, A> &&
                              E::template vectorizable<A>();
    // Two variants per expression at most: unit inner strides, and any strides. With SIMD off
    // the latter runs its scalar loops (geometry::simd).
    geometry gs = g;
    gs.simd = can_simd && simd_enabled();
    auto dispatch = [&](auto run) {
      if constexpr (can_simd) {
        if (gs.simd && unit) return run.template operator()<true, true>();
      }
      run.template operator()<can_simd, false>();
    };
    if (g.nk2 == 0) {
      dispatch([&]<bool Simd, bool Unit>() { run_a<Op, Simd, Unit>(ev, gs, out); });
    } else {
      dispatch([&]<bool Simd, bool Unit>() { run_b<Op, Simd, Unit>(ev, gs, out); });
    }
  }

  void pointers(pointer_list& l) {
    l.writes(out);
    l.reads_leaves(ev);
  }
};

// Reduces `child` over the axes in mask into out (its shape: the kept axes, with or without
// the reduced ones as 1).
template <class Op, class T, class C>
void reduce_into(array<T>& out, C const& child, std::uint32_t mask) {
  using Tin = value_t<C>;
  using A = compute_t<Tin>;
  zenith::shape S = child.shape();
  std::size_t r = S.size();
  std::int64_t count = std::int64_t(reduced_count(S, mask));
  if (out.size() == 0) return;
  if (count == 0) {
    if constexpr (!Op::has_identity) {
      throw value_error(std::string(Op::name) + ": zero-size reduction of shape " + S.str() +
                        " has no identity");
    } else {
      T v = T(Op::finalize(Op::template identity<A>(), 0));
      fill_values(out.data(), out.size(), v);
      return;
    }
  }

  auto ev = make_evaluator(child);
  using Ev = decltype(ev);

  auto ost = output_strides(out.shape(), r, mask);
  stride_list leaf_strides;
  ev.for_each_leaf([&](auto& leaf) { leaf_strides.push_back(leaf.stride); });
  loop_orders const orders = order_axes(S, mask, leaf_strides, indexed_reduction<Op>);
  bool const natural_a = orders.natural_a;
  axis_list const &perm_a = orders.perm_a, &perm_b = orders.perm_b;
  std::size_t const kin = orders.kin;
  // Short rows waste the vector loop and cost per-row overhead: when the natural order's rows
  // are short, take the other order if its rows are longer (e.g. sum over axis 1 of (n, 4)).
  constexpr std::int64_t short_row = 16;
  plan<Ev> p = make_plan(ev, natural_a ? perm_a : perm_b, S, ost);
  bool folds = !natural_a && simd_enabled() && fold_ok(p.ev, p.g, simd_width<A>());
  if (p.g.dims[p.g.n - 1] < short_row && (!natural_a || kin != max_rank) && !folds) {
    plan<Ev> q = make_plan(ev, natural_a ? perm_b : perm_a, S, ost);
    if (q.g.dims[q.g.n - 1] > p.g.dims[p.g.n - 1]) p = std::move(q);
  }
  if (active_recording()) {
    reduce_step<Op, T, A, Ev> step{std::move(p.ev), p.g, p.unit, out.data()};
    return run_step(step);
  }
  reduce_step<Op, T, A, Ev&> step{p.ev, p.g, p.unit, out.data()};  // not recording: ev itself
  step.run();
}

// Whether evaluating E computes a barrier (which a second pass would compute again).
template <class E>
struct has_barrier : std::bool_constant<barrier_expression<E>> {};
template <class Op, class... Cs>
struct has_barrier<map_node<Op, Cs...>> : std::bool_constant<(has_barrier<Cs>::value || ...)> {};
template <class V, class C>
struct has_barrier<view_node<V, C>> : has_barrier<C> {};
template <class C>
struct has_barrier<reshape_node<C>> : has_barrier<C> {};

// logsumexp's two loops over its (small) output, as steps (core/recording.hpp): the max where
// finite and 0 elsewhere; then m + log(s), written over m.
template <class T, class W>
struct lse_shift_step {
  T* m;
  std::size_t n;
  void run() {
    for (std::size_t i = 0; i < n; ++i)
      if (!std::isfinite(W(m[i]))) m[i] = T(W(0));
  }
  void pointers(pointer_list& l) { l.writes(m); }
};
template <class T, class W>
struct lse_finish_step {
  T* m;
  W const* s;
  std::size_t n;
  void run() {
    using std::log;
    for (std::size_t i = 0; i < n; ++i) m[i] = T(W(m[i]) + log(s[i]));
  }
  void pointers(pointer_list& l) {
    l.writes(m);
    l.reads(s);
  }
};

// logsumexp = m + log(sum(exp(x - m))), m the max where finite and 0 elsewhere, so that all
// -inf gives -inf, a +inf gives +inf and a NaN gives NaN.
template <class C>
array<value_t<C>> eval_logsumexp(reduce_node<ops::reduce_logsumexp, C> const& e) {
  using T = value_t<C>;
  using W = compute_t<T>;
  if constexpr (has_barrier<C>::value) {
    array<T> x =
        evaluate_untraced<T>(e.child);  // the child is read twice: compute its barriers once
    return eval_logsumexp(reduce_node<ops::reduce_logsumexp, array<T>>(x, e.axes, e.keepdims));
  } else {
    zenith::shape out_shape = e.shape();
    if (out_shape.numel() == 0 || e.count() == 0)
      return full<T>(out_shape, T(-std::numeric_limits<W>::infinity()));
    array<T> m = eval_barrier(reduce_node<ops::reduce_max, C>(e.child, e.axes, true));
    lse_shift_step<T, W> shift{m.data(), m.size()};
    run_step(shift);
    auto shifted = exp(convert<W>(e.child) - convert<W>(m));
    array<W> s = eval_barrier(
        reduce_node<ops::reduce_sum, decltype(shifted)>(std::move(shifted), e.axes, true));
    // m + log(s) on the (small) output, written over m.
    lse_finish_step<T, W> finish{m.data(), s.data(), m.size()};
    run_step(finish);
    return array<T>::from_buffer(m.storage(), m.data(), out_shape);
  }
}

}  // namespace detail::red

template <class Op, class C>
array<typename reduce_node<Op, C>::value_type> eval_barrier(reduce_node<Op, C> const& e) {
  if constexpr (std::is_same_v<Op, ops::reduce_logsumexp>) {
    return detail::red::eval_logsumexp(e);
  } else {
    auto out = array<typename reduce_node<Op, C>::value_type>::empty(e.shape());
    detail::red::reduce_into<Op>(out, e.child, e.axes);
    return out;
  }
}

}  // namespace zenith
