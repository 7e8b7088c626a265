#pragma once
// Case B of a CPU reduction (backend/cpu/reduce.hpp): the innermost loop dimension is kept.
// Whole rows of the kept inner axes are accumulated a batch at a time, in blocks of reduced rows
// combined in a fixed pairwise tree; short contiguous rows are folded into full batches.
#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "evaluator.hpp"
#include "fused_loop.hpp"
#include "reduce_geometry.hpp"

namespace zenith::detail::red {

// Whether case B's rows are short (one kept dim of fewer than W elements) and follow each other
// in memory in every leaf, so that block_fold applies.
template <class Ev>
bool fold_ok(Ev& ev, geometry const& g, std::size_t W) {
  if (g.nk2 != 1 || g.nr == 0 || g.dims[g.n - 1] >= std::int64_t(W)) return false;
  bool ok = true;
  ev.for_each_leaf([&](auto& leaf) { ok = ok && leaf.stride[g.n - 2] == g.dims[g.n - 1]; });
  return ok;
}

// A block of case B on one expression: what reduce_source's block_b runs.
template <class Op, class K, bool Simd, bool Unit, class Ev>
struct block_b {
  using A = typename Ev::compute_type;
  using rows = typename K::rows;
  Ev& ev;
  geometry const& g;
  std::int64_t* idx;  // K1 indices set; the reduced ones are this block's to set
  std::int64_t c0, c1;
  std::size_t d2;  // first K2 dim

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
    acc.reset(std::size_t(c1 - c0));
    unflatten(rlo, g, g.nk1, d2, idx);
    for (std::int64_t r = rlo; r < rhi; ++r) {
      if (g.nk2 == 1) {  // the kept elements are one row segment
        ev.start_row(idx, g.n);
        segment(acc, r, c0, c1, -c0);
      } else {
        walk(g, d2, g.n, idx, c0, c1, [&](std::int64_t j, std::int64_t je, std::int64_t rp) {
          ev.start_row(idx, g.n);
          segment(acc, r, j, je, rp - c0);  // acc index of element j is rp - c0 + j
        });
      }
      increment(g, g.nk1, d2, idx);
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
    acc.reset(std::size_t(c1 - c0));
    A* a = acc.v.data();
    std::size_t dr = d2 - 1;  // the innermost reduced dim
    for (std::int64_t r = rlo; r < rhi;) {
      unflatten(r, g, g.nk1, d2, idx);
      std::int64_t m = std::min(rhi - r, g.dims[dr] - idx[dr]);
      ev.start_row(idx, g.n);
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
};

// block_b behind reduce_source's pointer: folded when the loop set g.fold (only a unit-stride
// plain reduction with SIMD does).
template <class Op, bool Simd, bool Unit, class Ev>
void block_b_of(void* ev, geometry const& g, std::int64_t* idx,
                typename kernel_for<Op, typename Ev::compute_type>::rows& acc, std::int64_t rlo,
                std::int64_t rhi, std::int64_t c0, std::int64_t c1) {
  using K = kernel_for<Op, typename Ev::compute_type>;
  block_b<Op, K, Simd, Unit, Ev> b{*static_cast<Ev*>(ev), g, idx, c0, c1, g.nk1 + g.nr};
  if constexpr (Simd && Unit && !K::indexed) {
    if (g.fold) return b.block_fold(acc, rlo, rhi);
  }
  b.block(acc, rlo, rhi);
}

// One work item: the outputs at K1 index q and K2 flat range [c0, c1).
template <class Op, class A>
struct item_b {
  using K = kernel_for<Op, A>;
  using rows = typename K::rows;
  static constexpr bool batches = !std::is_same_v<A, bool> && simd_type_v<A>;
  reduce_source<Op, A> const& src;
  void* ev;
  geometry const& g;
  std::array<std::int64_t, max_rank> idx{};
  std::int64_t c0, c1;
  std::size_t w;
  std::size_t d2;  // first K2 dim

  item_b(reduce_source<Op, A> const& s, void* e, geometry const& geo, std::int64_t q,
         std::int64_t lo, std::int64_t hi)
      : src(s), ev(e), g(geo), c0(lo), c1(hi), w(std::size_t(hi - lo)), d2(geo.nk1 + geo.nr) {
    unflatten(q, g, 0, g.nk1, idx.data());
  }

  // The pairwise tree over blocks [lo, hi) into acc; scratch holds one row set per level.
  void tree(rows& acc, std::int64_t lo, std::int64_t hi, std::vector<rows>& scratch,
            std::size_t level) {
    if (hi - lo == 1) {
      std::int64_t rb = g.rows_per_block;
      src.block_b(ev, g, idx.data(), acc, lo * rb, std::min(g.count, (lo + 1) * rb), c0, c1);
      return;
    }
    std::int64_t mid = lo + (hi - lo) / 2;
    tree(acc, lo, mid, scratch, level + 1);
    tree(scratch[level], mid, hi, scratch, level + 1);
    K::template merge_rows<batches>(acc, scratch[level], w, g.simd);
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
      for (; j < je; ++j) out[off + j * os] = T(finalize<Op>(acc.get(rp - c0 + j), g));
    });
  }
};

// Case B's loops: work items (a K1 index and a chunk of K2) in parallel, or for few items the
// subtrees of each item's tree.
template <class Op, class T, class A>
void run_b(reduce_source<Op, A> const& src, geometry const& g0, T* out) {
  using K = kernel_for<Op, A>;
  using item = item_b<Op, A>;
  using rows = typename K::rows;
  geometry g = g0;
  g.rows_per_block = std::max(block_rows, block_b_elems / std::min(g.k2, chunk_cols));
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
    bool const parallel = threads > 1 && nparts > 1;
    auto body = [&](std::size_t p) {
      task_evaluator ev(src, parallel);
      std::size_t wmax = std::size_t(std::min(g.k2, chunk_cols));
      rows acc(wmax);
      auto scratch = item::make_scratch(nb, wmax);
      std::int64_t lo = std::int64_t(p) * per, hi = std::min(items, lo + per);
      for (std::int64_t it = lo; it < hi; ++it) {
        auto [q, c0, c1] = range(it);
        item x(src, ev.get(), g, q, c0, c1);
        x.tree(acc, 0, nb, scratch, 0);
        x.write(acc, out);
      }
    };
    if (!parallel)
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
      task_evaluator ev(src, true);
      item x(src, ev.get(), g, q, c0, c1);
      auto scratch = item::make_scratch(tasks[t][1] - tasks[t][0], w);
      x.tree(res[t], tasks[t][0], tasks[t][1], scratch, 0);
    });
    std::size_t k = 0;
    auto& acc = combine_tasks(0, nb, depth, res.data(), k, [&](rows& a, rows const& b) {
      K::template merge_rows<item::batches>(a, b, w, g.simd);
    });
    item(src, src.ev, g, q, c0, c1).write(acc, out);
  }
}

}  // namespace zenith::detail::red
