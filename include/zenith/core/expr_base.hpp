#pragma once
// The root of every expression node. Deriving from it puts a node in namespace zenith, so the
// operators and functions are found by argument-dependent lookup whatever order nodes compose in.
#include <concepts>
#include <type_traits>

#include "dtype.hpp"

namespace zenith {

struct expr_base {};

template <class E>
concept expression = std::derived_from<std::remove_cvref_t<E>, expr_base>;

// An expression whose shape lives in its type (built only from zenith::tensor and scalars).
template <class E>
concept fixed_expression = expression<E> && std::remove_cvref_t<E>::fixed;

template <class E>
using value_t = typename std::remove_cvref_t<E>::value_type;

namespace detail {
// Whether a node is staged: built by a jit-staged tensor function over its arguments
// (expr/staged.hpp). Nodes that can hold staged children say so in a `staged` member.
template <class E>
constexpr bool staged_node() {
  if constexpr (requires { std::remove_cvref_t<E>::staged; })
    return std::remove_cvref_t<E>::staged;
  else
    return false;
}
}  // namespace detail

// A fixed-size expression over the staged arguments of a jit-staged tensor function.
template <class E>
concept staged_expression = fixed_expression<E> && detail::staged_node<E>();

}  // namespace zenith
