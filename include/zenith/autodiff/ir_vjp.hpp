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
// - broadcasts sum, reshapes and transposes go back, slices pad, reductions broadcast,
//   dot_general multiplies by the other operand, softmax and log_softmax use their output.
//
// The backward equations read forward values by id: run on the graph (backend/cpu/interpret.hpp)
// they are computed once, elementwise ones fused with the backward ones around them.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/any_array.hpp"
#include "../expr/to_ir.hpp"
#include "ir_ops.hpp"

namespace zenith::ir {

namespace detail {

// Appends equations to g. (A template only so that a program that never differentiates IR
// compiles none of it.)
template <class = void>
class vjp_builder_t {
 public:
  explicit vjp_builder_t(graph& g) : g_(g) {}
  graph& g() { return g_; }

  value_id eq(std::string_view op, std::vector<value_id> in, zenith::shape s, attributes a = {}) {
    zenith::dtype d = g_.at(in.at(0)).dtype;
    return g_.add_equation(op, std::move(in), d, s, std::move(a));
  }
  value_id binary(std::string_view op, value_id a, value_id b) {
    return eq(op, {a, b}, g_.at(a).shape.size() ? g_.at(a).shape : g_.at(b).shape);
  }
  value_id scalar(value_id like, double x) { return g_.add_literal(g_.at(like).dtype, x); }
  value_id reshape(value_id v, zenith::shape s) { return detail::reshape(g_, v, s); }
  // v summed over the axes in `axes` (a bit mask), keeping them as size 1 when keep is true.
  value_id sum(value_id v, std::uint32_t axes, bool keep) {
    zenith::shape in = g_.at(v).shape, dropped;
    for (std::size_t k = 0; k < in.size(); ++k)
      if (!(axes >> k & 1)) dropped.push_back(in[k]);
    if (axes == 0) return v;
    value_id r = eq("reduce_sum", {v}, dropped,
                    {{"axes", mask_list(axes, in.size())}, {"out_sharding", std::string("None")}});
    if (!keep) return r;
    zenith::shape kept = in;
    for (std::size_t k = 0; k < in.size(); ++k)
      if (axes >> k & 1) kept[k] = 1;
    return reshape(r, kept);
  }
  // v (of shape `from`, trailing axes aligned) broadcast to s.
  value_id broadcast(value_id v, zenith::shape s) { return detail::broadcast(g_, v, s); }
  // The cotangent of a value of shape `to` broadcast to ct's shape (numpy's rules): ct summed
  // back to `to`.
  value_id unbroadcast(value_id ct, zenith::shape to) {  // by value: appending moves the values
    zenith::shape s = g_.at(ct).shape;
    if (s == to) return ct;
    std::size_t off = s.size() - to.size();
    std::uint32_t axes = 0;
    for (std::size_t k = 0; k < s.size(); ++k)
      if (k < off || (to[k - off] == 1 && s[k] != 1)) axes |= 1u << k;
    return reshape(sum(ct, axes, false), to);
  }

 private:
  graph& g_;
};
using vjp_builder = vjp_builder_t<>;

// x times partial p.
inline value_id times(vjp_builder& b, value_id x, partial const& p) {
  if (p.value) return b.binary("mul", x, *p.value);
  if (p.number == 1) return x;
  if (p.number == -1) return b.eq("neg", {x}, b.g().at(x).shape);
  return b.binary("mul", x, b.scalar(x, p.number));
}

inline bool floating_dtype(zenith::dtype d) {
  return d == zenith::dtype::float32 || d == zenith::dtype::float64 ||
         d == zenith::dtype::bfloat16 || d == zenith::dtype::float16;
}

inline std::vector<std::int64_t> ints(equation const& e, std::string_view name) {
  return e.attrs.get<std::vector<std::int64_t>>(name);
}

inline std::uint32_t mask_of(std::vector<std::int64_t> const& axes) {
  std::uint32_t m = 0;
  for (std::int64_t k : axes) m |= 1u << k;
  return m;
}

// ct of a reduction's output (its axes dropped) broadcast back to the input's shape.
template <class = void>
value_id unreduce(vjp_builder& b, value_id ct, zenith::shape in, std::uint32_t axes) {
  zenith::shape kept = in;
  for (std::size_t k = 0; k < in.size(); ++k)
    if (axes >> k & 1) kept[k] = 1;
  return b.broadcast(b.reshape(ct, kept), in);
}

// The transpose of the last two axes of a value of rank r.
template <class = void>
value_id transpose_last(vjp_builder& b, value_id v) {
  zenith::shape s = b.g().at(v).shape;
  std::vector<std::int64_t> perm(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) perm[k] = std::int64_t(k);
  std::swap(perm[s.size() - 1], perm[s.size() - 2]);
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return b.eq("transpose", {v}, s, {{"permutation", perm}});
}

// numpy's matmul of a and b (the dot_general form expr/to_ir.hpp records).
template <class = void>
value_id matmul(vjp_builder& b, value_id x, value_id y) {
  graph& g = b.g();
  zenith::dtype d = g.at(x).dtype;
  return detail::matmul(g, x, y, zenith::detail::matmul_geometry(g.at(x).shape, g.at(y).shape), d);
}

// The cotangents of a dot_general in numpy matmul form: a (..., m, k) or (k), b (..., k, n) or
// (k), batch axes equal (the recording broadcast them).
template <class = void>
std::vector<std::optional<value_id>> matmul_vjp(vjp_builder& b, value_id a, value_id bb,
                                                value_id ct) {
  zenith::shape sa = b.g().at(a).shape, sb = b.g().at(bb).shape;
  auto as_matrix = [&](value_id v, bool column) {  // a vector as (k, 1) or (1, k)
    zenith::shape s = b.g().at(v).shape;
    return b.reshape(v, column ? zenith::shape{s[0], 1} : zenith::shape{1, s[0]});
  };
  // Make both operands at least matrices, and ct of the matching (..., m, n) shape.
  value_id A = sa.size() == 1 ? as_matrix(a, false) : a;
  value_id B = sb.size() == 1 ? as_matrix(bb, true) : bb;
  zenith::shape ca = b.g().at(A).shape, cb = b.g().at(B).shape, cs;
  std::size_t batch = std::max(ca.size(), cb.size()) - 2;
  for (std::size_t k = 0; k < batch; ++k) cs.push_back((ca.size() > cb.size() ? ca : cb)[k]);
  cs.push_back(ca[ca.size() - 2]);
  cs.push_back(cb[cb.size() - 1]);
  value_id C = b.reshape(ct, cs);
  // dA = C B^T (summed over a batch A does not have), dB = A^T C (likewise).
  value_id da = matmul(b, C, transpose_last(b, B));
  value_id db = matmul(b, transpose_last(b, A), C);
  if (cb.size() > ca.size()) {  // A broadcast along B's batch: sum it
    da = b.reshape(b.sum(da, (1u << (cb.size() - ca.size())) - 1, false), ca);
  }
  if (ca.size() > cb.size()) {
    zenith::shape s = b.g().at(db).shape;
    std::size_t extra = s.size() - cb.size();
    db = b.reshape(b.sum(db, (1u << extra) - 1, false), cb);
  }
  return {b.reshape(da, sa), b.reshape(db, sb)};
}

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

// layer_norm's Jacobian applied to v (its transpose is itself, so both modes use it): with y the
// output and r = 1 / sqrt(var(x) + eps) along the axis, r * (v - mean(v) - y * mean(v * y)).
template <class = void>
value_id layer_norm_linear(vjp_builder& b, equation const& e, value_id v) {
  graph& g = b.g();
  value_id x = e.inputs[0];
  zenith::shape s = g.at(x).shape;
  std::size_t k = std::size_t(e.attrs.get<std::int64_t>("axis"));
  std::uint32_t axis = 1u << k;
  double inv_n = 1.0 / double(s[k]);
  auto mean = [&](value_id u) {
    return b.broadcast(b.binary("mul", b.sum(u, axis, true), b.scalar(u, inv_n)), s);
  };
  value_id xc = b.binary("sub", x, mean(x));
  value_id var =
      b.binary("add", mean(b.binary("mul", xc, xc)), b.scalar(x, e.attrs.get<double>("epsilon")));
  value_id r = b.eq("rsqrt", {var}, s);
  value_id inner = b.binary("sub", b.binary("sub", v, mean(v)),
                            b.binary("mul", e.output, mean(b.binary("mul", v, e.output))));
  return b.binary("mul", r, inner);
}

// conv2d's attributes, for the equations of its derivatives.
inline attributes conv2d_attrs(equation const& e) {
  attributes a;
  for (auto const& at : e.attrs) a.set(at.name, at.value);
  return a;
}

// The cotangents of equation e's operands, given its output's cotangent ct: one entry per
// operand of e (nullopt where none flows).
template <class = void>
std::vector<std::optional<value_id>> equation_vjp(vjp_builder& b, equation const& e, value_id ct) {
  graph& g = b.g();
  std::vector<std::optional<value_id>> out(e.inputs.size());
  std::string_view op = e.op;
  value const y = g.at(e.output);
  zenith::shape in0 = g.at(e.inputs[0]).shape;
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
      std::int64_t step = st && std::holds_alternative<std::vector<std::int64_t>>(*st)
                              ? std::get<std::vector<std::int64_t>>(*st)[k]
                              : 1;
      std::int64_t n = std::int64_t(y.shape[k]);
      interior[k] = n > 0 ? step - 1 : 0;
      std::int64_t used = n > 0 ? start[k] + (n - 1) * step + 1 : start[k];
      high[k] = std::int64_t(in0[k]) - used;
    }
    out[0] = b.eq("pad", {ct, b.scalar(ct, 0)}, in0,
                  {{"padding_low", low}, {"padding_high", high}, {"padding_interior", interior}});
  } else if (op == "concatenate") {
    std::size_t axis = std::size_t(e.attrs.get<std::int64_t>("dimension"));
    std::int64_t at = 0;
    for (std::size_t p = 0; p < e.inputs.size(); ++p) {
      zenith::shape s = g.at(e.inputs[p]).shape;
      std::vector<std::int64_t> st(s.size(), 0), lim = shape_list(y.shape);
      st[axis] = at;
      lim[axis] = at + std::int64_t(s[axis]);
      at = lim[axis];
      out[p] =
          b.eq("slice", {ct}, s,
               {{"start_indices", st}, {"limit_indices", lim}, {"strides", std::string("None")}});
    }
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
  } else if (op == "dot_general") {
    auto r = matmul_vjp(b, e.inputs[0], e.inputs[1], ct);
    out[0] = r[0];
    out[1] = r[1];
  } else if (op == "softmax" || op == "log_softmax") {
    std::uint32_t axis = 1u << e.attrs.get<std::int64_t>("axis");
    if (op == "softmax") {  // y * (ct - sum(ct * y))
      value_id s = b.broadcast(b.sum(b.binary("mul", ct, e.output), axis, true), y.shape);
      out[0] = b.binary("mul", e.output, b.binary("sub", ct, s));
    } else {  // ct - exp(y) * sum(ct)
      value_id s = b.broadcast(b.sum(ct, axis, true), y.shape);
      out[0] = b.binary("sub", ct, b.binary("mul", b.eq("exp", {e.output}, y.shape), s));
    }
  } else if (op == "layer_norm") {
    out[0] = layer_norm_linear(b, e, ct);
  } else if (op.starts_with("conv2d")) {
    // The three parts of a convolution are each other's transposes (autodiff/backward.hpp):
    //   conv2d             y = conv(x, w):  dx = input_grad(g, w),  dw = filter_grad(x, g)
    //   conv2d_input_grad  y = T_x(h, w):   dh = conv2d(g, w),      dw = filter_grad(g, h)
    //   conv2d_filter_grad y = T_w(x, h):   dx = input_grad(h, g),  dh = conv2d(x, g)
    value_id a = e.inputs[0], w = e.inputs[1];
    zenith::shape sa = in0, sw = g.at(w).shape;
    auto part = [&](std::string_view p, value_id l, value_id r, zenith::shape s) {
      return g.add_equation(p, {l, r}, y.dtype, s, conv2d_attrs(e));
    };
    if (op == "conv2d") {
      out[0] = part("conv2d_input_grad", ct, w, sa);
      out[1] = part("conv2d_filter_grad", a, ct, sw);
    } else if (op == "conv2d_input_grad") {
      out[0] = part("conv2d", ct, w, sa);
      out[1] = part("conv2d_filter_grad", ct, a, sw);
    } else {
      out[0] = part("conv2d_input_grad", w, ct, sa);
      out[1] = part("conv2d", a, ct, sw);
    }
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

}  // namespace zenith::ir
