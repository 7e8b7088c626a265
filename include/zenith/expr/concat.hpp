#pragma once
// concatenate and stack, as barrier nodes over a list of parts: a std::vector of one expression
// type (any number of parts, known at run time), or a std::tuple of any expression types (the
// result takes their promoted element type, as in JAX).
// The CPU backend (backend/cpu/concat.hpp) evaluates each part straight into its slice of the
// output, so no part is ever materialized on its own.
//   concatenate(parts, axis): parts agree on every dimension but axis, which adds up.
//   stack(parts, axis):       parts have one shape; a new axis of length parts.size() is inserted.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "../core/apply.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/expr_base.hpp"
#include "../core/shape.hpp"

namespace zenith {

namespace ops {
struct concatenate {
  static constexpr std::string_view name = "concatenate";
  static constexpr std::string_view cuda = "concat_copy";
  static constexpr bool new_axis = false;
};
struct stack {
  static constexpr std::string_view name = "stack";
  static constexpr std::string_view cuda = "concat_copy";
  static constexpr bool new_axis = true;
};
}  // namespace ops

namespace detail {
template <class Parts>
inline constexpr bool is_tuple_v = false;
template <class... Es>
inline constexpr bool is_tuple_v<std::tuple<Es...>> = true;

// How a concat_node walks its parts: each(parts, f) calls f(part, i) in order.
template <class Parts>
struct concat_parts;
template <expression E>
struct concat_parts<std::vector<E>> {
  using value_type = value_t<E>;
  static std::size_t size(std::vector<E> const& p) { return p.size(); }
  template <class F>
  static void each(std::vector<E> const& p, F&& f) {
    for (std::size_t i = 0; i < p.size(); ++i) f(p[i], i);
  }
};
template <class T, class... Ts>
struct promote_all {
  using type = T;
};
template <class T, class U, class... Ts>
struct promote_all<T, U, Ts...> : promote_all<promote_t<T, U>, Ts...> {};
template <expression... Es>
requires(sizeof...(Es) >= 1) struct concat_parts<std::tuple<Es...>> {
  using value_type = typename promote_all<value_t<Es>...>::type;
  static std::size_t size(std::tuple<Es...> const&) { return sizeof...(Es); }
  template <class F>
  static void each(std::tuple<Es...> const& p, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (f(std::get<I>(p), I), ...); }
    (std::index_sequence_for<Es...>{});
  }
};
}  // namespace detail

template <class Op, class Parts>
struct concat_node : expr_base<concat_node<Op, Parts>> {
  using parts_of = detail::concat_parts<Parts>;
  using value_type = typename parts_of::value_type;
  using op_type = Op;
  static constexpr bool barrier = true;
  static constexpr bool fixed = false;

  Parts parts;
  std::size_t axis = 0;  // normalized axis of the output
  zenith::shape shape_;

  concat_node(Parts ps, int ax) : parts(std::move(ps)) {
    std::size_t n = parts_of::size(parts);
    if (n == 0) throw value_error(std::string(Op::name) + ": need at least one array");
    zenith::shape first;
    for_each_part([&](auto const& p, std::size_t i) {
      if (i == 0) first = p.shape();
    });
    if constexpr (Op::new_axis) {
      axis = normalize_axis(ax, first.size() + 1, Op::name);
      for_each_part([&](auto const& p, std::size_t i) {
        zenith::shape s = p.shape();
        if (!(s == first))
          throw shape_error(std::string(Op::name) + ": all parts must have one shape, got " +
                            first.str() + " and " + s.str() + " (part " + std::to_string(i) + ")");
      });
      for (std::size_t i = 0; i <= first.size(); ++i) {
        if (i == axis) shape_.push_back(n);
        if (i < first.size()) shape_.push_back(first[i]);
      }
    } else {
      if (first.size() == 0)
        throw shape_error(std::string(Op::name) + ": rank-0 parts cannot be concatenated");
      axis = normalize_axis(ax, first.size(), Op::name);
      shape_ = first;
      shape_[axis] = 0;
      for_each_part([&](auto const& p, std::size_t i) {
        zenith::shape s = p.shape();
        bool ok = s.size() == first.size();
        for (std::size_t k = 0; ok && k < s.size(); ++k) ok = k == axis || s[k] == first[k];
        if (!ok)
          throw shape_error(std::string(Op::name) + ": shapes " + first.str() + " and " + s.str() +
                            " (part " + std::to_string(i) + ") differ off the concatenation axis " +
                            std::to_string(axis));
        shape_[axis] += s[axis];
      });
    }
  }

  zenith::shape shape() const { return shape_; }

  // The node protocol (expr/node.hpp): a tuple's parts are its operands; a vector of parts, whose
  // count is known at run time only, is one operand.
  auto operands() const {
    if constexpr (detail::is_tuple_v<Parts>)
      return zenith::detail::apply(
          [](auto const&... p) { return std::tuple<decltype(p)...>(p...); }, parts);
    else
      return std::tuple<Parts const&>(parts);
  }
  template <class... Ds>
  auto with_operands(Ds... ds) const {
    if constexpr (detail::is_tuple_v<Parts>)
      return concat_node<Op, std::tuple<Ds...>>(std::tuple<Ds...>(std::move(ds)...), int(axis));
    else
      return concat_node<Op, Ds...>(std::move(ds)..., int(axis));
  }

  // f(part, index) for each part, in order.
  template <class F>
  void for_each_part(F&& f) const {
    parts_of::each(parts, f);
  }

  template <class F>
  void for_each_array(F&& f) const {
    for_each_part([&](auto const& p, std::size_t) { p.for_each_array(f); });
  }
};

namespace detail {
// Where a part of shape s goes in its concatenation's output (row-major strides st): the offset
// of its first element and the strides of its slice. offset is the position along the axis of
// the next part, advanced past this one. Each backend writes the part through these.
struct concat_slice {
  std::int64_t start = 0;
  std::array<std::int64_t, max_rank> stride{};
};
template <class Op>
concat_slice concat_slice_of(zenith::shape const& s, std::size_t axis,
                             std::array<std::int64_t, max_rank> const& st, std::int64_t& offset) {
  concat_slice c;
  c.start = offset * st[axis];
  if constexpr (Op::new_axis) {
    for (std::size_t k = 0, o = 0; k < s.size(); ++k, ++o) {  // the output's axes but axis
      if (o == axis) ++o;
      c.stride[k] = st[o];
    }
    offset += 1;
  } else {
    c.stride = st;
    offset += std::int64_t(s[axis]);
  }
  return c;
}
}  // namespace detail

// Joins parts along an existing axis (negative axes count from the end). Parts of different
// expression types go in a std::tuple: concatenate(std::tuple(a, b * 2.f), 1).
template <expression E>
auto concatenate(std::vector<E> parts, int axis = 0) {
  return concat_node<ops::concatenate, std::vector<E>>(std::move(parts), axis);
}
template <expression E>
auto concatenate(std::initializer_list<E> parts, int axis = 0) {
  return concat_node<ops::concatenate, std::vector<E>>(std::vector<E>(parts), axis);
}
template <expression... Es>
auto concatenate(std::tuple<Es...> parts, int axis = 0) {
  return concat_node<ops::concatenate, std::tuple<Es...>>(std::move(parts), axis);
}

// Joins equally shaped parts along a new axis (axis may be -1 .. -(rank + 1)).
template <expression E>
auto stack(std::vector<E> parts, int axis = 0) {
  return concat_node<ops::stack, std::vector<E>>(std::move(parts), axis);
}
template <expression E>
auto stack(std::initializer_list<E> parts, int axis = 0) {
  return concat_node<ops::stack, std::vector<E>>(std::vector<E>(parts), axis);
}
template <expression... Es>
auto stack(std::tuple<Es...> parts, int axis = 0) {
  return concat_node<ops::stack, std::tuple<Es...>>(std::move(parts), axis);
}

}  // namespace zenith
