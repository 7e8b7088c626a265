#pragma once
// The reverse pass of a staged fixed-size expression (expr/staged.hpp): the value of a scalar
// expression over staged tensors, and its gradient added into each staged tensor's gradient.
// The evaluators are in staged_eval.hpp (the protocol, leaves, elementwise ops),
// staged_barriers.hpp (reductions, matmul) and staged_custom.hpp (user rules); this header decides
// which gradients are assigned rather than added to, and runs the pass.
#include <cstddef>
#include <cstdint>
#include <utility>

#include "../expr/staged.hpp"
#include "staged_barriers.hpp"
#include "staged_custom.hpp"
#include "staged_eval.hpp"

namespace zenith::autodiff::staged {

// ---- Which gradients the backward writes exactly once per element ----
//
// reads<Slot, E>(): how many leaves of E are staged argument Slot. writes_each_once<Slot, E>():
// with E's back(i) called once for each of its elements, Slot's leaf (read once in E) gets one
// write per element: true through elementwise nodes that pass a derivative to it at its own
// shape (no broadcast), bijective gathers, sum / mean / prod (every input gets its share) and
// matmul; not through max / min (only the ties), broadcasting, or ops with no derivative.
template <class E>
struct walk {  // a constant subtree
  template <std::size_t>
  static constexpr std::size_t reads() {
    return 0;
  }
  template <std::size_t>
  static constexpr bool once() {
    return false;
  }
};
template <std::size_t S, class T, std::size_t... N>
struct walk<staged_tensor<S, T, N...>> {
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return S == Slot;
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    return S == Slot;
  }
};
template <class Op, class... Cs>
struct walk<map_node<Op, Cs...>> {
  using S = typename map_node<Op, Cs...>::static_shape;
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return (walk<Cs>::template reads<Slot>() + ... + 0);
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    if constexpr (piecewise_constant_op<Op>() || reads<Slot>() != 1) {
      return false;
    } else {
      return [&]<std::size_t... K>(std::index_sequence<K...>) {
        return ((walk<Cs>::template reads<Slot>() == 1 && takes_gradient<Op>(K) &&
                 std::is_same_v<typename Cs::static_shape, S> && walk<Cs>::template once<Slot>()) ||
                ...);
      }
      (std::index_sequence_for<Cs...>{});
    }
  }
};
template <class Kind, class Plan, class Shape, class T, class E>
struct walk<staged_reduce<Kind, Plan, Shape, T, E>> {
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return walk<E>::template reads<Slot>();
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    constexpr bool every_input = std::is_same_v<Kind, zenith::detail::fixed_sum_kind> ||
                                 std::is_same_v<Kind, zenith::detail::fixed_mean_kind> ||
                                 std::is_same_v<Kind, zenith::detail::fixed_prod_kind>;
    return every_input && Plan::group > 0 && walk<E>::template once<Slot>();
  }
};
template <class Dims, class Shape, class T, class A, class B>
struct walk<staged_matmul<Dims, Shape, T, A, B>> {
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return walk<A>::template reads<Slot>() + walk<B>::template reads<Slot>();
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    return reads<Slot>() == 1 && (walk<A>::template once<Slot>() || walk<B>::template once<Slot>());
  }
};
template <class Fwd, class Bwd, class R, class Out, class... Args>
struct walk<staged_custom<Fwd, Bwd, R, Out, Args...>> {  // bwd gives each argument a whole
                                                         // cotangent
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return (walk<Args>::template reads<Slot>() + ... + 0);
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    return reads<Slot>() == 1 && (walk<Args>::template once<Slot>() || ...);
  }
};
template <class Map, class Shape, class E>
struct walk<staged_gather<Map, Shape, E>> {  // every index map here is a bijection
  template <std::size_t Slot>
  static constexpr std::size_t reads() {
    return walk<E>::template reads<Slot>();
  }
  template <std::size_t Slot>
  static constexpr bool once() {
    return walk<E>::template once<Slot>();
  }
};

// Bit s set where slot s (of Slots staged arguments) is written exactly once per element by
// the backward pass of root R.
template <class R, std::size_t Slots>
constexpr std::uint64_t assigned_slots() {
  std::uint64_t mask = 0;
  [&]<std::size_t... S>(std::index_sequence<S...>) {
    ((mask |= (S < 64 && walk<R>::template once<S>()) ? std::uint64_t(1) << S : 0), ...);
  }
  (std::make_index_sequence<Slots>{});
  return mask;
}

// The value of a size-1 staged expression, with its gradient written into the staged tensors'
// gradients (slots: a tuple of staged_argument, one per slot): assigned where Ctx says so, added
// elsewhere (those must hold zeros).
template <class Ctx, staged_expression R, class Slots>
ZENITH_FIXED_INLINE auto value_and_backward(R const& r, Slots const& slots) {
  static_assert(zenith::detail::shape_of_t<R>::size == 1,
                "zenith::grad: the function must return a scalar (a size-1 tensor expression)");
  eval<R, Ctx> ev(build(r, slots));
  ev.forward();
  auto const v = ev.value(0);
  ev.back(0, decltype(v)(1));
  ev.finish();
  return v;
}

}  // namespace zenith::autodiff::staged
