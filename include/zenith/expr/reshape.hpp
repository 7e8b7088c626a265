#pragma once
// reshape: same elements in row-major order, a new shape (one dimension may be -1).
// Evaluation restrides each leaf when its layout allows (no copy), else copies that leaf.
#include <array>
#include <concepts>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/expr_base.hpp"
#include "../core/shape.hpp"

namespace zenith {

template <expression C>
struct reshape_node : expr_base<reshape_node<C>> {
  using value_type = value_t<C>;
  static constexpr bool fixed = false;
  static constexpr std::string_view name = "reshape";
  C child;
  zenith::shape shape_;
  reshape_node(C c, zenith::shape s) : child(std::move(c)), shape_(s) {}
  zenith::shape shape() const { return shape_; }
  std::tuple<C const&> operands() const { return {child}; }  // the node protocol (expr/node.hpp)
  template <class D>
  reshape_node<D> with_operands(D d) const {
    return reshape_node<D>(std::move(d), shape_);
  }
  template <class F>
  void for_each_array(F&& f) const {
    child.for_each_array(f);
  }
};

namespace detail {
inline zenith::shape resolve_reshape(zenith::shape const& in, std::vector<long long> const& dims) {
  zenith::shape out;
  long long known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) throw shape_error("reshape: more than one -1 in the new shape");
      infer = int(i);
      out.push_back(1);
    } else if (dims[i] < 0) {
      throw value_error("reshape: negative dimension " + std::to_string(dims[i]));
    } else {
      out.push_back(std::size_t(dims[i]));
      known *= dims[i];
    }
  }
  long long n = (long long)in.numel();
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      throw shape_error("reshape: cannot reshape " + in.str() + " with a -1 into " +
                        std::to_string(n) + " elements");
    out[std::size_t(infer)] = std::size_t(n / known);
  }
  if ((long long)out.numel() != n)
    throw shape_error("reshape: cannot reshape " + in.str() + " into " + out.str());
  return out;
}
}  // namespace detail

namespace detail {
// One dimension of a reshape's new shape, from any integer type (-1: inferred). Converting
// through a constructor keeps `{x.size(), -1}` from being a narrowing list.
struct reshape_dim {
  long long value;
  template <std::integral I>
  reshape_dim(I i) : value(static_cast<long long>(i)) {  // NOLINT: implicit by design
    if constexpr (std::unsigned_integral<I>)
      if (static_cast<unsigned long long>(i) > (1ull << 62))
        throw value_error("reshape: dimension " + std::to_string(i) + " is too large");
  }
};
template <class It>
std::vector<long long> reshape_dims(It first, It last) {
  std::vector<long long> v;
  for (; first != last; ++first) v.push_back(reshape_dim(*first).value);
  return v;
}
}  // namespace detail

// The new shape as braces of integers of any type, or a std::vector or std::array of any
// integer type; one dimension may be -1, inferred from the element count. An rvalue child is
// moved in (see views.hpp).
template <expression E>
auto reshape(E&& e, std::initializer_list<detail::reshape_dim> dims) {
  std::vector<long long> d;
  for (auto x : dims) d.push_back(x.value);
  zenith::shape s = detail::resolve_reshape(e.shape(), d);
  return reshape_node<std::remove_cvref_t<E>>(std::forward<E>(e), s);
}
template <expression E, std::integral I>
auto reshape(E&& e, std::vector<I> const& dims) {
  zenith::shape s =
      detail::resolve_reshape(e.shape(), detail::reshape_dims(dims.begin(), dims.end()));
  return reshape_node<std::remove_cvref_t<E>>(std::forward<E>(e), s);
}
template <expression E, std::integral I, std::size_t N>
auto reshape(E&& e, std::array<I, N> const& dims) {
  zenith::shape s =
      detail::resolve_reshape(e.shape(), detail::reshape_dims(dims.begin(), dims.end()));
  return reshape_node<std::remove_cvref_t<E>>(std::forward<E>(e), s);
}
template <expression E, class S>
requires std::same_as<S, zenith::shape>
auto reshape(E&& e, S const& s) {
  // A shape has no -1 to infer: only the element counts need to agree.
  if (s.numel() != e.shape().numel())
    throw shape_error("reshape: cannot reshape " + e.shape().str() + " into " + s.str());
  return reshape_node<std::remove_cvref_t<E>>(std::forward<E>(e), s);
}

}  // namespace zenith
