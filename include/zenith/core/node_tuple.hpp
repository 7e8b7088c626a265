#pragma once
// node_tuple<Cs...>: an expression node's children, held by value in one flat struct that is
// trivially copyable whenever the children are. Read with zenith::get<I> (std::tuple_size and
// std::tuple_element work as for std::tuple).
//
// Why not std::tuple: its move constructor is user-provided (libstdc++), so a node holding one
// is never trivially copyable, and each copy made while an expression is built (every operator
// copies its operands into the new node) becomes a copy per element and per nesting level. GCC's
// scalar replacement does not see through those, so a staged gradient of a few dozen nodes kept
// its whole expression in stack memory, copied piece by piece (wide loads of narrow stores:
// store-forwarding stalls) and with its constants no longer known to be constants. Copied as one
// aggregate, the same expression lives in registers.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace zenith {

namespace detail {
template <std::size_t I, class T>
struct node_tuple_leaf {
  T value;
};
template <class Seq, class... Ts>
struct node_tuple_impl;
template <std::size_t... I, class... Ts>
struct node_tuple_impl<std::index_sequence<I...>, Ts...> : node_tuple_leaf<I, Ts>... {
  constexpr explicit node_tuple_impl(Ts... ts) : node_tuple_leaf<I, Ts>{std::move(ts)}... {}
};
}  // namespace detail

template <class... Ts>
struct node_tuple : detail::node_tuple_impl<std::index_sequence_for<Ts...>, Ts...> {
  using detail::node_tuple_impl<std::index_sequence_for<Ts...>, Ts...>::node_tuple_impl;
};

namespace detail {
template <std::size_t I, class... Ts>
using node_tuple_leaf_t = node_tuple_leaf<I, std::tuple_element_t<I, std::tuple<Ts...>>>;
}  // namespace detail

template <std::size_t I, class... Ts>
constexpr auto& get(node_tuple<Ts...>& t) noexcept {
  return static_cast<detail::node_tuple_leaf_t<I, Ts...>&>(t).value;
}
template <std::size_t I, class... Ts>
constexpr auto const& get(node_tuple<Ts...> const& t) noexcept {
  return static_cast<detail::node_tuple_leaf_t<I, Ts...> const&>(t).value;
}
template <std::size_t I, class... Ts>
constexpr auto&& get(node_tuple<Ts...>&& t) noexcept {
  return std::move(static_cast<detail::node_tuple_leaf_t<I, Ts...>&>(t).value);
}

}  // namespace zenith

template <class... Ts>
struct std::tuple_size<zenith::node_tuple<Ts...>>
    : std::integral_constant<std::size_t, sizeof...(Ts)> {};
template <std::size_t I, class... Ts>
struct std::tuple_element<I, zenith::node_tuple<Ts...>> {
  using type = std::tuple_element_t<I, std::tuple<Ts...>>;
};
