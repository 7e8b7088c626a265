#pragma once
// jacfwd, jacrev and hessian of functions of arrays (the tensor versions are in jacobian.hpp
// and jacrev.hpp):
//
//   zn::array<double> J = zn::jacfwd(f)(x);    // shape f(x).shape + x.shape: J[o..., i...]
//   zn::array<double> K = zn::jacrev(f)(x);    // the same values
//   zn::array<double> H = zn::hessian(f)(x);   // f returns a scalar: shape x.shape + x.shape
//
// - jacfwd runs one jvp per element of x, with the unit tangents: column i of the Jacobian is
//   the tangent of f's output for tangent e_i.
// - jacrev runs f once (vjp) and its pullback once per element of the output, with the unit
//   cotangents: row o is the cotangent of x for cotangent e_o. Fewer passes when the output is
//   smaller than the input.
// - hessian is jacfwd of grad (forward over reverse): each column is a Hessian-vector product,
//   jvp(grad(f)), which runs the reverse pass under the forward trace (nested transforms,
//   core/trace.hpp). H[i, j] = d^2 f / dx_i dx_j.
// Like the tensor versions they differentiate with respect to the first argument; further
// arguments are passed to f unchanged. The cost is size(x) forward (jacfwd) or forward-and-
// reverse (hessian) passes: these are for small and medium inputs, or for checking.
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>

#include "../core/array.hpp"
#include "../core/creation.hpp"
#include "grad.hpp"
#include "jacobian.hpp"
#include "jacrev.hpp"
#include "jvp.hpp"

namespace zenith::detail {

// The Jacobian of g at x, column by column: out.shape + x.shape. The unit tangents are written
// on the host and the Jacobian assembled there; for an x on a device, they travel there and
// back, and the Jacobian is returned on x's device.
template <class G, floating_element T>
auto array_jacobian_by_columns(G const& g, array<T> const& x, char const* transform) {
  if (!x.storage())
    throw value_error(std::string(transform) + ": the argument is an array with no storage");
  note_unreplayable("a Jacobian of an array function");  // written element by element
  std::size_t const n = x.size();
  array<T> const& xc = x;  // arrays are row major: element i is data()[i]
  using Out = decltype(jvp(g, std::make_tuple(xc), std::make_tuple(xc)).second);
  using R = value_t<Out>;
  array<R> jac;
  for (std::size_t i = 0; i < n; ++i) {
    auto t = zeros<T>(x.shape());
    t.data()[i] = T(1);
    auto [y, ty] = jvp(g, std::make_tuple(xc), std::make_tuple(t.to(x.device())));
    if (i == 0) {
      zenith::shape s = y.shape();
      for (auto d : x.shape()) s.push_back(d);
      jac = zeros<R>(s);
    }
    array<R> col = array<R>(ty).to(cpu);  // contiguous
    for (std::size_t o = 0; o < col.size(); ++o) jac.data()[o * n + i] = col.data()[o];
  }
  if (n == 0) {
    auto [y, ty] = jvp(g, std::make_tuple(xc), std::make_tuple(xc));
    zenith::shape s = y.shape();
    for (auto d : x.shape()) s.push_back(d);
    jac = zeros<R>(s);
  }
  return jac.to(x.device());
}

template <class F, floating_element T, class... Rest>
auto jacfwd_call(jacfwd_tag, F const& f, array<T> const& x, Rest const&... rest) {
  auto g = [&](array<T> const& xx) { return f(xx, rest...); };
  return array_jacobian_by_columns(g, x, "jacfwd");
}

template <class F, floating_element T, class... Rest>
auto jacrev_call(jacrev_tag, F const& f, array<T> const& x, Rest const&... rest) {
  if (!x.storage()) throw value_error("jacrev: the argument is an array with no storage");
  note_unreplayable("a Jacobian of an array function");  // written element by element
  auto [y, pullback] = vjp([&](array<T> const& xx) { return f(xx, rest...); }, x);
  using R = value_t<decltype(y)>;
  std::size_t const n = x.size(), m = y.size();
  zenith::shape s = y.shape();
  for (auto d : x.shape()) s.push_back(d);
  auto jac = zeros<R>(s);
  for (std::size_t o = 0; o < m; ++o) {
    auto ct = zeros<R>(y.shape());
    ct.data()[o] = R(1);
    array<T> row = std::get<0>(pullback(ct.to(x.device()))).to(cpu);
    for (std::size_t i = 0; i < n; ++i) jac.data()[o * n + i] = R(row.data()[i]);
  }
  return jac.to(x.device());
}

template <class F, floating_element T, class... Rest>
auto hessian_call(hessian_tag, F const& f, array<T> const& x, Rest const&... rest) {
  auto df = grad([&](array<T> const& xx) { return f(xx, rest...); });
  return array_jacobian_by_columns(df, x, "hessian");
}

}  // namespace zenith::detail
