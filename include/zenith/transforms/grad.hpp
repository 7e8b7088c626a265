#pragma once
// grad and value_and_grad for functions of arrays that return one scalar expression.
//
//   auto loss = [](auto const& w, auto const& x) { return zn::mean(zn::square(zn::matmul(x, w)));
//   }; zn::array<double> gw = zn::grad(loss)(w, x);                        // w.r.t. argument 0
//   auto [value, grads] = zn::value_and_grad(loss, zn::argnums<0, 1>)(w, x);  // a std::tuple
//
// Each differentiable argument is passed to the function as an alias of itself (same memory,
// a buffer identity of its own), so the leaves that read it can be told apart from every other
// array, even from another argument that is the same array. The function's result is
// differentiated on its type (autodiff/backward.hpp): each gradient is one fused expression per
// place the argument is read, summed into the gradient.
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../autodiff/backward.hpp"
#include "../core/creation.hpp"
#include "../core/trace.hpp"

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

template <class A>
inline constexpr bool differentiable_argument = false;
template <class T>
inline constexpr bool differentiable_argument<array<T>> = floating_element<T>;

// The argument as the traced function sees it: an alias with a fresh buffer identity.
template <class T>
array<T> traced_alias(array<T> const& a, trace_state& st) {
  auto b = buffer::alias(a.storage());
  st.traced.push_back(b.get());
  return array<T>::from_buffer(std::move(b), const_cast<T*>(a.data()), a.shape());
}

template <class F, std::size_t... I>
struct value_and_grad_fn {
  F f;

  template <class... Args>
  auto operator()(Args const&... args) const {
    static_assert(sizeof...(I) >= 1, "zenith::grad: argnums<...> needs at least one argument");
    static_assert(((I < sizeof...(Args)) && ...), "zenith::grad: an argnum is out of range");
    static_assert(distinct_argnums<I...>(), "zenith::grad: an argnum is repeated");
    auto in = std::forward_as_tuple(args...);
    static_assert(
        (differentiable_argument<std::remove_cvref_t<std::tuple_element_t<I, decltype(in)>>> &&
         ...),
        "zenith::grad: differentiable arguments must be arrays of a floating type");
    trace_state st{"grad", {}};
    auto traced = std::make_tuple(traced_alias(std::get<I>(in), st)...);
    auto out = [&]<std::size_t... K>(std::index_sequence<K...>) {
      trace_scope scope(st);
      return f(pick<K>(in, traced)...);
    }
    (std::index_sequence_for<Args...>{});

    using Out = std::remove_cvref_t<decltype(out)>;
    static_assert(expression<Out>, "zenith::grad: the function must return an array expression");
    static_assert(floating_element<value_t<Out>>,
                  "zenith::grad: the function must return a floating-point value");
    if (out.shape().numel() != 1)
      throw value_error("grad: the function must return a scalar (size 1), got shape " +
                        out.shape().str());
    using T = value_t<Out>;
    // Barriers evaluated once: the value and every rule that reads a node's value share them.
    auto const& forward = autodiff::memoize(out);
    array<T> value = [&] {
      if constexpr (requires { forward.value; })
        return forward.value;  // a barrier at the root (a reduction, usually): already evaluated
      else
        return eval(forward);
    }();

    std::tuple<std::optional<std::remove_cvref_t<std::tuple_element_t<I, decltype(in)>>>...> acc;
    auto sink = [&](auto const& leaf, auto const& ct) {
      buffer const* b = leaf.storage().get();
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        (accumulate(std::get<J>(acc), std::get<J>(traced), b, leaf, ct), ...);
      }
      (std::make_index_sequence<sizeof...(I)>{});
    };
    autodiff::backward(forward, full<T>(out.shape(), T(1)), sink);

    auto grads = [&]<std::size_t... J>(std::index_sequence<J...>) {
      return std::make_tuple(finish(std::get<J>(acc), std::get<J>(traced))...);
    }
    (std::make_index_sequence<sizeof...(I)>{});
    if constexpr (sizeof...(I) == 1)
      return std::pair{value, std::get<0>(std::move(grads))};
    else
      return std::pair{value, std::move(grads)};
  }

 private:
  template <std::size_t K, class In, class Traced>
  static auto const& pick(In const& in, Traced const& traced) {
    constexpr std::size_t slot = argnum_slot<K, I...>();
    if constexpr (slot < sizeof...(I))
      return std::get<slot>(traced);
    else
      return std::get<K>(in);
  }

  template <class T, class Leaf, class G>
  static void accumulate(std::optional<array<T>>& acc, array<T> const& target, buffer const* b,
                         Leaf const&, G const& ct) {
    if constexpr (std::is_same_v<Leaf, array<T>>) {
      if (b != target.storage().get()) return;
      if (!acc)
        acc = array<T>(ct);
      else
        *acc = *acc + ct;
    }
  }

  template <class T>
  static array<T> finish(std::optional<array<T>>& acc, array<T> const& target) {
    if (acc) return std::move(*acc);
    return zeros<T>(target.shape());  // the result does not depend on this argument
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

// grad(f[, argnums<i...>])(args...): the gradients alone.
template <class F, std::size_t... I>
auto grad(F f, argnums_t<I...> n) {
  return [vg = value_and_grad(std::move(f), n)](auto const&... args) { return vg(args...).second; };
}
template <class F>
auto grad(F f) {
  return grad(std::move(f), argnums<0>);
}

}  // namespace zenith
