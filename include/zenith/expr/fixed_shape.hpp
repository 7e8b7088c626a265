#pragma once
// Shapes that live in types, for zenith::tensor<T, N...> and the expressions built from it.
// Broadcasting them happens at compile time; a mismatch is a one-line static_assert.
#include <array>
#include <cstddef>
#include <utility>

#include "../core/shape.hpp"

namespace zenith {

template <std::size_t... N>
struct fixed_shape {
  static constexpr std::size_t rank = sizeof...(N);
  static constexpr std::array<std::size_t, rank> dims{N...};
  static constexpr std::size_t size = (N * ... * std::size_t(1));
  static constexpr zenith::shape dynamic() { return zenith::shape::known(dims); }
  // Row-major stride of axis k.
  static constexpr std::size_t stride(std::size_t k) {
    std::size_t s = 1;
    for (std::size_t i = k + 1; i < rank; ++i) s *= dims[i];
    return s;
  }
};

namespace detail {

template <class A, class B>
struct fixed_broadcast_dims {
  static constexpr std::size_t rank = A::rank > B::rank ? A::rank : B::rank;
  static constexpr std::size_t dim(std::size_t i) {
    std::size_t da = i < rank - A::rank ? 1 : A::dims[i - (rank - A::rank)];
    std::size_t db = i < rank - B::rank ? 1 : B::dims[i - (rank - B::rank)];
    return da == 1 ? db : da;
  }
  static constexpr bool ok() {
    for (std::size_t i = 0; i < rank; ++i) {
      std::size_t da = i < rank - A::rank ? 1 : A::dims[i - (rank - A::rank)];
      std::size_t db = i < rank - B::rank ? 1 : B::dims[i - (rank - B::rank)];
      if (da != db && da != 1 && db != 1) return false;
    }
    return true;
  }
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>) -> fixed_shape<dim(I)...>;
  using type = decltype(make(std::make_index_sequence<rank>{}));
};

template <class A, class B>
struct fixed_broadcast2 {
  static_assert(fixed_broadcast_dims<A, B>::ok(),
                "zenith: fixed-size shapes do not broadcast (each axis must match or be 1)");
  using type = typename fixed_broadcast_dims<A, B>::type;
};

template <class... S>
struct fixed_broadcast;
template <class A>
struct fixed_broadcast<A> {
  using type = A;
};
template <class A, class B, class... Rest>
struct fixed_broadcast<A, B, Rest...> {
  using type = typename fixed_broadcast<typename fixed_broadcast2<A, B>::type, Rest...>::type;
};

}  // namespace detail

template <class... S>
using fixed_broadcast_t = typename detail::fixed_broadcast<S...>::type;

// Flat index into a (broadcast) child of shape From for flat index i of shape To.
// Folds to a constant when i is one; identity when the shapes are equal.
template <class From, class To>
constexpr std::size_t fixed_broadcast_index(std::size_t i) {
  if constexpr (std::is_same_v<From, To>) {
    return i;
  } else if constexpr (From::size == 1) {
    return 0;
  } else {
    std::size_t out = 0;
    constexpr std::size_t off = To::rank - From::rank;
    for (std::size_t k = 0; k < To::rank; ++k) {
      std::size_t idx = (i / To::stride(k)) % To::dims[k];
      if (k >= off && From::dims[k - off] != 1) out += idx * From::stride(k - off);
    }
    return out;
  }
}

}  // namespace zenith
