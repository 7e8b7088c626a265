#pragma once
// Fixed-size forward-mode Jacobians and Hessians of functions of zenith::tensor:
//
//   auto fk = [](auto const& q) { ... return position; };      // generic over the element type
//   zn::tensor<double, 7> q{...};
//   zn::tensor<double, 3, 7> J = zn::jacfwd(fk)(q);              // dp_i / dq_j
//   zn::tensor<double, 7, 7> H = zn::hessian(energy)(q);         // energy returns a scalar
//
// - jacfwd(f)(x, rest...) calls f once with x as a tensor of dual<T, n> (n = x's size) whose
//   tangents are the unit vectors, so every derivative comes out of one unrolled pass with no
//   heap. The result is tensor<T, Out..., In...> for an output tensor<., Out...>; a scalar
//   output (a dual, a rank-0 tensor or expression) gives tensor<T, In...>.
// - hessian(f)(x, rest...) is forward over forward: x arrives as a tensor of
//   dual<dual<T, n>, n>. The result is tensor<T, Out..., In..., In...> (tensor<T, In..., In...>
//   for a scalar f).
// - f may return a tensor, a fixed-size expression, or a number; an output that does not depend
//   on x (plain doubles) has a zero derivative, which is what it is.
// - Differentiation is with respect to the first argument; further arguments are passed to f
//   unchanged.
// The entry points dispatch on the argument: these overloads take tensors; the array versions
// (and jacrev) are overloads of detail::jacfwd_call / hessian_call found by argument-dependent
// lookup on the tag.
#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "../autodiff/dual.hpp"
#include "../backend/cpu/fixed_eval.hpp"
#include "../core/tensor.hpp"
#include "../expr/fixed_ops.hpp"

namespace zenith {

namespace detail {

struct jacfwd_tag {};
struct hessian_tag {};

// f's result as a tensor: a tensor as it is, a fixed-size expression evaluated, a number as a
// rank-0 tensor.
template <class X>
ZENITH_FIXED_INLINE auto as_fixed_tensor(X const& x) {
  if constexpr (is_tensor_v<X>) {
    return x;
  } else if constexpr (fixed_expression<X>) {
    return tensor_of_t<value_t<X>, shape_of_t<X>>(x);
  } else {
    static_assert(!expression<X>,
                  "zenith: jacfwd / hessian of a tensor function: the function must return "
                  "fixed-size tensors (or numbers), not an array expression");
    return tensor<X>(x);
  }
}

template <class T, class Out, class... In>
struct tensor_cat;
template <class T, std::size_t... O, std::size_t... I1>
struct tensor_cat<T, fixed_shape<O...>, fixed_shape<I1...>> {
  using type = tensor<T, O..., I1...>;
};
template <class T, std::size_t... O, std::size_t... I1, std::size_t... I2>
struct tensor_cat<T, fixed_shape<O...>, fixed_shape<I1...>, fixed_shape<I2...>> {
  using type = tensor<T, O..., I1..., I2...>;
};

// Tangent k of a dual; zero for a plain number (the output did not depend on the input).
template <class T, class V>
ZENITH_FIXED_INLINE T tangent_of(V const& v, std::size_t k) {
  if constexpr (is_dual_v<V>)
    return static_cast<T>(v.d[k]);
  else
    return T(0);
}

template <class F, std::floating_point T, std::size_t... In, class... Rest>
ZENITH_FIXED_INLINE auto jacfwd_call(jacfwd_tag, F const& f, tensor<T, In...> const& x,
                                     Rest const&... rest) {
  constexpr std::size_t n = tensor<T, In...>::count;
  using D = dual<T, n>;
  tensor<D, In...> xd;
  static_for<n>([&](auto i) ZENITH_FIXED_LAMBDA { xd[i] = D::variable(x[i], i); });
  auto const y = as_fixed_tensor(f(std::as_const(xd), rest...));
  using Y = std::remove_cvref_t<decltype(y)>;
  using V = typename Y::value_type;
  static_assert(std::is_same_v<V, D> || scalar<V>,
                "zenith: jacfwd: the function must return tensors of the numbers it was given "
                "(or plain numbers)");
  typename tensor_cat<T, typename Y::static_shape, fixed_shape<In...>>::type jac;
  static_for<Y::count>([&](auto o) ZENITH_FIXED_LAMBDA {
    static_for<n>([&](auto i) ZENITH_FIXED_LAMBDA { jac[o * n + i] = tangent_of<T>(y[o], i); });
  });
  return jac;
}

template <class F, std::floating_point T, std::size_t... In, class... Rest>
ZENITH_FIXED_INLINE auto hessian_call(hessian_tag, F const& f, tensor<T, In...> const& x,
                                      Rest const&... rest) {
  constexpr std::size_t n = tensor<T, In...>::count;
  using D1 = dual<T, n>;
  using D2 = dual<D1, n>;
  tensor<D2, In...> xd;
  static_for<n>([&](auto i) ZENITH_FIXED_LAMBDA {
    D2 v(D1::variable(x[i], i));  // inner tangent: e_i
    v.d[i] = D1(T(1));            // outer tangent: e_i
    xd[i] = v;
  });
  auto const y = as_fixed_tensor(f(std::as_const(xd), rest...));
  using Y = std::remove_cvref_t<decltype(y)>;
  using V = typename Y::value_type;
  static_assert(std::is_same_v<V, D2> || scalar<V>,
                "zenith: hessian: the function must return tensors of the numbers it was given "
                "(or plain numbers)");
  typename tensor_cat<T, typename Y::static_shape, fixed_shape<In...>, fixed_shape<In...>>::type h;
  static_for<Y::count>([&](auto o) ZENITH_FIXED_LAMBDA {
    static_for<n>([&](auto i) ZENITH_FIXED_LAMBDA {
      if constexpr (is_dual_v<V>) {
        static_for<n>([&](auto j) ZENITH_FIXED_LAMBDA {
          h[(o * n + i) * n + j] = static_cast<T>(y[o].d[i].d[j]);
        });
      } else {
        static_for<n>([&](auto j) ZENITH_FIXED_LAMBDA { h[(o * n + i) * n + j] = T(0); });
      }
    });
  });
  return h;
}

}  // namespace detail

// The callable jacfwd(f) returns.
template <class F>
struct jacfwd_fn {
  F f;
  template <class... A>
  requires requires(F const& g, A const&... a) { jacfwd_call(detail::jacfwd_tag{}, g, a...); }
  ZENITH_FIXED_INLINE auto operator()(A const&... a) const {
    return jacfwd_call(detail::jacfwd_tag{}, f, a...);
  }
};

// The callable hessian(f) returns.
template <class F>
struct hessian_fn {
  F f;
  template <class... A>
  requires requires(F const& g, A const&... a) { hessian_call(detail::hessian_tag{}, g, a...); }
  ZENITH_FIXED_INLINE auto operator()(A const&... a) const {
    return hessian_call(detail::hessian_tag{}, f, a...);
  }
};

// Forward-mode Jacobian of f with respect to its first argument.
template <class F>
auto jacfwd(F f) {
  return jacfwd_fn<F>{std::move(f)};
}

// Hessian of f with respect to its first argument (forward over forward).
template <class F>
auto hessian(F f) {
  return hessian_fn<F>{std::move(f)};
}

}  // namespace zenith
