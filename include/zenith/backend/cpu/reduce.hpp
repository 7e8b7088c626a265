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
//
// This header orders the axes, builds the plan and dispatches; the loops are reduce_inner.hpp
// (case A) and reduce_outer.hpp (case B), over reduce_geometry.hpp. Only what reads the child,
// a block of either case, is compiled per expression; the loops that cut the work into blocks,
// trees and threads call it through a reduce_source, and are compiled once per reduction and
// compute type.
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
#include "reduce_inner.hpp"
#include "reduce_outer.hpp"
#include "thread_pool.hpp"

namespace zenith {

template <class Op, class C>
array<typename reduce_node<Op, C>::value_type> eval_barrier(reduce_node<Op, C> const& e);

namespace detail::red {

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

// The loop order perm of shape S: the permuted shape, the output strides on it, and the map
// that permutes a leaf. Not a template, as plan_geometry.
struct permuted_space {
  zenith::shape shape;
  std::array<std::int64_t, max_rank> ost{};
  affine_map map;
};
[[gnu::noinline]] inline permuted_space permute_space(
    axis_list const& perm, zenith::shape const& S, std::array<std::int64_t, max_rank> const& ost) {
  permuted_space p;
  views::transpose t;
  for (std::size_t k = 0; k < S.size(); ++k) {
    t.perm[k] = perm[k];
    p.shape.push_back(S[perm[k]]);
    p.ost[k] = ost[perm[k]];
  }
  if (S.size() > 0) p.map = t.map(S);
  return p;
}

// The geometry of a reduction over the permuted space sp whose output (ost) and leaves read
// with strides (the output's first), coalesced into ls: compiled once for every reduction.
[[gnu::noinline]] inline geometry plan_geometry(zenith::shape const& sp, stride_list const& strides,
                                                loop_space& ls) {
  ls = coalesce(sp, strides);
  geometry g;
  g.n = ls.rank;
  g.dims = ls.dims;
  g.ost = regroup(*strides.begin(), ls);
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
  return g;
}

// ev0's leaves permuted to loop order perm and coalesced; only the walks over the leaves are
// compiled per evaluator.
template <class Ev>
plan<Ev> make_plan(Ev const& ev0, axis_list const& perm, zenith::shape const& S,
                   std::array<std::int64_t, max_rank> const& ost) {
  plan<Ev> p{ev0, {}, true};
  permuted_space ps = permute_space(perm, S, ost);
  if (S.size() > 0) p.ev.for_each_leaf([&](auto& leaf) { leaf.apply(ps.map); });
  stride_list strides;
  strides.push_back(ps.ost);
  p.ev.for_each_leaf([&](auto& leaf) { strides.push_back(leaf.stride); });
  loop_space ls;
  p.g = plan_geometry(ps.shape, strides, ls);
  p.ev.for_each_leaf([&](auto& leaf) {
    leaf.stride = regroup(leaf.stride, ls);
    leaf.rank = ls.rank;
    p.unit = p.unit && leaf.stride[ls.rank - 1] == 1;
  });
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
    if constexpr (can_simd && !indexed_reduction<Op>)
      gs.fold = gs.simd && unit && fold_ok(ev, gs, xsimd::batch<A>::size);
    auto loops = [&](reduce_source<Op, typename E::compute_type> const& src) {
      if (g.nk2 == 0)
        run_a(src, gs, out);
      else
        run_b(src, gs, out);
    };
    if constexpr (can_simd) {
      if (gs.simd && unit) return loops(source<true, true>());
    }
    loops(source<can_simd, false>());
  }

  // ev behind the block functions of one loop variant.
  template <bool Simd, bool Unit, class E = std::remove_cvref_t<Ev>>
  reduce_source<Op, typename E::compute_type> source() {
    return {&ev,
            &block_a_of<Op, Simd, Unit, E>,
            &outputs_a_of<Op, Simd, Unit, E>,
            &block_b_of<Op, Simd, Unit, E>,
            sizeof(E),
            &clone_evaluator_at<E>,
            &destroy_evaluator<E>};
  }

  void pointers(pointer_list& l) {
    l.writes(out);
    l.reads_leaves(ev);
  }
};

// Outputs of a reduction over no elements: the identity (NaN for a mean), or an error for a
// reduction without one. Cold: compiled once per reduction and type, not per expression.
template <class Op, class A, class T>
[[gnu::noinline]] void reduce_empty(array<T>& out, zenith::shape const& S, bool mean) {
  if constexpr (!Op::has_identity) {
    throw value_error(std::string(Op::name) + ": zero-size reduction of shape " + S.str() +
                      " has no identity");
  } else {
    T v = T(Op::finalize(Op::template identity<A>(), 0));
    if constexpr (std::is_same_v<Op, ops::reduce_sum>)
      if (mean) v = T(ops::reduce_mean::finalize(Op::template identity<A>(), 0));  // NaN
    fill_values(out.data(), out.size(), v);
  }
}

// reduce_into's work; `mean`: Op is reduce_sum, run for a mean (geometry::mean).
template <class Op, class T, class C>
void reduce_into_as(array<T>& out, C const& child, std::uint32_t mask, bool mean) {
  using Tin = value_t<C>;
  using A = compute_t<Tin>;
  zenith::shape S = child.shape();
  std::size_t r = S.size();
  std::int64_t count = std::int64_t(reduced_count(S, mask));
  if (out.size() == 0) return;
  if (count == 0) return reduce_empty<Op, A>(out, S, mean);

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
  p.g.mean = mean;
  if (active_recording()) {
    reduce_step<Op, T, A, Ev> step{std::move(p.ev), p.g, p.unit, out.data()};
    return run_step(step);
  }
  reduce_step<Op, T, A, Ev&> step{p.ev, p.g, p.unit, out.data()};  // not recording: ev itself
  step.run();
}

// Reduces `child` over the axes in mask into out (its shape: the kept axes, with or without
// the reduced ones as 1). A mean of floats or doubles runs sum's loops, compiled once for both,
// which divide each sum as they write it (in A, as reduce_mean::finalize does: the same bits).
template <class Op, class T, class C>
void reduce_into(array<T>& out, C const& child, std::uint32_t mask) {
  if constexpr (std::is_same_v<Op, ops::reduce_mean> && std::is_same_v<T, compute_t<value_t<C>>>)
    reduce_into_as<ops::reduce_sum>(out, child, mask, true);
  else
    reduce_into_as<Op>(out, child, mask, false);
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
