#pragma once
// sum_to(e, shape): the adjoint of broadcasting. Sums e over the axes that broadcasting added
// or stretched, so that the result has `shape` (NumPy rules). Most cotangents need no sum
// (the operand had the full shape); then the node is transparent and fuses with what reads it.
// Only when it really reduces is it evaluated, as a reduction, into a buffer.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../backend/cpu/fused_group.hpp"
#include "../backend/cpu/group_total.hpp"
#include "../backend/cpu/reduce.hpp"
#include "../expr/reduce.hpp"
#include "../expr/reshape.hpp"

namespace zenith {

namespace detail {
// The axes of s that summing to `target` folds (NumPy's broadcasting rules, read backwards), as
// a mask (bit k: axis k of s). Cold and the same for every child type.
[[gnu::noinline]] inline std::uint32_t sum_to_axes(zenith::shape const& s,
                                                   zenith::shape const& target) {
  std::uint32_t axes = 0;
  std::size_t lead = s.size() >= target.size() ? s.size() - target.size() : 0;
  bool ok = s.size() >= target.size();
  for (std::size_t k = 0; ok && k < s.size(); ++k) {
    if (k < lead) {
      axes |= 1u << k;
    } else {
      std::size_t t = target[k - lead];
      if (t == 1 && s[k] != 1)
        axes |= 1u << k;
      else
        ok = t == s[k];
    }
  }
  if (!ok)
    throw shape_error("sum_to: shape " + s.str() + " does not broadcast from " + target.str());
  return axes;
}
// The axes in a mask, in order.
[[gnu::noinline]] inline std::vector<int> mask_axes(std::uint32_t mask) {
  std::vector<int> axes;
  for (int k = 0; k < int(max_rank); ++k)
    if (mask >> k & 1) axes.push_back(k);
  return axes;
}
}  // namespace detail

template <expression C>
struct sum_to_node : expr_base<sum_to_node<C>> {
  using value_type = value_t<C>;
  static constexpr bool fixed = false;

  C child;
  zenith::shape shape_;
  std::uint32_t axes;  // of child, summed (kept as 1, then reshaped); bit k: axis k

  sum_to_node(C c, zenith::shape target)
      : child(std::move(c)), shape_(target), axes(detail::sum_to_axes(child.shape(), target)) {}
  bool reduces() const { return axes != 0 || child.shape().size() != shape_.size(); }
  // For a backend without the evaluator below (backend/cuda/lower.hpp): the child's value, summed
  // over these axes where it reduces, else read as it is.
  std::vector<int> summed_axes() const { return detail::mask_axes(axes); }
  zenith::shape shape() const { return shape_; }
  template <class F>
  void for_each_array(F&& f) const {
    child.for_each_array(f);
  }
};

template <expression E>
auto sum_to(E&& e, zenith::shape const& target) {
  return sum_to_node<std::remove_cvref_t<E>>(std::forward<E>(e), target);
}

// Its evaluator: the child's when nothing is summed, else a leaf over the summed buffer. The
// choice is made once per evaluation; each call then takes one predictable branch.
template <class ChildEv, class T>
struct sum_to_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  std::optional<ChildEv> child;
  leaf_eval<T> summed;

  template <class F>
  void for_each_leaf(F&& f) {
    if (child)
      child->for_each_leaf(f);
    else
      f(summed);
  }
  void start_row(std::int64_t const* idx, std::size_t r) {
    if (child)
      child->start_row(idx, r);
    else
      summed.start_row(idx, r);
  }
  compute_type scalar(std::int64_t j) const {
    return child ? compute_type(child->scalar(j)) : summed.scalar(j);
  }
  template <row_access A>
  auto simd(std::int64_t j) const {
    return child ? child->template simd<A>(j) : summed.template simd<A>(j);
  }
  template <class Lane>
  static constexpr bool vectorizable() {
    return ChildEv::template vectorizable<Lane>() && leaf_eval<T>::template vectorizable<Lane>() &&
           std::is_same_v<typename ChildEv::compute_type, compute_type>;
  }
};

template <class ChildEv, class T>
inline constexpr bool any_position_v<sum_to_eval<ChildEv, T>> = any_position_v<ChildEv>;
template <class ChildEv, class T>
inline constexpr bool costly_batch_v<sum_to_eval<ChildEv, T>> = costly_batch_v<ChildEv>;
template <class ChildEv, class T>
inline constexpr bool costly_kept_v<sum_to_eval<ChildEv, T>> = costly_kept_v<ChildEv>;

template <class E>
inline constexpr bool is_sum_to_node_v = false;
template <class C>
inline constexpr bool is_sum_to_node_v<sum_to_node<C>> = true;

namespace detail {
// e as an array: the child evaluated first, then summed as an array. That is one elementwise
// loop compiled for the child's type plus a reduction shared by every cotangent of type T,
// rather than a reduction kernel compiled for each cotangent expression.
template <class C>
array<value_t<C>> evaluate_sum_to(sum_to_node<C> const& e) {
  using T = value_t<C>;
  array<T> full = evaluate_untraced<T>(e.child);
  if (!e.reduces()) return full;
  if (e.shape_.numel() == 1) {
    // The cotangent of a scalar parameter: a whole-array sum, run as a one-loop group (the same
    // blocks and pairwise tree as reduce.hpp, without planning a reduction over axes).
    fused_group g;
    if (auto total = queue_total<ops::reduce_sum, T>(g, full, e.shape_)) {
      g.run();
      return *total;
    }
  }
  array<T> s = evaluate_untraced<T>(sum(full, e.summed_axes(), true));
  return array<T>::from_buffer(s.storage(), s.data(), e.shape_);
}
}  // namespace detail

template <class C>
struct evaluator_for<sum_to_node<C>> {
  using T = value_t<C>;
  using type = sum_to_eval<evaluator_t<C>, T>;
  static type build(sum_to_node<C> const& e) {
    type ev;
    if (!e.reduces()) {
      ev.child.emplace(make_evaluator(e.child));
    } else {
      ev.summed = leaf_eval<T>::owning(detail::evaluate_sum_to(e));
    }
    return ev;
  }
};

}  // namespace zenith
