#pragma once
// What the autodiff layer reads off an op tag (expr/ops.hpp), in one place: which of its
// operands take a derivative (whether the op is a transcendental worth keeping is costly_op, in
// expr/op_support.hpp, which the CPU loops read too).
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "../core/dtype.hpp"
#include "../core/expr_base.hpp"
#include "../expr/op_support.hpp"

namespace zenith::autodiff {

// Whether operand J of Op applied to operands Cs... takes a derivative: Op does not mark it
// non-differentiable (`nondiff_operands`: where's condition), its elements are floating, and it
// is not fixed-size (a C++ number or a tensor inside an array expression: a constant, which no
// traced array is below). The reverse rule gives such an operand a cotangent, the forward rule
// reads its tangent, and memoize looks for a read value only in such operands' partials: in
// 2.0 * sum(x), the number's partial, sum(x), is never formed, so nothing reads the sum.
template <class Op, std::size_t J, class... Cs>
inline constexpr bool operand_differentiable_v = [] {
  unsigned nondiff = 0;
  if constexpr (requires { Op::nondiff_operands; }) nondiff = unsigned(Op::nondiff_operands);
  using C = std::tuple_element_t<J, std::tuple<Cs...>>;
  return !(nondiff >> J & 1) && floating_element<value_t<C>> && !C::fixed;
}();

}  // namespace zenith::autodiff
