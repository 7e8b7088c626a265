#pragma once
// softmax and log_softmax along one axis, as barrier nodes: the CPU backend
// (backend/cpu/softmax.hpp) evaluates the input once into the output buffer and normalizes it
// in place, subtracting each slice's maximum first so that large inputs do not overflow.
// Integer and bool inputs give float32 (as jax.nn.softmax does); floating inputs keep their type.
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/dtype.hpp"
#include "../core/expr_base.hpp"
#include "../core/shape.hpp"

namespace zenith {

namespace ops {
// softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x)
struct softmax {
  static constexpr std::string_view name = "softmax";
  static constexpr std::string_view cuda = "softmax_rows";
  static constexpr bool log = false;
};
// log_softmax(x)_i = x_i - max x - log(sum_j exp(x_j - max x))
struct log_softmax {
  static constexpr std::string_view name = "log_softmax";
  static constexpr std::string_view cuda = "log_softmax_rows";
  static constexpr bool log = true;
};
}  // namespace ops

template <class Op, expression E>
struct softmax_node : expr_base<softmax_node<Op, E>> {
  using value_type = float_of_t<value_t<E>>;
  using op_type = Op;
  static constexpr bool barrier = true;
  static constexpr bool fixed = false;

  std::tuple<E> children;
  std::size_t axis;  // normalized, 0 <= axis < rank

  softmax_node(E e, int ax) : children(std::move(e)) {
    axis = normalize_axis(ax, input().shape().size(), Op::name);
  }
  E const& input() const { return std::get<0>(children); }
  zenith::shape shape() const { return input().shape(); }
  std::tuple<E const&> operands() const { return {input()}; }  // the node protocol (expr/node.hpp)
  template <class D>
  softmax_node<Op, D> with_operands(D d) const {
    return softmax_node<Op, D>(std::move(d), int(axis));
  }

  template <class F>
  void for_each_array(F&& f) const {
    input().for_each_array(f);
  }
};

// Softmax along axis (default: the last).
template <expression E>
auto softmax(E const& e, int axis = -1) {
  return softmax_node<ops::softmax, E>(e, axis);
}

// Log of the softmax along axis, computed directly (stable for very negative outputs).
template <expression E>
auto log_softmax(E const& e, int axis = -1) {
  return softmax_node<ops::log_softmax, E>(e, axis);
}

}  // namespace zenith
