#pragma once
// concatenate and stack, as barrier nodes over a list of parts of one expression type.
// The CPU backend (backend/cpu/concat.hpp) evaluates each part straight into its slice of the
// output, so no part is ever materialized on its own.
//   concatenate(parts, axis): parts agree on every dimension but axis, which adds up.
//   stack(parts, axis):       parts have one shape; a new axis of length parts.size() is inserted.
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

template <class Op, expression E>
struct concat_node : expr_base {
  using value_type = value_t<E>;
  using op_type = Op;
  static constexpr bool barrier = true;
  static constexpr bool fixed = false;

  std::vector<E> parts;
  std::size_t axis = 0;  // normalized axis of the output
  zenith::shape shape_;

  concat_node(std::vector<E> ps, int ax) : parts(std::move(ps)) {
    if (parts.empty()) throw value_error(std::string(Op::name) + ": need at least one array");
    zenith::shape first = parts[0].shape();
    if constexpr (Op::new_axis) {
      axis = normalize_axis(ax, first.size() + 1, Op::name);
      for (std::size_t i = 1; i < parts.size(); ++i) {
        zenith::shape s = parts[i].shape();
        if (!(s == first))
          throw shape_error(std::string(Op::name) + ": all parts must have one shape, got " +
                            first.str() + " and " + s.str() + " (part " + std::to_string(i) + ")");
      }
      for (std::size_t i = 0; i <= first.size(); ++i) {
        if (i == axis) shape_.push_back(parts.size());
        if (i < first.size()) shape_.push_back(first[i]);
      }
    } else {
      if (first.size() == 0)
        throw shape_error(std::string(Op::name) + ": rank-0 parts cannot be concatenated");
      axis = normalize_axis(ax, first.size(), Op::name);
      shape_ = first;
      for (std::size_t i = 1; i < parts.size(); ++i) {
        zenith::shape s = parts[i].shape();
        bool ok = s.size() == first.size();
        for (std::size_t k = 0; ok && k < s.size(); ++k) ok = k == axis || s[k] == first[k];
        if (!ok)
          throw shape_error(std::string(Op::name) + ": shapes " + first.str() + " and " + s.str() +
                            " (part " + std::to_string(i) + ") differ off the concatenation axis " +
                            std::to_string(axis));
        shape_[axis] += s[axis];
      }
    }
  }

  zenith::shape shape() const { return shape_; }

  template <class F>
  void for_each_array(F&& f) const {
    for (auto const& p : parts) p.for_each_array(f);
  }
};

// Joins parts along an existing axis (negative axes count from the end).
template <expression E>
auto concatenate(std::vector<E> parts, int axis = 0) {
  return concat_node<ops::concatenate, E>(std::move(parts), axis);
}
template <expression E>
auto concatenate(std::initializer_list<E> parts, int axis = 0) {
  return concat_node<ops::concatenate, E>(std::vector<E>(parts), axis);
}

// Joins equally shaped parts along a new axis (axis may be -1 .. -(rank + 1)).
template <expression E>
auto stack(std::vector<E> parts, int axis = 0) {
  return concat_node<ops::stack, E>(std::move(parts), axis);
}
template <expression E>
auto stack(std::initializer_list<E> parts, int axis = 0) {
  return concat_node<ops::stack, E>(std::vector<E>(parts), axis);
}

}  // namespace zenith
