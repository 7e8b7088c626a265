#pragma once
// Reverse mode for functions of arrays: grad, value_and_grad and vjp.
//
//   auto loss = [](auto const& w, auto const& x) { return zn::mean(zn::square(zn::matmul(x, w)));
//   }; zn::array<double> gw = zn::grad(loss)(w, x);                               // w.r.t.
//   argument 0 auto [value, grads] = zn::value_and_grad(loss, zn::argnums<0, 1>)(w, x);  // a
//   std::tuple auto [y, pullback] = zn::vjp(f, x);  auto [gx] = pullback(ct);
//
// A differentiable argument is an array or a tree of arrays (core/tree.hpp); its gradient has
// the same structure. Each array is passed to the function as an alias of itself (same memory,
// a buffer identity of its own), so the leaves that read it can be told apart from every other
// array, even from another argument that is the same array. The function's result is
// differentiated on its type (autodiff/backward.hpp): each gradient is one fused expression per
// place the argument is read, and where the result is built of elementwise ops, sums and views,
// all of them are computed in one loop (autodiff/collect.hpp, take_paths.hpp). Intermediates the
// function materializes are on the tape (autodiff/tape.hpp), pulled after the result's own pass.
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../autodiff/backward.hpp"
#include "../autodiff/fused_value.hpp"
#include "../autodiff/ir_tape_run.hpp"
#include "../autodiff/rules.hpp"
#include "../autodiff/take_paths.hpp"
#include "../autodiff/tape.hpp"
#include "../core/apply.hpp"
#include "../core/creation.hpp"
#include "../core/runtime_instance.hpp"
#include "../core/tensor.hpp"
#include "../core/trace.hpp"
#include "../core/tree.hpp"

namespace zenith {

// Which arguments to differentiate with respect to: zn::argnums<0, 2>.
template <std::size_t... I>
struct argnums_t {};
template <std::size_t... I>
inline constexpr argnums_t<I...> argnums{};

namespace detail {

template <std::size_t... I>
constexpr bool distinct_argnums() {
  constexpr std::size_t v[] = {I...};
  for (std::size_t a = 0; a < sizeof...(I); ++a)
    for (std::size_t b = a + 1; b < sizeof...(I); ++b)
      if (v[a] == v[b]) return false;
  return true;
}

// Position of K among I..., or sizeof...(I) when absent.
template <std::size_t K, std::size_t... I>
constexpr std::size_t argnum_slot() {
  constexpr std::size_t v[] = {I..., K};
  std::size_t j = 0;
  while (v[j] != K) ++j;
  return j;
}

// The trace of a transform that starts now: nested in the active one, if any (grad of grad, jvp
// of grad), which then records the new transform's work (core/trace.hpp).
template <class = void>
trace_state nested_trace(char const* transform) {
  trace_state st;
  st.transform = transform;
  st.parent = active_trace();
  st.ir = make_ir_trace();
  return st;
}
ZENITH_RUNTIME_INSTANCE(trace_state nested_trace<>(char const* transform))

// The argument as the traced function sees it: a copy of the tree whose every array is an
// alias of itself (same memory) under a fresh buffer identity, marked traced. Enclosing levels
// that trace the array trace the alias as the array itself.
template <class Tree>
Tree traced_tree(Tree const& tree, trace_state& st, char const* transform) {
  Tree t = tree;
  for_each_leaf(t, [&](auto& a) {
    using A = std::remove_cvref_t<decltype(a)>;
    if (!a.storage())
      throw value_error(std::string(transform) +
                        ": a differentiable argument holds an array with no storage "
                        "(default-constructed)");
    auto b = buffer::alias(a.storage());
    st.traced.insert(b.get());
    if (st.parent) trace_alias(st.parent, a, b);
    a = A::from_buffer(std::move(b), a.data(), a.shape());
    ir::detail::dtype_emitted<value_t<A>>();
    st.ir->bind(st.ir->graph.add_input(dtype_of<value_t<A>>(), a.shape()), a);
  });
  return t;
}

// The gradient of a traced tree: the same structure, each array replaced by the cotangent
// accumulated for it, or zeros where the result does not depend on it. A cotangent the tape's
// pass computed may be a traced alias of the buffer that holds it (a reshape of a product, say):
// the gradient is that buffer's, which a jit recording finds among those it allocated.
template <class Tree>
Tree gradient_tree(Tree const& traced, autodiff::cotangents& cts) {
  Tree g = traced;
  for_each_leaf(g, [&](auto& a) {
    using T = value_t<std::remove_cvref_t<decltype(a)>>;
    if (auto ct = cts.template take<T>(a.storage().get()))
      a = array<T>::from_buffer(buffer::origin(ct->storage()), ct->data(), ct->shape());
    else
      a = zeros<T>(a.shape(), a.device());
  });
  return g;
}

// The function's result checked and evaluated: what the reverse pass starts from.
template <class Out>
void check_scalar_result(Out const& out, char const* transform) {
  static_assert(expression<Out>, "zenith::grad: the function must return an array expression");
  static_assert(floating_element<value_t<Out>>,
                "zenith::grad: the function must return a floating-point value");
  if (out.shape().numel() != 1)
    throw value_error(std::string(transform) +
                      ": the function must return a scalar (size 1), got shape " +
                      out.shape().str());
}

template <class E>
inline constexpr bool is_total_reduction_v = false;
template <class C>
inline constexpr bool is_total_reduction_v<reduce_node<ops::reduce_sum, C>> = true;
template <class C>
inline constexpr bool is_total_reduction_v<reduce_node<ops::reduce_mean, C>> = true;

// The reverse pass of the function's result e from ct into cts: as pairs taken together
// (autodiff/take_paths.hpp) where every node of e has a rule that only builds expressions, else
// through the sink.
template <class E, class G, class Sink>
void result_backward(E const& e, G&& ct, Sink& sink, autodiff::cotangents& cts) {
  if constexpr (autodiff::collects_v<E>)
    autodiff::take_paths(cts, sink, autodiff::collect(e, std::forward<G>(ct)));
  else
    autodiff::backward(e, std::forward<G>(ct), sink);
}

// The function's value, and the static reverse pass from it into cts. Barriers are evaluated
// once (memoized): the value and every rule that reads a node's value share them. A loss that
// sums or averages everything (the usual case) is not evaluated first: its sum is queued with
// the gradients, so one pass reads the inputs for both; so is a sum below the root that no rule
// reads (-0.5 * sum(square(x - mu)) / s2 - c). The value is final once cts is flushed.
template <class Out>
array<value_t<Out>> value_and_backward(Out const& out, autodiff::cotangents& cts) {
  using T = value_t<Out>;
  if constexpr (is_total_reduction_v<Out>) {
    using Op = typename Out::op_type;
    auto child = autodiff::memoize_child<Out>(out.child);
    reduce_node<Op, std::remove_cvref_t<decltype(child)>> top(std::move(child), out.axes,
                                                              out.keepdims);
    // The seed reaches every element as one constant, 1 for a sum and 1/n for a mean: a number
    // in the loops rather than a broadcast array read at stride 0.
    using C = value_t<decltype(top.child)>;
    double seed = std::is_same_v<Op, ops::reduce_mean> ? 1.0 / double(top.count()) : 1.0;
    auto ct = broadcast_to(scalar_node<C>(C(seed)), top.child.shape());
    // The sum is held back to share a loop with a gradient (autodiff/fused_value.hpp), unless
    // transforms nest: the enclosing transform records the value then, and the sink, holding
    // nothing, passes every cotangent on (one reverse pass compiled for both).
    using Child = std::remove_cvref_t<decltype(top.child)>;
    autodiff::value_fusing_sink<autodiff::total_target<Op, T, Child>> sink(cts);
    std::optional<array<T>> value;
    if (active_trace())
      value = evaluate_for_rules<T, 0>(top);
    else
      value = sink.template queue_total<Op, T>(top.child, out.shape());
    if (!value) value = evaluate_untraced<T>(top);
    result_backward(top.child, std::move(ct), sink, cts);
    sink.finish();
    return *std::move(value);
  } else {
    auto seed = broadcast_to(scalar_node<T>(T(1)), out.shape());
    // Sums that no rule reads are computed in the gradients' pass (the first of them in one
    // loop with a gradient, autodiff/fused_value.hpp); the value after it. Nested, the
    // enclosing transform records the value, and nothing is queued or held (the same reverse
    // pass, compiled once).
    using Target = autodiff::first_queued_total_t<Out>;
    bool const nested = active_trace() != nullptr;
    auto run = [&](auto& sink) {
      autodiff::memoized_t<Out> forward =
          nested ? autodiff::memoized_t<Out>(autodiff::memoize(out)) : autodiff::memoize(out, sink);
      if (nested) {
        array<T> value = autodiff::memoized_value(forward);
        result_backward(forward, std::move(seed), sink, cts);
        return value;
      }
      result_backward(forward, std::move(seed), sink, cts);
      if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(sink)>, autodiff::cotangents>)
        sink.finish();
      cts.flush();
      return autodiff::memoized_value(forward);
    };
    if constexpr (std::is_void_v<Target>) {
      return run(cts);
    } else {
      autodiff::value_fusing_sink<Target> sink(cts);
      return run(sink);
    }
  }
}

// Functions of fixed-size tensors are differentiated with reverse-mode numbers
// (transforms/jacrev.hpp, which defines value_and_grad_call for this tag).
struct tensor_grad_tag {};

template <class F, std::size_t... I>
struct value_and_grad_fn {
  using argnums_type = argnums_t<I...>;
  F f;

  template <class... Args>
  auto operator()(Args const&... args) const {
    static_assert(sizeof...(I) >= 1, "zenith::grad: argnums<...> needs at least one argument");
    static_assert(((I < sizeof...(Args)) && ...), "zenith::grad: an argnum is out of range");
    static_assert(distinct_argnums<I...>(), "zenith::grad: an argnum is repeated");
    if constexpr ((is_tensor_v<std::tuple_element_t<I, std::tuple<Args...>>> && ...))
      return value_and_grad_call(tensor_grad_tag{}, f, argnums<I...>, args...);
    else
      return on_arrays(args...);
  }

 private:
  template <class... Args>
  auto on_arrays(Args const&... args) const {
    auto in = std::forward_as_tuple(args...);
    static_assert((differentiable_tree<std::tuple_element_t<I, decltype(in)>> && ...),
                  "zenith::grad: differentiable arguments must be arrays of a floating type, or "
                  "trees of them (std::vector, std::array, std::tuple, std::map<std::string, ...>, "
                  "ZENITH_FIELDS structs)");
    trace_state st = nested_trace("grad");
    auto traced = std::make_tuple(traced_tree(std::get<I>(in), st, "grad")...);
    auto out = [&]<std::size_t... K>(std::index_sequence<K...>) {
      trace_scope scope(&st);
      return f(pick<K>(in, traced)...);
    }
    (std::index_sequence_for<Args...>{});
    check_scalar_result(out, "grad");

    autodiff::cotangents cts(st);
    auto value = value_and_backward(out, cts);
    autodiff::pull_tape(st, cts, autodiff::tape_use::consume);
    cts.flush();

    auto grads = [&]<std::size_t... J>(std::index_sequence<J...>) {
      return std::make_tuple(gradient_tree(std::get<J>(traced), cts)...);
    }
    (std::make_index_sequence<sizeof...(I)>{});
    if constexpr (sizeof...(I) == 1)
      return std::pair{value, std::get<0>(std::move(grads))};
    else
      return std::pair{value, std::move(grads)};
  }

  template <std::size_t K, class In, class Traced>
  static auto const& pick(In const& in, Traced const& traced) {
    constexpr std::size_t slot = argnum_slot<K, I...>();
    if constexpr (slot < sizeof...(I))
      return std::get<slot>(traced);
    else
      return std::get<K>(in);
  }
};

}  // namespace detail

// value_and_grad(f[, argnums<i...>])(args...): {f(args...) evaluated, gradients}. One argnum
// gives the bare gradient (an array like the argument); several give a std::tuple.
template <class F, std::size_t... I>
auto value_and_grad(F f, argnums_t<I...>) {
  return detail::value_and_grad_fn<F, I...>{std::move(f)};
}
template <class F>
auto value_and_grad(F f) {
  return value_and_grad(std::move(f), argnums<0>);
}

// vjp(f, args...): {f(args...) evaluated, pullback}. pullback(ct) takes a cotangent of the
// output's shape and returns a std::tuple with one cotangent per argument (each in its
// argument's structure); it may be called any number of times, and keeps the function's
// recorded intermediates alive as long as it lives.
template <class F, class... Args>
auto vjp(F f, Args const&... args) {
  static_assert((differentiable_tree<Args> && ...),
                "zenith::vjp: arguments must be arrays of a floating type, or trees of them");
  auto st = std::make_shared<detail::trace_state>(detail::nested_trace("vjp"));
  auto traced = std::make_tuple(detail::traced_tree(args, *st, "vjp")...);
  auto out = [&] {
    detail::trace_scope scope(st.get());
    return zenith::detail::apply(f, traced);
  }();
  using Out = decltype(out);
  static_assert(expression<Out>, "zenith::vjp: the function must return an array expression");
  static_assert(floating_element<value_t<Out>>,
                "zenith::vjp: the function must return a floating-point value");
  using T = value_t<Out>;
  autodiff::memoized_t<Out> forward = autodiff::memoize(out);
  array<T> value = autodiff::memoized_value(forward);
  auto pullback = [st, traced, forward, s = value.shape()](auto const& ct) {
    static_assert(expression<std::remove_cvref_t<decltype(ct)>>,
                  "zenith::vjp: the cotangent must be an array expression");
    if (ct.shape() != s)
      throw shape_error("vjp: cotangent of shape " + ct.shape().str() + " for an output of shape " +
                        s.str());
    autodiff::cotangents cts(*st);
    autodiff::backward(forward, detail::convert<T>(ct), cts);
    autodiff::pull_tape(*st, cts, autodiff::tape_use::keep);
    return zenith::detail::apply(
        [&](auto const&... t) { return std::make_tuple(detail::gradient_tree(t, cts)...); },
        traced);
  };
  return std::pair{value, pullback};
}

namespace detail {
// The callable grad returns: value_and_grad's, keeping the gradients.
template <class F, std::size_t... I>
struct grad_fn {
  using argnums_type = argnums_t<I...>;
  value_and_grad_fn<F, I...> vg;
  template <class... Args>
  auto operator()(Args const&... args) const {
    return vg(args...).second;
  }
};

// What jit looks for to stage a gradient of tensors (transforms/staged_grad.hpp).
template <class G>
inline constexpr bool is_value_and_grad_fn_v = false;
template <class F, std::size_t... I>
inline constexpr bool is_value_and_grad_fn_v<value_and_grad_fn<F, I...>> = true;
template <class G>
inline constexpr bool is_grad_fn_v = false;
template <class F, std::size_t... I>
inline constexpr bool is_grad_fn_v<grad_fn<F, I...>> = true;
}  // namespace detail

// grad(f[, argnums<i...>])(args...): the gradients alone.
template <class F, std::size_t... I>
auto grad(F f, argnums_t<I...>) {
  return detail::grad_fn<F, I...>{{std::move(f)}};
}
template <class F>
auto grad(F f) {
  return grad(std::move(f), argnums<0>);
}

}  // namespace zenith
