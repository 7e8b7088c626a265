#pragma once
// Reverse mode on the IR: the backward equations of a graph, appended to it.
//
//   std::vector<std::optional<ir::value_id>> cts = ir::append_vjp(g, {out}, {ct}, g.inputs());
//
// walks g's equations newest first and, for each one whose output has a cotangent, appends the
// equations of its operands' cotangents (summed where a value is read more than once). The
// rules are data-producing functions of the equation, one per op:
//
// - elementwise ops take their derivative from the op tag's own partial<I> (expr/ops.hpp), the
//   rule every other layer uses, called on symbolic operands that append its equations
//   (ir_partial.hpp);
// - broadcasts sum, reshapes and transposes go back, slices pad, reductions broadcast;
// - the barrier ops (dot_general, conv2d, softmax and log_softmax, layer_norm, concatenate)
//   have a rule struct each in autodiff/rules/, found by the equation's op name.
//
// The backward equations read forward values by id: run on the graph (backend/cpu/interpret.hpp)
// they are computed once, elementwise ones fused with the backward ones around them.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/any_array.hpp"
#include "../core/runtime_instance.hpp"
#include "../expr/to_ir.hpp"
#include "ir_builder.hpp"
#include "ir_ops.hpp"
#include "rules.hpp"

namespace zenith::ir {

namespace detail {

// d prod / d x_i over a reduce_prod's groups: the product of the others, exactly where a group
// holds zeros (y / x_i where it holds none; the product of the rest at its only zero; 0 where
// it holds two or more), so the rule is exact and never divides by zero.
template <class = void>
value_id prod_partial(vjp_builder& b, equation const& e) {
  graph& g = b.g();
  value_id x = e.inputs[0];
  zenith::shape in = g.at(x).shape;
  zenith::dtype d = g.at(x).dtype;
  std::uint32_t axes = mask_of(ints(e, "axes"));
  auto where = [&](value_id c, value_id yes, value_id no) {
    return g.add_equation("select_n", {c, b.broadcast(no, in), b.broadcast(yes, in)}, d, in);
  };
  auto is = [&](value_id v, double k) {
    return g.add_equation("eq", {v, g.add_literal(d, k)}, zenith::dtype::bool_, in);
  };
  value_id zero = is(x, 0);
  value_id zeros = unreduce(b, b.sum(convert(g, zero, d), axes, false), in, axes);
  value_id safe = where(zero, g.add_literal(d, 1), x);
  zenith::shape reduced = g.at(e.output).shape;
  value_id rest = unreduce(b, b.eq("reduce_prod", {safe}, reduced, e.attrs), in, axes);
  value_id none = b.binary("div", rest, safe);
  value_id at_zero = where(zero, rest, g.add_literal(d, 0));
  return where(is(zeros, 0), none, where(is(zeros, 1), at_zero, g.add_literal(d, 0)));
}
ZENITH_RUNTIME_INSTANCE(value_id prod_partial<>(vjp_builder& b, equation const& e))

// The cotangents of equation e's operands, given its output's cotangent ct: one entry per
// operand of e (nullopt where none flows).
template <class = void>
std::vector<std::optional<value_id>> equation_vjp(vjp_builder& b, equation const& e, value_id ct) {
  graph& g = b.g();
  std::vector<std::optional<value_id>> out(e.inputs.size());
  std::string_view op = e.op;
  value const y = g.at(e.output);
  zenith::shape in0 = g.at(e.inputs[0]).shape;
  if (with_barrier_rule(op, [&](auto rule) { rule.vjp(b, e, ct, out); })) return out;
  if (op == "convert_element_type") {
    out[0] = convert(g, ct, g.at(e.inputs[0]).dtype);
  } else if (op == "broadcast_in_dim") {
    auto dims = ints(e, "broadcast_dimensions");
    std::uint32_t axes = 0;
    for (std::size_t k = 0, j = 0; k < y.shape.size(); ++k) {
      bool kept = j < dims.size() && dims[j] == std::int64_t(k);
      if (!kept || (in0[j] == 1 && y.shape[k] != 1)) axes |= 1u << k;
      if (kept) ++j;
    }
    out[0] = b.reshape(b.sum(ct, axes, false), in0);
  } else if (op == "reshape" || op == "squeeze") {
    out[0] = b.reshape(ct, in0);
  } else if (op == "transpose") {
    auto perm = ints(e, "permutation");
    std::vector<std::int64_t> inv(perm.size());
    for (std::size_t k = 0; k < perm.size(); ++k) inv[std::size_t(perm[k])] = std::int64_t(k);
    out[0] = b.eq("transpose", {ct}, in0, {{"permutation", inv}});
  } else if (op == "rev") {
    out[0] = b.eq("rev", {ct}, in0, {{"dimensions", ints(e, "dimensions")}});
  } else if (op == "slice") {
    // Zeros of the operand's shape with ct at the sliced positions: pad.
    auto start = ints(e, "start_indices");
    std::vector<std::int64_t> low(start), high(in0.size()), interior(in0.size(), 0);
    auto const* st = e.attrs.find("strides");
    for (std::size_t k = 0; k < in0.size(); ++k) {
      std::int64_t step = st && st->holds<std::vector<std::int64_t>>()
                              ? st->get<std::vector<std::int64_t>>()[k]
                              : 1;
      std::int64_t n = std::int64_t(y.shape[k]);
      interior[k] = n > 0 ? step - 1 : 0;
      std::int64_t used = n > 0 ? start[k] + (n - 1) * step + 1 : start[k];
      high[k] = std::int64_t(in0[k]) - used;
    }
    out[0] = b.eq("pad", {ct, b.scalar(ct, 0)}, in0,
                  {{"padding_low", low}, {"padding_high", high}, {"padding_interior", interior}});
  } else if (op == "pad") {
    // The operand's positions of ct: a slice. The padding value is a constant (as under jvp).
    auto low = ints(e, "padding_low"), interior = ints(e, "padding_interior");
    std::vector<std::int64_t> limit(in0.size()), strides(in0.size());
    for (std::size_t k = 0; k < in0.size(); ++k) {
      if (low[k] < 0 || interior[k] < 0)
        throw value_error("ir: the reverse rule of pad takes no negative padding");
      strides[k] = interior[k] + 1;
      limit[k] = in0[k] > 0 ? low[k] + (std::int64_t(in0[k]) - 1) * strides[k] + 1 : low[k];
    }
    out[0] = b.eq("slice", {ct}, in0,
                  {{"start_indices", low}, {"limit_indices", limit}, {"strides", strides}});
  } else if (op == "reduce_sum" || op == "reduce_mean") {
    std::uint32_t axes = mask_of(ints(e, "axes"));
    value_id c = unreduce(b, ct, in0, axes);
    if (op == "reduce_mean")
      c = b.binary("div", c, b.scalar(c, double(zenith::detail::reduced_count(in0, axes))));
    out[0] = c;
  } else if (op == "reduce_max" || op == "reduce_min") {
    // Ties share the cotangent evenly.
    std::uint32_t axes = mask_of(ints(e, "axes"));
    value_id at = g.add_equation("eq", {e.inputs[0], unreduce(b, e.output, in0, axes)},
                                 zenith::dtype::bool_, in0);
    value_id hit = convert(g, at, y.dtype);
    value_id count = unreduce(b, b.sum(hit, axes, false), in0, axes);
    out[0] = b.binary("mul", b.binary("div", unreduce(b, ct, in0, axes), count), hit);
  } else if (op == "reduce_prod") {
    std::uint32_t axes = mask_of(ints(e, "axes"));
    out[0] = b.binary("mul", unreduce(b, ct, in0, axes), prod_partial(b, e));
  } else if (op == "reduce_logsumexp") {
    std::uint32_t axes = mask_of(ints(e, "axes"));
    value_id p = b.eq("exp", {b.binary("sub", e.inputs[0], unreduce(b, e.output, in0, axes))}, in0);
    out[0] = b.binary("mul", unreduce(b, ct, in0, axes), p);
  } else if (op == "argmax" || op == "argmin") {
    // Integer results: no cotangent.
  } else {
    auto partials = elementwise_partials(g, e, std::vector<char>(e.inputs.size(), 1), "reverse");
    for (std::size_t m = 0; m < partials.size(); ++m)
      if (partials[m]) {
        value_id c = times(b, ct, *partials[m]);  // first: appending moves the values
        out[m] = b.unbroadcast(c, g.at(e.inputs[m]).shape);
      }
  }
  return out;
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::optional<value_id>> equation_vjp<>(vjp_builder& b,
                                                                            equation const& e,
                                                                            value_id ct))

}  // namespace detail

namespace detail {

// append_vjp (below) with the rules of the ops the program registered (autodiff/ir_ops.hpp):
// what a tape's backward pass runs.
template <class = void>
std::vector<std::optional<value_id>> append_vjp_registered(graph& g,
                                                           std::vector<value_id> const& outputs,
                                                           std::vector<value_id> const& cts,
                                                           std::vector<value_id> const& wrt,
                                                           std::size_t first = 0) {
  register_rule_ops();
  detail::vjp_builder b(g);
  std::vector<std::optional<value_id>> ct(g.values().size());
  auto add = [&](value_id v, value_id c) {
    if (v >= ct.size()) ct.resize(v + 1);
    ct[v] = ct[v] ? b.binary("add", *ct[v], c) : c;
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) add(outputs[i], cts.at(i));
  std::size_t n = g.equations().size();
  for (std::size_t i = n; i-- > first;) {
    equation const e = g.equations()[i];  // a copy: appending may move the list
    if (e.output >= ct.size() || !ct[e.output]) continue;
    if (!detail::floating_dtype(g.at(e.output).dtype)) continue;
    auto in = detail::equation_vjp(b, e, *ct[e.output]);
    for (std::size_t k = 0; k < in.size(); ++k)
      if (in[k] && detail::floating_dtype(g.at(e.inputs[k]).dtype)) add(e.inputs[k], *in[k]);
  }
  std::vector<std::optional<value_id>> out;
  for (value_id v : wrt) out.push_back(v < ct.size() ? ct[v] : std::nullopt);
  return out;
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::optional<value_id>> append_vjp_registered<>(
    graph& g, std::vector<value_id> const& outputs, std::vector<value_id> const& cts,
    std::vector<value_id> const& wrt, std::size_t first))

}  // namespace detail

// Appends to g the cotangents of the values `wrt`, given cotangents `cts` (values of g, of the
// outputs' shapes) of the values `outputs`; returns one per wrt (nullopt where no cotangent
// reaches it: the derivative is zero). Equations before `first` are not differentiated (their
// results take cotangents as any value read does). An op with no rule is a value_error naming
// it. For any graph, built by hand too: every op's rules are compiled in (register_all).
template <class = void>
std::vector<std::optional<value_id>> append_vjp(graph& g, std::vector<value_id> const& outputs,
                                                std::vector<value_id> const& cts,
                                                std::vector<value_id> const& wrt,
                                                std::size_t first = 0) {
  register_all();
  return detail::append_vjp_registered(g, outputs, cts, wrt, first);
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::optional<value_id>> append_vjp<>(
    graph& g, std::vector<value_id> const& outputs, std::vector<value_id> const& cts,
    std::vector<value_id> const& wrt, std::size_t first))

}  // namespace zenith::ir
