#pragma once
// Case A of a CPU reduction (backend/cpu/reduce.hpp): the innermost loop dimension is reduced.
// Each output's reduced elements are rows read with several xsimd batch accumulators and a
// horizontal reduce, in blocks of block_elems combined in a fixed pairwise tree.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "evaluator.hpp"
#include "fused_loop.hpp"
#include "group_piece.hpp"
#include "reduce_geometry.hpp"

namespace zenith::detail::red {

// A block's state while its elements are pushed in pieces: fused_group.hpp runs a block as
// several pieces, other loops running between them. The SIMD path keeps four batch accumulators
// (one per batch of each 4-batch step) beside the scalar state. Pieces whose length is a
// multiple of 4 batches (all but a block's last) leave nothing to the one-batch and scalar
// tails, so a block pushed in such pieces adds exactly what it adds in one piece.
template <class Op, class K, class A,
          bool Batches = !std::is_same_v<A, bool> && simd_type_v<A> && !K::indexed>
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
// by default. The group's loop of a loss and a gradient stores a cotangent there
// (backend/cpu/group_total.hpp).
struct no_side_store {
  no_side_store row() const { return {}; }
  void start_row(std::int64_t const*, std::size_t) {}
  void batch(std::int64_t) {}
  void scalar(std::int64_t) {}
};

// Whether a side store's batch runs a costly op (its cursor names its evaluator).
template <class Side>
inline constexpr bool costly_side_v = false;
template <class Side>
requires requires { typename Side::evaluator; }
inline constexpr bool costly_side_v<Side> = costly_batch_v<typename Side::evaluator>;

// accumulate_a's scalar path, into state s: one instantiation per evaluator whichever loop
// variant calls it.
template <class Op, class K, class Ev, class Side>
[[gnu::noinline]] void accumulate_scalar(typename K::state& s, Ev& ev, geometry const& g,
                                         std::int64_t* idx, std::int64_t lo, std::int64_t hi,
                                         Side&& side) {
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
template <class Op, class K, bool Simd, row_access RA, class Ev, class Acc,
          class Side = no_side_store>
void accumulate_a(Acc& acc, Ev& ev, geometry const& g, std::int64_t* idx, std::int64_t lo,
                  std::int64_t hi, bool simd, Side&& side = {}) {
  using A = typename Ev::compute_type;
  if constexpr (Simd) {
    static_assert(!K::indexed);
    if (simd) {
      using B = xsimd::batch<A>;
      constexpr std::int64_t W = std::int64_t(B::size);
      constexpr bool costly = costly_batch_v<Ev> || costly_side_v<std::remove_cvref_t<Side>>;
      // A costly body whose only costly values are kept ones (a reuse_node's buffer or piece)
      // is a cheap one under a kept_ access, where no row recomputes them (start_kept).
      constexpr bool keepable = costly && !costly_kept_v<Ev> &&
                                !costly_side_v<std::remove_cvref_t<Side>> && kept_form(RA) != RA;
      walk(g, g.nk1, g.n, idx, lo, hi, [&](std::int64_t j, std::int64_t je, std::int64_t) {
        bool kept = false;
        if constexpr (keepable)
          kept = start_kept(ev, idx, g.n);
        else
          ev.start_row(idx, g.n);
        auto sd = side.row();
        sd.start_row(idx, g.n);
        acc.used = acc.used || j + W <= je;
        // Four independent accumulators: batch i of each run of four whole ones into a_i, the
        // rest into a0. Local copies: the captured accumulators live in memory, and GCC does
        // not inline this lambda, so accumulating into them directly costs a load and a store
        // per batch.
        auto unrolled = [&]<row_access X>(std::integral_constant<row_access, X>) {
          B b0 = acc.a0, b1 = acc.a1, b2 = acc.a2, b3 = acc.a3;
          for (; j + 4 * W <= je; j += 4 * W) {
            b0 = Op::simd(b0, ev.template simd<X>(j));
            b1 = Op::simd(b1, ev.template simd<X>(j + W));
            b2 = Op::simd(b2, ev.template simd<X>(j + 2 * W));
            b3 = Op::simd(b3, ev.template simd<X>(j + 3 * W));
            sd.batch(j);
            sd.batch(j + W);
            sd.batch(j + 2 * W);
            sd.batch(j + 3 * W);
          }
          for (; j + W <= je; j += W) {
            b0 = Op::simd(b0, ev.template simd<X>(j));
            sd.batch(j);
          }
          acc.a0 = b0, acc.a1 = b1, acc.a2 = b2, acc.a3 = b3;
        };
        if constexpr (!costly) {
          unrolled(std::integral_constant<row_access, RA>{});
        } else {
          if constexpr (keepable) {
            if (kept) unrolled(std::integral_constant<row_access, kept_form(RA)>{});
          }
          if (!kept) {
            // One copy of the batch's body and of the side store's (costly_batch_v), adding
            // into the same accumulators in the same order as the unrolled loop.
            B a[4] = {acc.a0, acc.a1, acc.a2, acc.a3};
            std::int64_t batches = (je - j) / W, grouped = batches / 4 * 4;
#pragma GCC unroll 1
            for (std::int64_t i = 0; i < batches; ++i, j += W) {
              B v = ev.template simd<RA>(j);
              B& to = a[i < grouped ? i % 4 : 0];
              to = Op::simd(to, v);
              sd.batch(j);
            }
            acc.a0 = a[0], acc.a1 = a[1], acc.a2 = a[2], acc.a3 = a[3];
          }
        }
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
    block_acc<Op, K, A> acc;
    accumulate_a<Op, K, Simd, unit_access<Unit>>(acc, ev, g, idx, lo, hi, g.simd);
    return acc.result();
  }
}

// block_a behind reduce_source's pointer.
template <class Op, bool Simd, bool Unit, class Ev>
typename kernel_for<Op, typename Ev::compute_type>::state block_a_of(void* ev, geometry const& g,
                                                                     std::int64_t* idx,
                                                                     std::int64_t lo,
                                                                     std::int64_t hi) {
  using K = kernel_for<Op, typename Ev::compute_type>;
  return block_a<Op, K, Simd, Unit>(*static_cast<Ev*>(ev), g, idx, lo, hi);
}

// Case A's outputs [lo, hi), each a single block, behind reduce_source's pointer.
template <class Op, bool Simd, bool Unit, class Ev>
void outputs_a_of(void* ev, geometry const& g, std::int64_t lo, std::int64_t hi,
                  typename kernel_for<Op, typename Ev::compute_type>::state* s) {
  using K = kernel_for<Op, typename Ev::compute_type>;
  std::array<std::int64_t, max_rank> idx{};
  for (std::int64_t o = lo; o < hi; ++o) {
    unflatten(o, g, 0, g.nk1, idx.data());
    s[o - lo] = block_a<Op, K, Simd, Unit>(*static_cast<Ev*>(ev), g, idx.data(), 0, g.count);
  }
}

// The pairwise tree over blocks [lo, hi) of one output.
template <class Op, class A>
typename kernel_for<Op, A>::state tree_a(reduce_source<Op, A> const& src, void* ev,
                                         geometry const& g, std::int64_t* idx, std::int64_t lo,
                                         std::int64_t hi) {
  if (hi - lo == 1)
    return src.block_a(ev, g, idx, lo * block_elems, std::min(g.count, (lo + 1) * block_elems));
  std::int64_t mid = lo + (hi - lo) / 2;
  auto a = tree_a(src, ev, g, idx, lo, mid);
  auto b = tree_a(src, ev, g, idx, mid, hi);
  return kernel_for<Op, A>::merge(a, b);
}

// Case A's loops: outputs in parallel, or for few outputs the subtrees of each output's tree.
template <class Op, class T, class A>
void run_a(reduce_source<Op, A> const& src, geometry const& g, T* out) {
  using K = kernel_for<Op, A>;
  std::int64_t nout = g.k1, nb = ceil_div(g.count, block_elems);
  auto one = [&](void* ev, std::int64_t o) {
    std::array<std::int64_t, max_rank> idx{};
    unflatten(o, g, 0, g.nk1, idx.data());
    std::int64_t off = out_offset(g, idx.data(), 0, g.nk1);
    auto s = tree_a(src, ev, g, idx.data(), 0, nb);
    out[off] = T(finalize<Op>(s, g));
  };
  std::size_t threads = threads_for(nout * g.count);
  if (threads == 1 || (nout >= std::int64_t(threads))) {
    std::int64_t nchunks = std::min<std::int64_t>(nout, std::int64_t(threads) * 4);
    std::int64_t per = ceil_div(nout, nchunks);
    nchunks = ceil_div(nout, per);
    bool const parallel = threads > 1 && nchunks > 1;
    auto body = [&](std::size_t c) {
      task_evaluator ev(src, parallel);
      std::int64_t lo = std::int64_t(c) * per, hi = std::min(nout, lo + per);
      if (nb > 1) {
        for (std::int64_t o = lo; o < hi; ++o) one(ev.get(), o);
        return;
      }
      constexpr std::int64_t run = 64;
      typename K::state s[run];
      std::array<std::int64_t, max_rank> idx{};
      for (std::int64_t o = lo; o < hi; o += run) {
        std::int64_t m = std::min(run, hi - o);
        src.outputs_a(ev.get(), g, o, o + m, s);
        for (std::int64_t k = 0; k < m; ++k) {
          unflatten(o + k, g, 0, g.nk1, idx.data());
          out[out_offset(g, idx.data(), 0, g.nk1)] = T(finalize<Op>(s[k], g));
        }
      }
    };
    if (!parallel)
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
      task_evaluator ev(src, true);
      auto idx = idx0;
      res[t] = tree_a(src, ev.get(), g, idx.data(), tasks[t][0], tasks[t][1]);
    });
    std::size_t k = 0;
    auto& s = combine_tasks(0, nb, depth, res.data(), k,
                            [](auto& a, auto const& b) { a = K::merge(a, b); });
    out[out_offset(g, idx0.data(), 0, g.nk1)] = T(finalize<Op>(s, g));
  }
}

}  // namespace zenith::detail::red
