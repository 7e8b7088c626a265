#pragma once
// zenith::detail::apply: std::apply without its noexcept specification, for std::tuple and
// zenith::node_tuple (core/node_tuple.hpp) alike.
//
// std::apply computes is_nothrow_invocable for every call it is instantiated for, and goes
// through std::invoke; the expression templates call it for every node of every graph (children
// tuples), thousands of times per translation unit, and that bookkeeping was a third of a test
// file's compile time. This calls f directly.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace zenith::detail {

template <class F, class Tuple, std::size_t... I>
constexpr decltype(auto) apply_indexed(F&& f, Tuple&& t, std::index_sequence<I...>) {
  using std::get;  // and zenith::get for a node_tuple, found by argument-dependent lookup
  return static_cast<F&&>(f)(get<I>(static_cast<Tuple&&>(t))...);
}

template <class F, class Tuple>
constexpr decltype(auto) apply(F&& f, Tuple&& t) {
  return apply_indexed(static_cast<F&&>(f), static_cast<Tuple&&>(t),
                       std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<Tuple>>>{});
}

}  // namespace zenith::detail
