#pragma once
// Staged gradients of tensor functions: jit of grad / value_and_grad on zenith::tensor.
//
//   auto vg = zn::jit(zn::value_and_grad([](auto const& x, auto const& mu) {
//     return -0.5 * zn::sum(zn::square(x - mu));
//   }));
//   auto [value, g] = vg(x, mu);      // x, mu: zn::tensor<double, 64>; g like x
//
// Without jit, grad of a tensor function runs it on reverse-mode numbers (transforms/jacrev.hpp):
// any code works, element access and scalar math included, at a tape entry per scalar operation.
// Under jit the function is staged instead, as JAX's jit traces it: its differentiated arguments
// arrive as staged tensors (expr/staged.hpp), the function builds its whole computation as one
// expression type, and the value and gradient are generated from that type
// (autodiff/staged_reverse.hpp): loops at compile-time bounds, the op tags' rules, no tape and
// no heap. So the function must be written with whole-tensor operations; reading an element of
// a staged argument is a compile-time error that says so.
//
// Results are those of grad on tensors: the value as a rank-0 tensor, the gradient a tensor like
// its argument for one argnum and a std::tuple of them for several. A tensor argument that is
// not differentiated reaches the function as a tensor_ref to the caller's tensor (read in place,
// not copied into the expression); other arguments as they are.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../autodiff/staged_reverse.hpp"
#include "../core/tensor.hpp"
#include "../core/tensor_ref.hpp"
#include "grad.hpp"
#include "jacrev.hpp"  // is_float_tensor_v, tensor_grad_pick

namespace zenith::detail {

// The staged leaf for differentiated argument number Slot, and where its values and gradient
// are.
template <std::size_t Slot, class T, std::size_t... N>
staged_tensor<Slot, T, N...> stage(tensor<T, N...> const&) {
  return {};
}
template <class T, std::size_t... N>
staged_argument<T, N...> argument_of(tensor<T, N...> const& x, tensor<T, N...>& g) {
  return {&x, &g};
}

// What f receives for argument K: the staged leaf of a differentiated argument; for a tensor
// that is not differentiated, a tensor_ref (the caller's tensor outlives the call, and an
// expression that holds a tensor by value copies its elements each time it is built into a
// larger one); anything else as it is.
template <std::size_t K, std::size_t... I, class In, class Leaves>
ZENITH_FIXED_INLINE decltype(auto) staged_pick(In const& in, Leaves const& leaves) {
  if constexpr (argnum_slot<K, I...>() == sizeof...(I) && is_tensor_v<std::tuple_element_t<K, In>>)
    return tensor_ref(std::get<K>(in));
  else
    return tensor_grad_pick<K, I...>(in, leaves);
}

// The gradient tensors of the arguments I... of a call whose argument types are In (a tuple):
// one tensor, or a std::tuple of them.
template <class In, std::size_t... I>
struct staged_grads {
  using type = std::tuple<std::remove_cvref_t<std::tuple_element_t<I, In>>...>;
};
template <class In, std::size_t I>
struct staged_grads<In, I> {
  using type = std::remove_cvref_t<std::tuple_element_t<I, In>>;
};
template <class In, std::size_t... I>
using staged_grads_t = typename staged_grads<In, I...>::type;

// The J-th gradient of grads (a tuple, or the one tensor).
template <std::size_t J, class G>
auto& staged_grad_slot(G& grads) {
  if constexpr (is_tensor_v<G>)
    return grads;
  else
    return std::get<J>(grads);
}

// The constructor arguments of a call's gradients (a tensor, or a tuple of them) with their
// elements unset: staged_value_into sets them all. Built in place from these, not moved: a move
// of a tensor is a copy of its elements.
template <class G>
auto unset_gradient_args() {
  if constexpr (is_tensor_v<G>)
    return std::tuple<uninitialized_t>(uninitialized);
  else
    return [&]<class... T>(std::type_identity<std::tuple<T...>>) {
      return std::tuple<decltype((void(std::type_identity<T>{}), uninitialized))...>(
          (void(std::type_identity<T>{}), uninitialized)...);
    }(std::type_identity<G>{});
}

// f's value on args; the gradients with respect to args I... are written into grads, whatever
// they held: each is either written once per element by the backward pass or zeroed first and
// added into. The result object is the caller's, so no tensor is copied on the way out.
template <class F, std::size_t... I, class G, class... Args>
auto staged_value_into(F const& f, argnums_t<I...>, G& grads, Args const&... args) {
  // Not const, these and y: GCC's scalar replacement leaves a const aggregate in memory.
  auto in = std::forward_as_tuple(args...);
  auto leaves = [&]<std::size_t... J>(std::index_sequence<J...>) {
    return std::make_tuple(stage<J>(std::get<I>(in))...);
  }
  (std::index_sequence_for<std::integral_constant<std::size_t, I>...>{});
  auto slots = [&]<std::size_t... J>(std::index_sequence<J...>) {
    return std::make_tuple(argument_of(std::get<I>(in), staged_grad_slot<J>(grads))...);
  }
  (std::index_sequence_for<std::integral_constant<std::size_t, I>...>{});
  auto const call = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return f(staged_pick<K, I...>(in, leaves)...);
  };
  using Y = std::remove_cvref_t<decltype(call(std::index_sequence_for<Args...>{}))>;
  // What the user rules' nodes share lives until y is evaluated; a call without one pays nothing.
  [[maybe_unused]] std::conditional_t<holds_custom_rule<Y>, staged_arena, std::tuple<>> arena;
  auto y = call(std::index_sequence_for<Args...>{});
  static_assert(fixed_expression<Y> || scalar<Y>,
                "zenith::jit(grad): a staged tensor function must return a fixed-size "
                "expression of its arguments (or a number)");
  constexpr std::uint64_t assigned = [] {
    if constexpr (staged_expression<Y>)
      return autodiff::staged::assigned_slots<Y, sizeof...(I)>();
    else
      return std::uint64_t(0);
  }();
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    auto zero = [](auto& g) {
      using V = typename std::remove_cvref_t<decltype(g)>::value_type;
      std::fill_n(g.data(), g.count, V(0));
    };
    ((((assigned >> J) & 1u) ? void() : zero(staged_grad_slot<J>(grads))), ...);
  }
  (std::index_sequence_for<std::integral_constant<std::size_t, I>...>{});
  if constexpr (staged_expression<Y>) {
    static_assert(floating_element<value_t<Y>>,
                  "zenith::jit(grad): the function must return a floating-point value");
    using plan = autodiff::staged::write_plan<assigned>;
    return tensor<value_t<Y>>(value_t<Y>(autodiff::staged::value_and_backward<plan>(y, slots)));
  } else if constexpr (fixed_expression<Y>) {  // depends on no argument: zero gradients
    static_assert(detail::shape_of_t<Y>::size == 1,
                  "zenith::grad: the function must return a scalar (a size-1 tensor "
                  "expression)");
    return tensor<value_t<Y>>(value_t<Y>(fixed_materialize(y).at(0)));
  } else {
    return tensor<Y>(y);
  }
}

template <class... Args, std::size_t... I>
constexpr bool staged_arguments_ok(argnums_t<I...>) {
  using In = std::tuple<Args const&...>;
  static_assert(sizeof...(I) >= 1, "zenith::grad: argnums<...> needs at least one argument");
  static_assert(((I < sizeof...(Args)) && ...), "zenith::grad: an argnum is out of range");
  static_assert(distinct_argnums<I...>(), "zenith::grad: an argnum is repeated");
  if constexpr (((I < sizeof...(Args)) && ...) && distinct_argnums<I...>()) {
    constexpr bool tensors =
        (is_float_tensor_v<std::remove_cvref_t<std::tuple_element_t<I, In>>> && ...);
    static_assert(tensors,
                  "zenith::jit(grad): differentiated tensor arguments must be tensors of a "
                  "floating type");
    return tensors;
  } else {
    return false;
  }
}

// value_and_grad of a staged tensor function: {value as a rank-0 tensor, gradients}.
template <class F, std::size_t... I, class... Args>
auto staged_value_and_grad(F const& f, argnums_t<I...> n, Args const&... args) {
  if constexpr (staged_arguments_ok<Args...>(n)) {
    using G = staged_grads_t<std::tuple<Args const&...>, I...>;
    using V = decltype(staged_value_into(f, n, std::declval<G&>(), args...));
    return [&] {  // one named result, returned where the caller wants it (no tensor copied)
      std::pair<V, G> r(std::piecewise_construct, std::tuple<>(), unset_gradient_args<G>());
      r.first = staged_value_into(f, n, r.second, args...);
      return r;
    }();
  }
}

// grad of a staged tensor function: the gradients alone.
template <class F, std::size_t... I, class... Args>
auto staged_grad(F const& f, argnums_t<I...> n, Args const&... args) {
  if constexpr (staged_arguments_ok<Args...>(n)) {
    return [&] {
      using G = staged_grads_t<std::tuple<Args const&...>, I...>;
      auto g = std::make_from_tuple<G>(unset_gradient_args<G>());
      staged_value_into(f, n, g, args...);
      return g;
    }();
  }
}

// What jit does with a call on tensors (transforms/jit.hpp): a gradient is staged; any other
// tensor function is already compiled code, called as it is.
template <class F, class... Args>
auto staged_call(F const& f, Args const&... args) {
  if constexpr (is_value_and_grad_fn_v<F>)
    return staged_value_and_grad(f.f, typename F::argnums_type{}, args...);
  else if constexpr (is_grad_fn_v<F>)
    return staged_grad(f.vg.f, typename F::argnums_type{}, args...);
  else
    return f(args...);
}

}  // namespace zenith::detail
