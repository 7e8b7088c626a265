#pragma once
// Forward mode on the IR: the tangent equations of a graph, appended to it.
//
//   std::vector<std::optional<ir::value_id>> ts = ir::append_jvp(g, g.inputs(), {t}, g.outputs());
//
// walks g's equations in order and, for each one with an operand that has a tangent, appends
// the equations of its output's tangent. The rules are autodiff/ir_vjp.hpp's, read the other
// way: an elementwise op's tangent is the sum of t_I * partial<I> over its operands, from the
// op tag (expr/ops.hpp); linear ops (broadcasts, views, reductions by sum) apply themselves to
// the tangent; the barrier ops' rules are their rule structs' (autodiff/rules/).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/runtime_instance.hpp"
#include "ir_vjp.hpp"

namespace zenith::ir {

namespace detail {

// The tangent of equation e's output from its operands' tangents ts (nullopt: zero); nullopt
// when no tangent flows.
template <class = void>
std::optional<value_id> equation_jvp(vjp_builder& b, equation const& e,
                                     std::vector<std::optional<value_id>> const& ts) {
  graph& g = b.g();
  std::string_view op = e.op;
  value const y = g.at(e.output);
  zenith::shape in0 = g.at(e.inputs[0]).shape;
  std::optional<value_id> barrier;
  if (with_barrier_rule(op, [&](auto rule) { barrier = rule.jvp(b, e, ts); })) return barrier;
  if (op == "convert_element_type") {
    return convert(g, *ts[0], y.dtype);
  } else if (op == "broadcast_in_dim" || op == "reshape" || op == "squeeze" || op == "transpose" ||
             op == "rev" || op == "slice" || op == "reduce_sum" || op == "reduce_mean") {
    return again(b, e, {*ts[0]});
  } else if (op == "pad") {
    return again(b, e, {*ts[0], g.add_literal(y.dtype, 0)});
  } else if (op == "reduce_max" || op == "reduce_min") {
    // The tangent at the extreme elements, ties averaged (the rule reverse mode uses).
    std::uint32_t axes = mask_of(ints(e, "axes"));
    value_id at = g.add_equation("eq", {e.inputs[0], unreduce(b, e.output, in0, axes)},
                                 zenith::dtype::bool_, in0);
    value_id hit = convert(g, at, y.dtype);
    value_id num = b.sum(b.binary("mul", *ts[0], hit), axes, false);
    return b.binary("div", num, b.sum(hit, axes, false));
  } else if (op == "reduce_logsumexp") {
    std::uint32_t axes = mask_of(ints(e, "axes"));
    value_id p = b.eq("exp", {b.binary("sub", e.inputs[0], unreduce(b, e.output, in0, axes))}, in0);
    return b.sum(b.binary("mul", *ts[0], p), axes, false);
  } else if (op == "reduce_prod") {
    value_id p = b.binary("mul", *ts[0], prod_partial(b, e));
    return b.sum(p, mask_of(ints(e, "axes")), false);
  } else if (op == "argmax" || op == "argmin") {
    return std::nullopt;
  }
  // sum over operands of t_m * partial_m.
  std::vector<char> want(ts.size());
  for (std::size_t m = 0; m < ts.size(); ++m) want[m] = ts[m].has_value();
  auto partials = elementwise_partials(b.g(), e, want, "forward");
  std::optional<value_id> sum;
  for (std::size_t m = 0; m < partials.size(); ++m) {
    if (!partials[m]) continue;
    value_id c = times(b, b.broadcast(*ts[m], y.shape), *partials[m]);
    sum = sum ? b.binary("add", *sum, c) : c;
  }
  return sum;
}
ZENITH_RUNTIME_INSTANCE(std::optional<value_id> equation_jvp<>(
    vjp_builder& b, equation const& e, std::vector<std::optional<value_id>> const& ts))

}  // namespace detail

namespace detail {

// append_jvp (below) with the rules of the ops the program registered (autodiff/ir_ops.hpp):
// what a traced jvp runs.
template <class = void>
std::vector<std::optional<value_id>> append_jvp_registered(graph& g,
                                                           std::vector<value_id> const& primals,
                                                           std::vector<value_id> const& tangents,
                                                           std::vector<value_id> const& outputs) {
  register_rule_ops();
  detail::vjp_builder b(g);
  std::vector<std::optional<value_id>> t(g.values().size());
  for (std::size_t i = 0; i < primals.size(); ++i) t[primals[i]] = tangents.at(i);
  std::size_t n = g.equations().size();
  for (std::size_t i = 0; i < n; ++i) {
    equation const e = g.equations()[i];  // a copy: appending may move the list
    if (!detail::floating_dtype(g.at(e.output).dtype)) continue;
    std::vector<std::optional<value_id>> ts;
    bool any = false;
    for (value_id v : e.inputs) {
      bool has = v < t.size() && t[v] && detail::floating_dtype(g.at(v).dtype);
      ts.push_back(has ? t[v] : std::nullopt);
      any = any || has;
    }
    if (!any) continue;
    std::optional<value_id> r = detail::equation_jvp(b, e, ts);
    if (t.size() < g.values().size()) t.resize(g.values().size());
    t[e.output] = r;
  }
  std::vector<std::optional<value_id>> out;
  for (value_id v : outputs) out.push_back(v < t.size() ? t[v] : std::nullopt);
  return out;
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::optional<value_id>> append_jvp_registered<>(
    graph& g, std::vector<value_id> const& primals, std::vector<value_id> const& tangents,
    std::vector<value_id> const& outputs))

}  // namespace detail

// Appends to g the tangents of the values `outputs`, given tangents `tangents` (values of g, of
// the primals' shapes) of the values `primals`; returns one per output (nullopt where none
// reaches it: the derivative is zero). An op with no rule is a value_error naming it. For any
// graph, built by hand too: every op's rules are compiled in (register_all).
template <class = void>
std::vector<std::optional<value_id>> append_jvp(graph& g, std::vector<value_id> const& primals,
                                                std::vector<value_id> const& tangents,
                                                std::vector<value_id> const& outputs) {
  register_all();
  return detail::append_jvp_registered(g, primals, tangents, outputs);
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::optional<value_id>> append_jvp<>(
    graph& g, std::vector<value_id> const& primals, std::vector<value_id> const& tangents,
    std::vector<value_id> const& outputs))

}  // namespace zenith::ir
