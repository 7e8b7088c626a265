#pragma once
// Forward mode for functions of arrays: jvp.
//
//   auto [y, ty] = zn::jvp(f, std::make_tuple(x), std::make_tuple(t));   // ty = J(x) t
//
// Each primal (an array or a tree of arrays) reaches f as a traced alias of itself, as under grad,
// with its tangent registered for it. The tangent of f's result is built down its expression type
// (autodiff/forward.hpp) and evaluated in one fused pass; the intermediates f materializes are
// recorded as IR (autodiff/ir_tape.hpp), whose tangent equations run once f has returned.
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/forward.hpp"
#include "../autodiff/ir_tape_run.hpp"
#include "../autodiff/rules.hpp"
#include "../autodiff/tape.hpp"
#include "../core/any_array.hpp"
#include "../core/apply.hpp"
#include "../core/trace.hpp"
#include "../core/tree.hpp"
#include "grad.hpp"

namespace zenith {

namespace detail {

// Registers the tangents of one primal tree (traced) from the matching tangent tree.
template <class Tree>
void register_tangents(Tree const& traced, Tree const& tangent, autodiff::tangents& ts) {
  std::vector<any_array> given;
  for_each_leaf(tangent, [&](auto const& a) { given.emplace_back(a); });
  std::size_t k = 0;
  for_each_leaf(traced, [&](auto const& a) {
    using A = std::remove_cvref_t<decltype(a)>;
    if (k >= given.size())
      throw value_error("jvp: the tangents do not have the primals' structure");
    A const t = given[k++].template as<value_t<A>>();
    if (t.shape() != a.shape())
      throw shape_error("jvp: tangent of shape " + t.shape().str() + " for a primal of shape " +
                        a.shape().str());
    ts.set(a.storage(), t);
  });
  if (k != given.size()) throw value_error("jvp: the tangents do not have the primals' structure");
}

}  // namespace detail

// jvp(f, primals, tangents): {f(primals...) evaluated, its tangent J t evaluated}. primals and
// tangents are std::tuples with one tangent per primal, of the primal's type and shapes.
template <class F, class... P, class... Q>
auto jvp(F f, std::tuple<P...> const& primals, std::tuple<Q...> const& tangents) {
  static_assert(sizeof...(P) == sizeof...(Q), "zenith::jvp: give one tangent per primal");
  static_assert((differentiable_tree<P> && ...),
                "zenith::jvp: primals must be arrays of a floating type, or trees of them");
  static_assert((std::is_same_v<std::remove_cvref_t<P>, std::remove_cvref_t<Q>> && ...),
                "zenith::jvp: each tangent must have its primal's type");
  autodiff::tangents ts;
  detail::trace_state st = detail::nested_trace("jvp");
  st.forward = &ts;
  auto traced = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::make_tuple(detail::traced_tree(std::get<K>(primals), st, "jvp")...);
  }
  (std::index_sequence_for<P...>{});
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (detail::register_tangents(std::get<K>(traced), std::get<K>(tangents), ts), ...);
  }
  (std::index_sequence_for<P...>{});

  auto out = [&] {
    detail::trace_scope scope(&st);
    return zenith::detail::apply(f, traced);
  }();
  using Out = decltype(out);
  static_assert(expression<Out>, "zenith::jvp: the function must return an array expression");
  static_assert(floating_element<value_t<Out>>,
                "zenith::jvp: the function must return a floating-point value");
  using T = value_t<Out>;
  detail::compute_tangents(st, ts);  // of what f materialized
  auto const& forward = autodiff::memoize(out);
  array<T> value = autodiff::memoized_value(forward);
  array<T> tangent = detail::evaluate_for_rules<T, 1>(autodiff::tangent_of(forward, ts));
  return std::pair{value, tangent};
}

}  // namespace zenith
