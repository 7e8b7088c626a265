#pragma once
// The reverse pass of a staged fixed-size expression, part 3: user rules (custom_vjp), called
// with the arguments' values and the output's adjoint (staged_eval.hpp has the protocol).
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "staged_eval.hpp"

namespace zenith::autodiff::staged {

// Reading what a user rule (fwd, bwd: compiled apart, called) has just stored one element at a
// time. A vector load that spans several such stores cannot take its data from them and waits
// until they reach the cache: stochastic_volatility at T = 4 read fwd's 4 results as one vector
// right after the call, and that load was the pass's hottest instruction (a seventh of its
// time). So short results are read element by element, each through an empty asm that keeps
// the compiler from merging the loads back into one, and put together in registers. Up to 8
// elements: the loads and inserts for 16 cost more than the one wait they save (T = 16 measured
// slower in bench/fastad_suite).
inline constexpr std::size_t lane_by_lane_up_to = 8;  // elements of the rule's result
template <class C>
ZENITH_FIXED_INLINE C load_alone(C const& x) {
  C v = x;
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+x"(v));
#elif defined(__aarch64__)
    __asm__("" : "+w"(v));
#endif
  }
  return v;
}
template <class B, class C>
ZENITH_FIXED_INLINE B load_lane_by_lane(C const* p) {
  typedef C vec __attribute__((vector_size(B::size * sizeof(C))));
  vec v;
  zenith::detail::static_for<B::size>(
      [&](auto l) ZENITH_FIXED_LAMBDA { v[std::size_t(l)] = load_alone(p[std::size_t(l)]); });
  return B(typename B::register_type(v));
}

// A user rule (custom_vjp): fwd on the arguments' values, bwd on its residuals and the output's
// adjoint; bwd's cotangents go down each staged argument's backward loop.
// An argument of a user rule as fwd sees it: a staged argument's own tensor, anything else
// evaluated into one. Tensors are passed by reference and results built in place: copying a
// tensor is a pass over its elements.
template <class Arg>
struct rule_input {
  using tensor_t = zenith::detail::tensor_of_t<value_t<Arg>, zenith::detail::shape_of_t<Arg>>;
  tensor_t t;
  template <class Ev>
  ZENITH_FIXED_INLINE void read(Ev& k) {
    for (std::size_t j = 0; j < t.count; ++j) t[j] = typename tensor_t::value_type(k.value(j));
  }
  tensor_t const& get() const { return t; }
};
template <std::size_t Slot, class T, std::size_t... N>
struct rule_input<staged_tensor<Slot, T, N...>> {
  using tensor_t = tensor<T, N...>;
  tensor_t const* t = nullptr;
  template <class Ev>
  ZENITH_FIXED_INLINE void read(Ev& k) {
    t = k.values;
  }
  tensor<T, N...> const& get() const { return *t; }
};
template <class Arg>
requires is_tensor_like_v<Arg>
struct rule_input<Arg> {  // a constant tensor: read where it is
  using tensor_t = zenith::detail::tensor_of_t<value_t<Arg>, zenith::detail::shape_of_t<Arg>>;
  tensor_t const* t = nullptr;
  template <class Ev>
  ZENITH_FIXED_INLINE void read(Ev& k) {
    t = &zenith::detail::fixed_materialize(k.e);  // the tensor itself, for both
  }
  tensor_t const& get() const { return *t; }
};
// f's result, made where it is to live (std::optional::emplace constructs from the conversion).
template <class F>
struct made_by {
  F f;
  operator std::invoke_result_t<F&>() { return f(); }  // NOLINT: the point is the conversion
};
template <class F>
made_by(F) -> made_by<F>;

template <class Fwd, class Bwd, class R, class Out, class... Args, class Ctx>
struct eval<staged_custom<Fwd, Bwd, R, Out, Args...>, Ctx> {
  using node = staged_custom<Fwd, Bwd, R, Out, Args...>;
  using C = compute_t<typename Out::value_type>;

  // The rule's functions, not the node: an evaluator that refers into the expression keeps the
  // whole expression in memory.
  Fwd const* fwd;
  Bwd const* bwd;
  staged_custom_state<R, Out>& st;
  std::tuple<eval<Args, Ctx>...> kids;
  std::tuple<rule_input<Args>...> in;  // fwd's arguments; alive until bwd has run

  template <class Slots>
  eval(built_from<node, Slots> b)  // NOLINT
      : fwd(b.node.fwd),
        bwd(b.node.bwd),
        st(*b.node.state),
        kids(zenith::detail::apply(
            [&](Args const&... a) { return std::tuple<eval<Args, Ctx>...>(build(a, b.slots)...); },
            b.node.args)) {
    ++st.users;
  }

  // Every copy evaluates its arguments' barriers (so that whichever copy finishes last can
  // run their backward loops); the first runs fwd, the others share its result. (No copy
  // records its own address anywhere: an evaluator whose address escapes keeps its
  // accumulators in memory instead of registers.)
  ZENITH_FIXED_INLINE void forward() {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (std::get<K>(kids).forward(), ...);
      if (st.r) return;
      (std::get<K>(in).read(std::get<K>(kids)), ...);
      st.r.emplace(made_by{[&] { return (*fwd)(std::get<K>(in).get()...); }});
      std::fill_n(st.adj.data(), st.adj.count, typename Out::value_type(0));
    }
    (std::index_sequence_for<Args...>{});
  }
  ZENITH_FIXED_INLINE C value(std::size_t i) const { return C(std::get<0>(*st.r).at(i)); }
  ZENITH_FIXED_INLINE C again(std::size_t i) const { return C(std::get<0>(*st.r).at(i)); }
  static constexpr bool batches =
      batch_type<C> && std::is_same_v<std::remove_cvref_t<std::tuple_element_t<0, R>>, Out>;
  static constexpr bool short_result = Out::count <= lane_by_lane_up_to;
  template <class B>
  ZENITH_FIXED_INLINE B batch(std::size_t j) const {
    if constexpr (short_result)
      return load_lane_by_lane<B>(std::get<0>(*st.r).data() + j);
    else
      return B::load_unaligned(std::get<0>(*st.r).data() + j);
  }
  template <class A>
  ZENITH_FIXED_INLINE void back(std::size_t i, A const& a) {
    st.adj[i] = st.adj[i] + typename Out::value_type(a);
  }
  // The last copy to finish has every adjoint: bwd runs, and its cotangents go down this
  // copy's arguments.
  ZENITH_FIXED_INLINE void finish() {
    if (++st.finished == st.users) reverse();
  }

 private:
  void reverse() {
    auto const cts = (*bwd)(std::get<1>(*st.r), std::as_const(st.adj));
    static_assert(std::tuple_size_v<std::remove_cvref_t<decltype(cts)>> == sizeof...(Args),
                  "zenith::custom_vjp: bwd must return a std::tuple with one cotangent per "
                  "argument");
    [&]<std::size_t... K>(std::index_sequence<K...>) { (pass<K>(std::get<K>(cts)), ...); }
    (std::index_sequence_for<Args...>{});
  }
  template <std::size_t K, class G>
  ZENITH_FIXED_INLINE void pass(G const& ct) {
    using Arg = std::tuple_element_t<K, std::tuple<Args...>>;
    if constexpr (zenith::detail::staged_node<Arg>()) {
      static_assert(
          fixed_expression<G> &&
              std::is_same_v<zenith::detail::shape_of_t<G>, zenith::detail::shape_of_t<Arg>>,
          "zenith::custom_vjp: in a staged tensor function, bwd must return a tensor "
          "shaped like its argument as that argument's cotangent");
      auto& k = std::get<K>(kids);
      using KV = std::remove_cvref_t<decltype(k.again(0))>;
      constexpr std::size_t size = zenith::detail::shape_of_t<Arg>::size;
      backward_loop<size>([&](std::size_t j) ZENITH_FIXED_LAMBDA {
        if constexpr (size <= lane_by_lane_up_to)
          k.back(j, KV(load_alone(ct.at(j))));
        else
          k.back(j, KV(ct.at(j)));
      });
      k.finish();
    }
  }
};

}  // namespace zenith::autodiff::staged
