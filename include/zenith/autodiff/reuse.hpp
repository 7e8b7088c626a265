#pragma once
// reuse_node<E>: a costly elementwise value evaluated once where it fits in cache and read by
// every loop that needs it, else recomputed by each (see below).
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "../backend/cpu/evaluate.hpp"
#include "../backend/cpu/reduce.hpp"

namespace zenith {

namespace autodiff {
// Whether op tag Op is marked `costly` (a transcendental: exp, log, sin, pow, ...; expr/ops.hpp).
template <class Op>
constexpr bool costly_op() {
  if constexpr (requires { Op::costly; })
    return Op::costly;
  else
    return false;
}
}  // namespace autodiff

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
struct reuse_node : expr_base {
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
  zenith::shape shape() const { return child().shape(); }
  template <class F>
  void for_each_array(F&& f) const {
    child().for_each_array(f);
  }

  // Stored up to this many bytes, a few times less than a core's L2. Small ones are stored too:
  // recomputing them is cheap, but building each reader's evaluator for the whole child costs
  // more than one evaluation (stochastic volatility at 1 element measured 7% slower when those
  // under 512 elements were recomputed).
  static constexpr std::size_t max_stored_bytes = std::size_t(256) << 10;
  static bool stores(std::size_t n) { return n * sizeof(value_type) <= max_stored_bytes; }
};

// Reads the stored values, or the child's evaluator recomputing them (the branch is the same
// for the whole loop).
template <class T, class Ev>
struct reuse_eval {
  using value_type = T;
  using compute_type = T;
  std::optional<Ev> child;  // recomputed: built only then, so the child's barriers run once
  leaf_eval<T> stored;

  template <class F>
  void for_each_leaf(F&& f) {
    if (child)
      child->for_each_leaf(f);
    else
      f(stored);
  }
  void start_row(std::int64_t const* idx, std::size_t r) {
    if (child)
      child->start_row(idx, r);
    else
      stored.start_row(idx, r);
  }
  T scalar(std::int64_t j) const { return child ? T(child->scalar(j)) : stored.scalar(j); }
  // Flattened: holding both paths, a loop with a few of these outgrows GCC's inlining budget,
  // which then calls out for the child's transcendentals (bench/grad_cost, recomputed: 10%
  // slower with two kept nodes, as fast as without them once flattened).
  template <row_access A>
  [[gnu::flatten]] xsimd::batch<T> simd(std::int64_t j) const {
    if (child) return child->template simd<A>(j);
    return stored.template simd<A>(j);
  }
  template <class Lane>
  static constexpr bool vectorizable() {
    return Ev::template vectorizable<Lane>() && leaf_eval<T>::template vectorizable<Lane>();
  }
};

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
    }
    return r;
  }
};

namespace detail::red {
template <class E>
struct has_barrier<reuse_node<E>> : has_barrier<E> {};  // a reader may recompute it
}  // namespace detail::red

}  // namespace zenith
