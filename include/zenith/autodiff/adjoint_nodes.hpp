#pragma once
// Nodes that only the reverse pass builds. Each is a barrier (evaluated into a buffer, then read
// as a leaf), so a gradient that is one of them lands in the gradient buffer with no extra copy.
//
//   shared_node<E>   e, evaluated at most once however many rules read it (a cotangent that
//                    several rules or operands use: softmax, concatenate, both sides of matmul).
//                    share(ct) wraps only what is not cheap to read again.
//   shared_ref<E>    e behind a shared handle: a cotangent several operands take, copied
//                    without copying its tree (not a barrier; e's own evaluator).
//   reuse_node<E>    (autodiff/reuse.hpp) a costly cotangent that several operands read.
//   pad_node<E>      the adjoint of slice: e written into zeros of the sliced array's shape.
//   fold_to_node<E>  e summed down to a broadcast-from shape (sum_to) and reshaped: the
//                    cotangent of a batched matmul operand.
// Each also says what its value is in terms every backend knows (decomposed, once, placement,
// summed_axes), which is how a backend without this layer's evaluators lowers it
// (backend/cuda/lower.hpp).
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/cpu/evaluate.hpp"
#include "../backend/cpu/reduce.hpp"
#include "../core/creation.hpp"
#include "../expr/reduce.hpp"
#include "../expr/reshape.hpp"
#include "../expr/views.hpp"
#include "memoize.hpp"
#include "reuse.hpp"
#include "sum_to.hpp"

namespace zenith {

template <expression E>
struct shared_node : expr_base<shared_node<E>> {
  using value_type = value_t<E>;
  static constexpr bool fixed = false;
  static constexpr bool barrier = true;
  static constexpr bool same_as_child = true;  // its value is child's (backend/cpu/matmul.hpp)

  E child;
  std::shared_ptr<std::optional<array<value_type>>> cache =
      std::make_shared<std::optional<array<value_type>>>();

  explicit shared_node(E e) : child(std::move(e)) {}
  zenith::shape shape() const { return child.shape(); }
  // Its value, computed by evaluate(child) for the first reader, on whichever backend runs it.
  template <class F>
  array<value_type> const& once(F&& evaluate) const {
    if (!*cache) *cache = evaluate(child);
    return **cache;
  }
  template <class F>
  void for_each_array(F&& f) const {
    child.for_each_array(f);
  }
};

template <class E>
array<value_t<E>> eval_barrier(shared_node<E> const& e) {
  return e.once([](E const& c) { return detail::evaluate_untraced<value_t<E>>(c); });
}

// shared_ref<E>: e, held by a shared handle so that copies do not copy its tree. A cotangent
// that several operands take is wrapped in one (autodiff/backward.hpp): the expression is the
// same, the evaluator is e's own.
template <expression E>
struct shared_ref : expr_base<shared_ref<E>> {
  using value_type = value_t<E>;
  static constexpr bool fixed = false;

  std::shared_ptr<E const> p;

  explicit shared_ref(E e) : p(std::make_shared<E const>(std::move(e))) {}
  E const& child() const { return *p; }
  E const& decomposed() const { return *p; }  // what a backend without evaluator_for reads
  zenith::shape shape() const { return p->shape(); }
  template <class F>
  void for_each_array(F&& f) const {
    p->for_each_array(f);
  }
};

template <class E>
struct evaluator_for<shared_ref<E>> {
  using type = evaluator_t<E>;
  static type build(shared_ref<E> const& e) { return make_evaluator(e.child()); }
};

namespace detail::red {
template <class E>
struct has_barrier<shared_ref<E>> : has_barrier<E> {};
}  // namespace detail::red

template <expression E>
struct pad_node : expr_base<pad_node<E>> {
  using value_type = value_t<E>;
  static constexpr bool fixed = false;
  static constexpr bool barrier = true;

  E child;               // shaped like the slice
  zenith::shape shape_;  // the sliced array's shape
  views::slice view;     // where the child goes

  pad_node(E e, zenith::shape s, views::slice v)
      : child(std::move(e)), shape_(s), view(std::move(v)) {}
  zenith::shape shape() const { return shape_; }
  zenith::placement placement() const { return view.place(shape_); }  // where child is written
  template <class F>
  void for_each_array(F&& f) const {
    child.for_each_array(f);
  }
};

template <class E>
array<value_t<E>> eval_barrier(pad_node<E> const& e) {
  using T = value_t<E>;
  zenith::shape in = e.shape_, part = e.child.shape();
  // Zeros are written only where the slice leaves gaps (a slice as large as its array, with a
  // step of 1 or -1, leaves none).
  auto out = part == in ? array<T>::empty(in) : zeros<T>(in);
  if (part.numel() == 0) return out;
  placement w = e.placement();
  dest_view<T> dst{out.data() + w.offset, w.stride};
  auto ev = make_evaluator(e.child);
  run_fused(dst, ev, part);
  return out;
}

template <expression E>
struct fold_to_node : expr_base<fold_to_node<E>> {
  using value_type = value_t<E>;
  static constexpr bool fixed = false;
  static constexpr bool barrier = true;

  E child;
  zenith::shape full;    // child summed to this shape (NumPy broadcasting in reverse) ...
  zenith::shape shape_;  // ... then reshaped to this one

  fold_to_node(E e, zenith::shape f, zenith::shape s) : child(std::move(e)), full(f), shape_(s) {}
  zenith::shape shape() const { return shape_; }
  std::vector<int> summed_axes() const;  // the child's axes that the sum folds
  template <class F>
  void for_each_array(F&& f) const {
    child.for_each_array(f);
  }
};

namespace detail {
// The axes of an array of shape s that fold_to sums.
inline std::vector<int> folded_axes(zenith::shape const& s, zenith::shape const& full) {
  std::size_t lead = s.size() - full.size();
  std::vector<int> axes;
  for (std::size_t k = 0; k < s.size(); ++k)
    if (k < lead || (full[k - lead] == 1 && s[k] != 1)) axes.push_back(int(k));
  return axes;
}
}  // namespace detail

template <expression E>
std::vector<int> fold_to_node<E>::summed_axes() const {
  return detail::folded_axes(child.shape(), full);
}

template <class E>
array<value_t<E>> eval_barrier(fold_to_node<E> const& e) {
  using T = value_t<E>;
  array<T> r = detail::evaluate_untraced<T>(e.child);
  std::vector<int> axes = e.summed_axes();
  if (!axes.empty()) r = detail::evaluate_untraced<T>(sum(r, axes, true));
  return array<T>::from_buffer(r.storage(), r.data(), e.shape_);
}

namespace autodiff {

// Whether reading e again costs no more than a pass over its leaves: no GEMM or other kernel in
// it runs again.
template <class E>
inline constexpr bool cheap_v = false;
template <element T>
inline constexpr bool cheap_v<array<T>> = true;
template <class T>
inline constexpr bool cheap_v<scalar_node<T>> = true;
template <class B>
inline constexpr bool cheap_v<memo_node<B>> = true;
template <class E>
inline constexpr bool cheap_v<shared_node<E>> = true;
template <class E>
inline constexpr bool cheap_v<reuse_node<E>> = cheap_v<E>;
template <class E>
inline constexpr bool cheap_v<shared_ref<E>> = cheap_v<E>;
template <class Op, class... Cs>
inline constexpr bool cheap_v<map_node<Op, Cs...>> = (cheap_v<Cs> && ...);
template <class V, class C>
inline constexpr bool cheap_v<view_node<V, C>> = cheap_v<C>;
template <class C>
inline constexpr bool cheap_v<reshape_node<C>> = cheap_v<C>;
// Transparent when nothing is summed (the usual case); else a reduction over what it reads.
template <class C>
inline constexpr bool cheap_v<sum_to_node<C>> = cheap_v<C>;

// Whether recomputing e costs transcendentals (an op tagged `costly` in expr/ops.hpp) in the
// elementwise part that a fused loop would evaluate again; barriers and leaves are read, not
// recomputed.
template <class E>
inline constexpr bool costly_v = false;
template <class Op, class... Cs>
inline constexpr bool costly_v<map_node<Op, Cs...>> = costly_op<Op>() || (costly_v<Cs> || ...);
template <class V, class C>
inline constexpr bool costly_v<view_node<V, C>> = costly_v<C>;
template <class C>
inline constexpr bool costly_v<reshape_node<C>> = costly_v<C>;
template <class C>
inline constexpr bool costly_v<sum_to_node<C>> = costly_v<C>;
// A reuse_node is read, not recomputed, wherever storing it pays (small enough to stay in
// cache): a cotangent built on one is not shared again for its sake. Sharing it again measured
// no faster on stochastic volatility at 8192 elements (263 vs 256 us) and 10% slower at 1 (48
// vs 43.6 us), where each further evaluation's fixed cost outweighs what it saves.
template <class E>
inline constexpr bool costly_v<reuse_node<E>> = false;
template <class E>
inline constexpr bool costly_v<shared_ref<E>> = costly_v<E>;

// Whether copying e copies a tree of nodes (and touches the reference count of every array in
// it) rather than a handle or two.
template <class E>
inline constexpr bool tree_copy_v = false;
template <class Op, class... Cs>
inline constexpr bool tree_copy_v<map_node<Op, Cs...>> = true;
template <class V, class C>
inline constexpr bool tree_copy_v<view_node<V, C>> = tree_copy_v<C>;
template <class C>
inline constexpr bool tree_copy_v<reshape_node<C>> = tree_copy_v<C>;
template <class C>
inline constexpr bool tree_copy_v<sum_to_node<C>> = tree_copy_v<C>;

// ct, to be read several times: as it is when that is cheap, else evaluated on first read.
template <class G>
auto share(G const& ct) {
  if constexpr (cheap_v<G>)
    return ct;
  else
    return shared_node<G>(ct);
}

// ct as a library kernel's operand (matmul): as it is when the kernel reads it in place (an
// array or a view of one), else evaluated once for every kernel that reads it.
template <class G>
auto share_operand(G const& ct) {
  if constexpr (cheap_v<G> && std::is_same_v<evaluator_t<G>, leaf_eval<value_t<G>>>)
    return ct;
  else
    return shared_node<G>(ct);
}

}  // namespace autodiff
}  // namespace zenith
