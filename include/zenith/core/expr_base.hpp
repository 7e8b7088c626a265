#pragma once
// The root of every expression node: struct my_node : expr_base<my_node<...>>. Deriving from it
// puts a node in namespace zenith, so the operators and functions are found by
// argument-dependent lookup whatever order nodes compose in.
//
// One base type per node type, not one for all: a node's first child sits at offset 0, and C++
// gives two subobjects of the same type distinct addresses, so with a common empty base every
// level of nesting added 8 bytes of padding (a staged log-density's expression was four times
// the size of its constants, and copied as such).
#include <type_traits>

#include "dtype.hpp"

namespace zenith {

template <class Node>
struct expr_base {};

namespace detail {
template <class Node>
void expr_base_of(expr_base<Node> const&);  // only its deduction is used
}  // namespace detail

template <class E>
concept expression = requires(std::remove_cvref_t<E> const& e) {
  detail::expr_base_of(e);
};

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
