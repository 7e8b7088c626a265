#pragma once
// The elementwise expression nodes: a scalar constant and map_node<Op, Children...>, an op
// applied to children that broadcast against each other. Children are held by value; leaves
// are array handles (refcounted) or tensors (inline), so an expression never dangles.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/apply.hpp"
#include "../core/expr_base.hpp"
#include "../core/node_tuple.hpp"
#include "../core/shape.hpp"
#include "fixed_shape.hpp"
#include "ops.hpp"

namespace zenith {

// A C++ scalar inside an expression, already converted to the expression's type.
template <element T>
struct scalar_node : expr_base<scalar_node<T>> {
  using value_type = T;
  using static_shape = fixed_shape<>;
  static constexpr bool fixed = true;
  T value;
  explicit scalar_node(T v) : value(v) {}
  zenith::shape shape() const { return {}; }
  compute_t<T> at(std::size_t) const { return compute_t<T>(value); }
  template <class F>
  void for_each_array(F&&) const {}
};

template <class E>
inline constexpr bool is_scalar_node_v = false;
template <class T>
inline constexpr bool is_scalar_node_v<scalar_node<T>> = true;

namespace detail {
// Holds a runtime shape only when the node's shape is not in its type.
template <bool Fixed>
struct shape_slot {
  zenith::shape value;
};
template <>
struct shape_slot<true> {};
}  // namespace detail

template <class Op, class... Cs>
struct map_node : expr_base<map_node<Op, Cs...>> {
  using value_type = op_result_t<Op, value_t<Cs>...>;
  static constexpr bool fixed = (Cs::fixed && ...);
  static constexpr bool staged = (detail::staged_node<Cs>() || ...);  // expr/staged.hpp
  using op_type = Op;

  node_tuple<Cs...> children;
  [[no_unique_address]] detail::shape_slot<fixed> shape_;

  explicit map_node(Cs... cs) : children(std::move(cs)...) {
    if constexpr (!fixed) shape_.value = broadcast_all(std::index_sequence_for<Cs...>{});
  }

  zenith::shape shape() const {
    if constexpr (fixed)
      return static_shape::dynamic();
    else
      return shape_.value;
  }

  template <class F>
  void for_each_array(F&& f) const {
    zenith::detail::apply([&](auto const&... c) { (c.for_each_array(f), ...); }, children);
  }

  // The node protocol (every node that has children): its children, and the same node over new
  // ones (structural passes: autodiff/memoize.hpp, backend/cuda/lower.hpp).
  std::tuple<Cs const&...> operands() const {
    return zenith::detail::apply([](Cs const&... c) { return std::tuple<Cs const&...>(c...); },
                                 children);
  }
  template <class... Ds>
  map_node<Op, Ds...> with_operands(Ds... ds) const {
    return map_node<Op, Ds...>(std::move(ds)...);
  }

  // Fixed-size evaluation: the value at flat index i (unrolled by the tensor evaluator).
  template <bool F = fixed>
  requires F auto at(std::size_t i) const { return at_impl(i, std::index_sequence_for<Cs...>{}); }

 private:
  template <class S = void>
  struct static_shape_of {
    using type = fixed_broadcast_t<typename Cs::static_shape...>;
  };

 public:
  using static_shape = typename std::conditional_t<fixed, static_shape_of<>,
                                                   std::type_identity<fixed_shape<>>>::type;

  // A fixed-size rank-0 expression (sum(a) + sum(b) of tensors) converts to its value, as a
  // rank-0 tensor does.
  static constexpr bool fixed_scalar = fixed && static_shape::rank == 0;
  operator value_type() const requires fixed_scalar {  // NOLINT: implicit, like tensor<T>'s
    return value_type(at(0));
  }

 private:
  template <std::size_t... I>
  zenith::shape broadcast_all(std::index_sequence<I...>) const {
    zenith::shape s;
    ((s = broadcast_shapes(s, zenith::get<I>(children).shape(), Op::name)), ...);
    return s;
  }
  template <std::size_t... I>
  auto at_impl(std::size_t i, std::index_sequence<I...>) const {
    return Op::apply(zenith::get<I>(children).at(
        fixed_broadcast_index<typename std::tuple_element_t<I, std::tuple<Cs...>>::static_shape,
                              static_shape>(i))...);
  }
};

template <class E>
inline constexpr bool is_map_node_v = false;
template <class Op, class... Cs>
inline constexpr bool is_map_node_v<map_node<Op, Cs...>> = true;

}  // namespace zenith
