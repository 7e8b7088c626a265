#pragma once
// The number of operands an elementwise op takes (1, 2 or 3), read off its scalar apply().
#include <cstddef>

template <class Op>
constexpr std::size_t op_arity() {
  if constexpr (requires(float x) { Op::apply(x); })
    return 1;
  else if constexpr (requires(float x) { Op::apply(x, x); })
    return 2;
  else
    return 3;
}
