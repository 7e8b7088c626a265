#pragma once
// reuse_node<E>: a costly elementwise value evaluated once where it fits in cache and read by
// every loop that needs it, else recomputed by each (see below).
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "../backend/cpu/evaluate.hpp"
#include "../backend/cpu/group_piece.hpp"
#include "../backend/cpu/reduce.hpp"
#include "op_traits.hpp"

namespace zenith {

// reuse_node<E>: a costly value that several loops read. Two kinds:
//  - a cotangent that several operands' rules read (ct at x * y when ct computes an exp, say;
//    autodiff/backward.hpp);
//  - an elementwise node of the forward pass whose op is costly (exp(h) in a log-density), read
//    by the value and by the rules (exp's partial is its own value; x * exp(h) reads it as the
//    partial of x): memoize keeps it (autodiff/memoize.hpp).
// Where its values fit in cache, the first evaluator built for it evaluates it once into a
// buffer that every reader then reads; a larger one is recomputed by each reader's loop
// instead, because there storing it costs more memory traffic than the recomputation it saves
// (bench/RESULTS.md, "Gradient cost" and "FastAD's suite").
template <expression E>
struct reuse_node : expr_base<reuse_node<E>> {
  using value_type = value_t<E>;
  static constexpr bool fixed = false;

  // Shared by the copies (every operand's cotangent holds one): copying the node copies one
  // handle, not the cotangent's tree.
  struct state {
    E child;
    std::optional<array<value_type>> cache;  // the values, once evaluated
  };
  std::shared_ptr<state> s;

  explicit reuse_node(E e) : s(std::make_shared<state>(state{std::move(e), std::nullopt})) {}
  E const& child() const { return s->child; }
  // On a backend without this layer's evaluator (backend/cuda/lower.hpp), recomputed where it is
  // read: a kernel's transcendentals are cheap next to the memory traffic that storing would add.
  E const& decomposed() const { return child(); }
  zenith::shape shape() const { return child().shape(); }
  template <class F>
  void for_each_array(F&& f) const {
    child().for_each_array(f);
  }

  // Stored up to this many bytes, a few times less than a core's L2. Small ones are stored too:
  // recomputing them is cheap, but building each reader's evaluator for the whole child costs
  // more than one evaluation (stochastic volatility at 1 element measured 7% slower when those
  // under 512 elements were recomputed).
  static constexpr std::size_t max_stored_bytes = detail::max_stored_bytes;
  static bool stores(std::size_t n) { return n * sizeof(value_type) <= max_stored_bytes; }
};

// Reads the stored values, or the child's evaluator recomputing them (the branch is the same
// for the whole loop). Inside a fused_group pass, the recomputed values are computed once per
// piece instead: by the piece's first loop that reads them, into the thread's scratch, which
// the piece's other loops read (backend/cpu/group_piece.hpp).
template <class T, class Ev>
struct reuse_eval {
  using value_type = T;
  using compute_type = T;
  std::optional<Ev> child;  // recomputed: built only then, so the child's barriers run once
  leaf_eval<T> stored;
  void const* key = nullptr;  // the node: names its scratch in a group pass
  T const* piece = nullptr;   // in a group pass, the values of the piece starting at piece_lo
  std::int64_t piece_lo = 0;
  detail::piece_slot* slot = nullptr;  // the thread's scratch for the node in pass slot_pass
  std::uint64_t slot_pass = 0;

  template <class F>
  void for_each_leaf(F&& f) {
    if (child)
      child->for_each_leaf(f);
    else
      f(stored);
  }
  void start_row(std::int64_t const* idx, std::size_t r) {
    piece = nullptr;
    if (!child) return stored.start_row(idx, r);
    auto& p = detail::current_piece();
    if (p.active && r == 1)  // a group's rows are single rows
      read_piece(p, idx);
    else
      child->start_row(idx, r);
    if (!piece) p.recomputes = true;
  }
  T scalar(std::int64_t j) const {
    if (piece) return piece[j - piece_lo];
    return child ? T(child->scalar(j)) : stored.scalar(j);
  }
  template <row_access A>
  [[gnu::always_inline]] xsimd::batch<T> simd(std::int64_t j) const {
    if (piece) return xsimd::batch<T>::load_unaligned(piece + (j - piece_lo));
    if constexpr (!kept_access(A)) {  // a kept_ access is taken only where nothing recomputes
      if (child) return recompute<A>(j);
    }
    return stored.template simd<A>(j);
  }
  template <class Lane>
  static constexpr bool vectorizable() {
    return Ev::template vectorizable<Lane>() && leaf_eval<T>::template vectorizable<Lane>();
  }

 private:
  // Flattened: otherwise a loop with a few of these outgrows GCC's inlining budget, which then
  // calls out for the child's transcendentals (bench/grad_cost: 10% slower with two kept nodes,
  // as fast as without them once flattened).
  template <row_access A>
  [[gnu::flatten]] xsimd::batch<T> recompute(std::int64_t j) const {
    return child->template simd<A>(j);
  }

  // Points piece at the thread's values for piece p, computing them if no loop of the piece has.
  // The values are those at the reader's row positions, so a reader whose child starts its row
  // elsewhere (the node read through another view) recomputes its own instead.
  [[gnu::noinline]] void read_piece(detail::group_piece const& p, std::int64_t const* idx) {
    // A group small enough to run whole blocks stores its kept values (group_piece.hpp); were
    // one recomputed there, its block would not fit the scratch.
    if (p.hi - p.lo > detail::group_step) return child->start_row(idx, 1);
    void const* origin = nullptr;
    child->for_each_leaf([&](auto const& leaf) {
      if (!origin) origin = leaf.base;
    });
    if (!slot || slot_pass != p.pass) {  // a runner's evaluator keeps it for its pieces
      slot = &detail::piece_slot_for(key, p);
      slot_pass = p.pass;
    }
    if (slot->holds(p) && slot->origin != origin) return child->start_row(idx, 1);
    T* v = slot->template values<T>();
    piece = v;
    piece_lo = p.lo;
    if (slot->holds(p)) return;
    child->start_row(idx, 1);
    std::int64_t j = p.lo;
    if constexpr (simd_type_v<T> && Ev::template vectorizable<T>()) {
      if (simd_enabled()) {
        // The access the readers' loops take: every leaf's inner stride 1, or 0 or 1 (a group
        // reads nothing else; anything else is filled by the scalar path below).
        bool unit = true, row = true;
        child->for_each_leaf([&](auto const& leaf) {
          unit = unit && leaf.stride[0] == 1;
          row = row && (leaf.stride[0] == 1 || leaf.stride[0] == 0);
        });
        if (unit && !costly_batch_v<Ev>)
          j = fill<row_access::unit>(v, p);
        else if (row)
          j = fill<row_access::unit_or_broadcast>(v, p);
      }
    }
    for (; j < p.hi; ++j) v[j - p.lo] = T(child->scalar(j));
    slot->lo = p.lo;
    slot->origin = origin;
  }
  // The whole batches of the piece; returns where the scalar tail starts.
  template <row_access A>
  [[gnu::flatten]] std::int64_t fill(T* v, detail::group_piece const& p) {
    constexpr std::int64_t W = std::int64_t(xsimd::batch<T>::size);
    std::int64_t j = p.lo;
    for (; j + W <= p.hi; j += W) child->template simd<A>(j).store_unaligned(v + (j - p.lo));
    return j;
  }
};

template <class T, class Ev>
inline constexpr bool costly_batch_v<reuse_eval<T, Ev>> = costly_batch_v<Ev>;
template <class T, class Ev>
inline constexpr bool costly_kept_v<reuse_eval<T, Ev>> = false;

template <class E>
struct evaluator_for<reuse_node<E>> {
  using T = value_t<E>;
  static_assert(std::is_floating_point_v<T>, "zenith: reuse_node holds float or double values");
  using type = reuse_eval<T, evaluator_t<E>>;
  static type build(reuse_node<E> const& e) {
    type r;
    if (reuse_node<E>::stores(e.shape().numel())) {
      auto& cache = e.s->cache;
      if (!cache) cache = detail::evaluate_untraced<T>(e.child());
      r.stored = leaf_eval<T>::owning(*cache);
    } else {
      r.child.emplace(make_evaluator(e.child()));
      r.key = e.s.get();
    }
    return r;
  }
};

namespace detail::red {
template <class E>
struct has_barrier<reuse_node<E>> : has_barrier<E> {};  // a reader may recompute it
}  // namespace detail::red

}  // namespace zenith
