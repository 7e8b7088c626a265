#pragma once
// Zero-copy adaptors between zenith arrays and xtensor. Not included by <zenith/zenith.hpp>:
// include <zenith/interop/xtensor.hpp> explicitly (it needs the xtensor headers).
//
//   auto x = zenith::to_xtensor(a);      // an xt::xarray_adaptor over a's buffer
//   auto y = zenith::to_xtensor<2>(a);   // the same with a fixed rank (xt::xtensor_adaptor)
//   zenith::array<float> v = zenith::from_xtensor(xarr);  // a zenith view of xarr's memory
//
// Neither copies: writes through one are seen through the other. Neither keeps the other's
// memory alive, so the owner must outlive the adaptor or view:
//   - to_xtensor(a): the adaptor points into a's buffer. Keep `a` (or any array sharing its
//     buffer) alive while the adaptor is used, and remember that `a = expr` may rebind `a` to a
//     new buffer: the adaptor keeps pointing at the old one. Use zenith::assign(a, expr) to write
//     through.
//   - from_xtensor(x): the view is a zenith::view over x.data(). Keep x alive and do not resize
//     or reshape it while the view is used.
#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include "../core/array.hpp"

namespace zenith {

namespace detail {

template <class T>
void check_cpu_for_xtensor(array<T> const& a) {
  if (a.device() != cpu)
    throw device_error("to_xtensor: array of shape " + a.shape().str() +
                       " is not in CPU memory; copy it to the CPU first");
}

inline std::string layout_name(xt::layout_type l) {
  switch (l) {
    case xt::layout_type::row_major:
      return "row_major";
    case xt::layout_type::column_major:
      return "column_major";
    case xt::layout_type::dynamic:
      return "dynamic";
    default:
      return "any";
  }
}

// A zenith view over an xtensor container's memory, which must be row-major contiguous.
template <class T, class X>
array<T> view_of_xtensor(X& x) {
  static_assert(std::is_same_v<decltype(x.data()), T*>,
                "from_xtensor: the xtensor's memory is const; a zenith view needs writable memory");
  std::vector<std::size_t> dims(x.shape().begin(), x.shape().end());
  if (dims.size() > max_rank)
    throw value_error("from_xtensor: xtensor of rank " + std::to_string(dims.size()) +
                      " exceeds zenith's maximum rank " + std::to_string(max_rank));
  zenith::shape s(dims);
  // Row-major contiguous: every axis longer than 1 has the stride of the axes after it (xtensor
  // gives size-1 axes stride 0). A column-major container with one long axis passes too.
  std::size_t expect = 1;
  for (std::size_t k = dims.size(); k-- > 0;) {
    if (dims[k] != 1 && std::size_t(x.strides()[k]) != expect) {
      std::string why = x.layout() == xt::layout_type::row_major
                            ? "strides that are not row-major contiguous"
                            : layout_name(x.layout()) + " layout";
      throw value_error("from_xtensor: xtensor of shape " + s.str() + " has " + why +
                        "; zenith needs row-major contiguous memory");
    }
    expect *= dims[k];
  }
  return view(x.data(), s);
}

}  // namespace detail

// An xt::xarray_adaptor over a's buffer (dynamic rank, row-major), zero-copy. The array's
// buffer must outlive the adaptor; see the top of this header.
template <element T>
auto to_xtensor(array<T>& a) {
  detail::check_cpu_for_xtensor(a);
  std::vector<std::size_t> s(a.shape().begin(), a.shape().end());
  return xt::adapt(a.data(), a.size(), xt::no_ownership(), s);
}
// A read-only adaptor for a const array.
template <element T>
auto to_xtensor(array<T> const& a) {
  detail::check_cpu_for_xtensor(a);
  std::vector<std::size_t> s(a.shape().begin(), a.shape().end());
  return xt::adapt(a.data(), a.size(), xt::no_ownership(), s);
}

// The same with the rank N in the type (an xt::xtensor_adaptor); a's rank must be N.
template <std::size_t N, element T>
auto to_xtensor(array<T>& a) {
  detail::check_cpu_for_xtensor(a);
  if (a.ndim() != N)
    throw shape_error("to_xtensor<" + std::to_string(N) + ">: array of shape " + a.shape().str() +
                      " has rank " + std::to_string(a.ndim()));
  std::array<std::size_t, N> s{};
  for (std::size_t k = 0; k < N; ++k) s[k] = a.shape()[k];
  return xt::adapt(a.data(), a.size(), xt::no_ownership(), s);
}

// A zenith array viewing an xt::xarray<T>'s memory (zero-copy, like zenith::view). The xarray
// must be row-major contiguous (value_error naming its layout otherwise) and must outlive the
// view.
template <class EC, xt::layout_type L, class SC, class Tag>
requires element<typename EC::value_type>
auto from_xtensor(xt::xarray_container<EC, L, SC, Tag>& x) {
  return detail::view_of_xtensor<typename EC::value_type>(x);
}
// The same for an xt::xtensor<T, N>.
template <class EC, std::size_t N, xt::layout_type L, class Tag>
requires element<typename EC::value_type>
auto from_xtensor(xt::xtensor_container<EC, N, L, Tag>& x) {
  return detail::view_of_xtensor<typename EC::value_type>(x);
}

// The same for xtensor's adaptors (xt::adapt over a buffer), so that an array taken through
// to_xtensor and back still shares one buffer.
template <class EC, xt::layout_type L, class SC, class Tag>
requires element<typename std::remove_cvref_t<EC>::value_type>
auto from_xtensor(xt::xarray_adaptor<EC, L, SC, Tag>& x) {
  return detail::view_of_xtensor<typename std::remove_cvref_t<EC>::value_type>(x);
}
template <class EC, std::size_t N, xt::layout_type L, class Tag>
requires element<typename std::remove_cvref_t<EC>::value_type>
auto from_xtensor(xt::xtensor_adaptor<EC, N, L, Tag>& x) {
  return detail::view_of_xtensor<typename std::remove_cvref_t<EC>::value_type>(x);
}

}  // namespace zenith
