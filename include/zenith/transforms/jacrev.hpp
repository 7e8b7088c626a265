#pragma once
// Fixed-size reverse mode: Jacobians and gradients of functions of zenith::tensor.
//
//   auto fk = [](auto const& q) { ... return position; };      // generic over the element type
//   zn::tensor<double, 7> q{...};
//   zn::tensor<double, 3, 7> J = zn::jacrev(fk)(q);              // dp_i / dq_j
//   auto [value, g] = zn::detail::tensor_value_and_grad(energy, zn::argnums<0>, q);
//
// - jacrev(f)(x, rest...) calls f once with x as a tensor of rvar<T> (autodiff/reverse_scalar.hpp),
//   recording its scalar operations on the thread-local tape, then sweeps the tape backwards
//   once per output component. The result has jacfwd's type: tensor<T, Out..., In...> for an
//   output tensor<., Out...>, tensor<T, In...> for a scalar output. It pays off over jacfwd when
//   the function has many inputs and few outputs.
// - detail::tensor_value_and_grad(f, argnums<i...>, args...) is grad / value_and_grad for
//   functions whose differentiated arguments are tensors (all of one element type T): one
//   recording, one sweep. It returns std::pair{value as tensor<T>, gradient}, the gradient a
//   tensor shaped like the argument for one argnum and a std::tuple of them for several. The
//   function must return a scalar: an rvar, a number, or a tensor or fixed-size expression of
//   size 1; anything larger is a compile error.
// - Arguments that are not differentiated pass to f unchanged. An output that does not depend
//   on the inputs (plain numbers) has a zero derivative.
// - The tape is cut back to where it was when the call returns or throws, keeping its memory:
//   repeated calls allocate nothing once the tape has grown to the function's size.
// - A function that reads a reverse-mode variable recorded outside the call (an enclosing
//   jacrev / grad of the same element type: nested reverse mode) is a value_error, never a
//   silent zero.
// jacrev dispatches on the argument through detail::jacrev_call found by argument-dependent
// lookup on the tag: the overload here takes tensors; array versions are overloads elsewhere.
#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../autodiff/reverse_scalar.hpp"
#include "../backend/cpu/fixed_eval.hpp"
#include "../core/error.hpp"
#include "../core/tensor.hpp"
#include "../expr/fixed_ops.hpp"
#include "grad.hpp"      // argnums_t, distinct_argnums, argnum_slot
#include "jacobian.hpp"  // as_fixed_tensor, tensor_cat

namespace zenith {

namespace detail {

struct jacrev_tag {};

[[noreturn]] inline void reverse_nested_error(char const* transform) {
  throw value_error(std::string(transform) +
                    ": the function reads a reverse-mode variable from outside this call "
                    "(nested reverse mode of one element type is not supported)");
}

// The gradient of node `root` with respect to the n leaves at [leaf0, leaf0 + n), into grad[0,
// n): one backward pass over the nodes recorded after the leaves.
template <class T>
void reverse_sweep(reverse_tape<T>& t, std::uint32_t root, std::uint32_t leaf0, std::size_t n,
                   T* grad, char const* transform) {
  std::fill(grad, grad + n, T(0));
  if (root == rvar_none) return;  // a constant output
  if (root < leaf0 || root >= t.size()) reverse_nested_error(transform);
  std::size_t const first = std::size_t(leaf0) + n;  // the first node after the leaves
  if (root < first) {                                // the output is an input
    grad[root - leaf0] = T(1);
    return;
  }
  T* const adj = t.adjoints_for_all();
  rnode<T> const* const nodes = t.data();
  std::fill(adj + leaf0, adj + root, T(0));
  adj[root] = T(1);
  for (std::size_t i = root + 1; i-- > first;) {
    T const g = adj[i];
    // Nodes the output does not reach are skipped, so that an inf or NaN partial elsewhere
    // cannot reach the result as 0 * inf.
    if (g == T(0)) continue;
    rnode<T> const& nd = nodes[i];
    // Parents lie in [leaf0, i) (b == i for a one-parent node); anything else was recorded
    // outside this call.
    if (nd.a - leaf0 >= std::uint32_t(i) - leaf0 || nd.b - leaf0 > std::uint32_t(i) - leaf0)
        [[unlikely]]
      reverse_nested_error(transform);
    adj[nd.a] += nd.pa * g;
    adj[nd.b] += nd.pb * g;
  }
  std::copy(adj + leaf0, adj + first, grad);
}

// x as a tensor of new input variables on the tape.
template <std::floating_point T, std::size_t... In>
ZENITH_FIXED_INLINE tensor<rvar<T>, In...> rvar_leaves(tensor<T, In...> const& x) {
  tensor<rvar<T>, In...> r;
  static_for<tensor<T, In...>::count>([&](auto i)
                                          ZENITH_FIXED_LAMBDA { r[i] = rvar<T>::variable(x[i]); });
  return r;
}

// The node of an output element: none for a plain number.
template <class V>
ZENITH_FIXED_INLINE std::uint32_t output_node(V const& v) {
  if constexpr (is_rvar_v<V>)
    return v.i;
  else
    return rvar_none;
}

template <class F, std::floating_point T, std::size_t... In, class... Rest>
auto jacrev_call(jacrev_tag, F const& f, tensor<T, In...> const& x, Rest const&... rest) {
  constexpr std::size_t n = tensor<T, In...>::count;
  using R = rvar<T>;
  reverse_tape<T>& tape = rtape<T>();
  rtape_scope<T> scope(tape);
  std::uint32_t const leaf0 = tape.size();
  auto const xr = rvar_leaves(x);
  auto const y = as_fixed_tensor(f(xr, rest...));
  using Y = std::remove_cvref_t<decltype(y)>;
  using V = typename Y::value_type;
  static_assert(std::is_same_v<V, R> || scalar<V>,
                "zenith: jacrev: the function must return tensors of the numbers it was given "
                "(or plain numbers)");
  typename tensor_cat<T, typename Y::static_shape, fixed_shape<In...>>::type jac;
  for (std::size_t o = 0; o < Y::count; ++o)
    reverse_sweep(tape, output_node(y[o]), leaf0, n, jac.data() + o * n, "jacrev");
  return jac;
}

template <class X>
inline constexpr bool is_float_tensor_v = false;
template <std::floating_point T, std::size_t... N>
inline constexpr bool is_float_tensor_v<tensor<T, N...>> = true;

// Where each of several runs of lengths S... starts when laid end to end.
template <std::size_t... S>
constexpr std::array<std::size_t, sizeof...(S)> exclusive_prefix() {
  std::size_t const len[] = {S...};
  std::array<std::size_t, sizeof...(S)> r{};
  for (std::size_t k = 1; k < sizeof...(S); ++k) r[k] = r[k - 1] + len[k - 1];
  return r;
}

// A tensor of type G from G::count contiguous values.
template <class G, class T>
G tensor_from_flat(T const* p) {
  G r;
  std::copy(p, p + G::count, r.begin());
  return r;
}

// The value of a function's scalar result: an rvar's value, a number as it is.
template <class T, class V>
ZENITH_FIXED_INLINE T output_value(V const& v) {
  if constexpr (is_rvar_v<V>)
    return v.v;
  else
    return static_cast<T>(v);
}

// The argument f sees at position K: the rvar tensor for a differentiated argument, else the
// argument itself.
template <std::size_t K, std::size_t... I, class In, class Vars>
ZENITH_FIXED_INLINE auto const& tensor_grad_pick(In const& in, Vars const& vars) {
  constexpr std::size_t slot = argnum_slot<K, I...>();
  if constexpr (slot < sizeof...(I))
    return std::get<slot>(vars);
  else
    return std::get<K>(in);
}

// value_and_grad for functions whose differentiated arguments are tensors (see the top of this
// file).
template <class F, std::size_t... I, class... Args>
auto tensor_value_and_grad(F const& f, argnums_t<I...>, Args const&... args) {
  static_assert(sizeof...(I) >= 1, "zenith::grad: argnums<...> needs at least one argument");
  static_assert(((I < sizeof...(Args)) && ...), "zenith::grad: an argnum is out of range");
  static_assert(distinct_argnums<I...>(), "zenith::grad: an argnum is repeated");
  auto const in = std::forward_as_tuple(args...);
  using In = decltype(in);
  if constexpr (((I < sizeof...(Args)) && ...) && distinct_argnums<I...>()) {
    constexpr bool tensors =
        (is_float_tensor_v<std::remove_cvref_t<std::tuple_element_t<I, In>>> && ...);
    static_assert(tensors,
                  "zenith::grad: differentiated tensor arguments must be tensors of a floating "
                  "type");
    if constexpr (tensors) {
      constexpr std::size_t argnum_list[] = {I...};
      using T0 = typename std::remove_cvref_t<std::tuple_element_t<argnum_list[0], In>>::value_type;
      static_assert(
          (std::is_same_v<typename std::remove_cvref_t<std::tuple_element_t<I, In>>::value_type,
                          T0> &&
           ...),
          "zenith::grad: differentiated tensor arguments must share one element type");
      using T = T0;
      reverse_tape<T>& tape = rtape<T>();
      rtape_scope<T> scope(tape);
      std::uint32_t const leaf0 = tape.size();
      // Leaves in argnum order (a braced list evaluates left to right): argument I_k's elements
      // follow those of I_0 ... I_{k-1}.
      std::tuple<decltype(rvar_leaves(std::get<I>(in)))...> const vars{
          rvar_leaves(std::get<I>(in))...};
      auto const y = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return as_fixed_tensor(f(tensor_grad_pick<K, I...>(in, vars)...));
      }
      (std::index_sequence_for<Args...>{});
      using Y = std::remove_cvref_t<decltype(y)>;
      using V = typename Y::value_type;
      static_assert(std::is_same_v<V, rvar<T>> || scalar<V>,
                    "zenith::grad: the function must return the numbers it was given (or plain "
                    "numbers)");
      static_assert(Y::count == 1,
                    "zenith::grad: the function must return a scalar (an rvar, a number or a "
                    "size-1 tensor), not a larger tensor");
      constexpr std::size_t total = (std::remove_cvref_t<std::tuple_element_t<I, In>>::count + ...);
      constexpr auto offsets =
          exclusive_prefix<std::remove_cvref_t<std::tuple_element_t<I, In>>::count...>();
      std::array<T, total> g;
      reverse_sweep(tape, output_node(y[0]), leaf0, total, g.data(), "grad");
      tensor<T> value(output_value<T>(y[0]));
      auto grads =
          std::make_tuple(tensor_from_flat<std::remove_cvref_t<std::tuple_element_t<I, In>>>(
              g.data() + offsets[argnum_slot<I, I...>()])...);
      if constexpr (sizeof...(I) == 1)
        return std::pair{value, std::get<0>(std::move(grads))};
      else
        return std::pair{value, std::move(grads)};
    }
  }
}

// zn::grad and zn::value_and_grad on tensors (transforms/grad.hpp dispatches here).
template <class F, std::size_t... I, class... Args>
auto value_and_grad_call(tensor_grad_tag, F const& f, argnums_t<I...> n, Args const&... args) {
  return tensor_value_and_grad(f, n, args...);
}

}  // namespace detail

// The callable jacrev(f) returns.
template <class F>
struct jacrev_fn {
  F f;
  template <class... A>
  requires requires(F const& g, A const&... a) { jacrev_call(detail::jacrev_tag{}, g, a...); }
  auto operator()(A const&... a) const { return jacrev_call(detail::jacrev_tag{}, f, a...); }
};

// Reverse-mode Jacobian of f with respect to its first argument.
template <class F>
auto jacrev(F f) {
  return jacrev_fn<F>{std::move(f)};
}

}  // namespace zenith
