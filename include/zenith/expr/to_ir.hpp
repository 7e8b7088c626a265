#pragma once
// An expression's IR: its node tree appended to an ir::graph as equations (ir/graph.hpp).
//
//   ir::graph g;
//   ir::recorder r(g);
//   r.bind(x, g.add_input(...));          // arrays that are the graph's inputs
//   ir::value_id y = ir::emit(r, zn::tanh(zn::matmul(x, w)) * 2.f);
//
// Each node kind emits the equations of its op, with its attributes, as JAX spells them where
// JAX has the op: implicit broadcasting becomes an explicit broadcast_in_dim, a conversion
// convert_element_type, numpy's matmul a dot_general (operands broadcast to one batch shape),
// keepdims a reshape after the reduction. Arrays the recorder does not know become constants
// (kept alive by the graph); C++ numbers become literals.
//
// This is a walk over the expression's type that builds data: it instantiates no loops, so
// recording an expression costs little code next to evaluating it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/array.hpp"
#include "../core/runtime_instance.hpp"
#include "../core/small_map.hpp"
#include "../ir/graph.hpp"
#include "concat.hpp"
#include "conv.hpp"
#include "layer_norm.hpp"
#include "matmul.hpp"
#include "node.hpp"
#include "reduce.hpp"
#include "reshape.hpp"
#include "softmax.hpp"
#include "views.hpp"

namespace zenith::ir {

class recorder;

// The graph-building half of emit (below), which the recorder reaches through these pointers.
// Every program that materializes an expression must be able to record it (a trace may be
// active), so each expression type compiles its walk; the functions that build the equations
// are the same for every expression, and are filled in where a recorder is made: by a transform
// starting (autodiff/ir_tape_run.hpp). A program that never starts one compiles none of them.
struct emit_functions {
  // a's value: the value its buffer is bound to, or a new constant.
  value_id (*leaf)(recorder& r, zenith::dtype d, zenith::shape const& s,
                   std::shared_ptr<buffer> const& data, void const* ptr);
  value_id (*literal)(graph& g, zenith::dtype d, double x);
  value_id (*map)(graph& g, std::string_view name, zenith::dtype d, zenith::shape const& s,
                  value_id const* in, std::size_t n, std::uint8_t const* order);
  value_id (*convert)(graph& g, value_id v, zenith::dtype d);
  value_id (*broadcast)(graph& g, value_id v, zenith::shape const& s);
  value_id (*insert_axes)(graph& g, value_id v, zenith::shape const& s, std::uint32_t inserted);
  value_id (*reshape)(graph& g, value_id v, zenith::shape const& s);
  value_id (*transpose)(graph& g, value_id v, views::transpose const& t, zenith::dtype d,
                        zenith::shape const& s, zenith::shape const& from);
  value_id (*squeeze)(graph& g, value_id v, views::squeeze const& q, zenith::dtype d,
                      zenith::shape const& s, zenith::shape const& from);
  value_id (*slice)(graph& g, value_id v, views::slice const& sl, zenith::dtype d,
                    zenith::shape const& s, zenith::shape const& from);
  value_id (*reduce)(graph& g, value_id in, std::string_view name, zenith::dtype d,
                     std::uint32_t axes, bool indexed, bool keepdims, zenith::shape const& from,
                     zenith::shape const& s);
  value_id (*matmul)(graph& g, value_id a, value_id b, zenith::detail::matmul_dims const& dims,
                     zenith::dtype d);
  // softmax and log_softmax: op(x) along axis.
  value_id (*along_axis)(graph& g, std::string_view op, value_id x, zenith::dtype d,
                         zenith::shape const& s, std::size_t axis);
  value_id (*layer_norm)(graph& g, value_id x, zenith::dtype d, zenith::shape const& s,
                         std::size_t axis, double eps);
  value_id (*concat)(graph& g, std::vector<value_id>& parts, zenith::dtype d,
                     zenith::shape const& s, std::size_t axis, bool new_axis);
  value_id (*conv2d)(graph& g, std::string_view op, value_id a, value_id b, zenith::dtype d,
                     zenith::shape const& s, conv2d_geometry const& geo);
  // Any op with any attributes (graph::add_equation), for a node whose form has no entry above.
  value_id (*equation)(graph& g, std::string_view op, std::vector<value_id> in, zenith::dtype d,
                       zenith::shape s, attributes attrs);
};

// Appends expressions to a graph, knowing which arrays are already values of it.
class recorder {
 public:
  recorder(graph& g, emit_functions const& f) : g_(&g), f_(&f) {}
  graph& target() { return *g_; }
  emit_functions const& functions() const { return *f_; }

  // From now on, an expression reading b's array reads value v.
  void bind(buffer const* b, value_id v) { ids_[b] = v; }
  void unbind(buffer const* b) { ids_.erase(b); }
  value_id const* find(buffer const* b) const { return ids_.find(b); }

  template <element T>
  value_id leaf(array<T> const& a) {
    return f_->leaf(*this, dtype_of<T>(), a.shape(), a.storage(), a.data());
  }

  // emit_functions::leaf.
  template <class = void>
  static value_id add_leaf(recorder& r, zenith::dtype d, zenith::shape const& s,
                           std::shared_ptr<buffer> const& data, void const* ptr) {
    buffer const* b = data.get();
    if (value_id const* v = r.ids_.find(b)) return *v;
    value_id v = r.g_->add_constant(d, s, data, ptr);
    r.ids_[b] = v;
    return v;
  }

 private:
  graph* g_;
  emit_functions const* f_;
  zenith::detail::small_map<buffer const*, value_id> ids_;
};
ZENITH_RUNTIME_INSTANCE(value_id recorder::add_leaf<>(recorder& r, zenith::dtype d,
                                                      zenith::shape const& s,
                                                      std::shared_ptr<buffer> const& data,
                                                      void const* ptr))

namespace detail {

// Which node kind an expression type is.
template <class E>
inline constexpr bool is_reshape = false;
template <class C>
inline constexpr bool is_reshape<reshape_node<C>> = true;
template <class E>
inline constexpr bool is_matmul = false;
template <class A, class B>
inline constexpr bool is_matmul<matmul_node<A, B>> = true;
template <class E>
inline constexpr bool is_softmax = false;
template <class Op, class C>
inline constexpr bool is_softmax<softmax_node<Op, C>> = true;
template <class E>
inline constexpr bool is_layer_norm = false;
template <class C>
inline constexpr bool is_layer_norm<layer_norm_node<C>> = true;
template <class E>
inline constexpr bool is_concat = false;
template <class Op, class P>
inline constexpr bool is_concat<concat_node<Op, P>> = true;
template <class E>
inline constexpr bool is_conv2d = false;
template <conv2d_part P, class A, class B>
inline constexpr bool is_conv2d<conv2d_node<P, A, B>> = true;

inline std::vector<std::int64_t> iota_list(std::size_t from, std::size_t n) {
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::int64_t(from + i);
  return v;
}

inline std::vector<std::int64_t> shape_list(zenith::shape const& s) {
  std::vector<std::int64_t> v(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) v[i] = std::int64_t(s[i]);
  return v;
}

inline std::vector<std::int64_t> mask_list(std::uint32_t mask, std::size_t rank) {
  std::vector<std::int64_t> v;
  for (std::size_t k = 0; k < rank; ++k)
    if (mask >> k & 1) v.push_back(std::int64_t(k));
  return v;
}

// An elementwise op's IR name: its tag's name, or JAX's where JAX spells it otherwise.
constexpr std::string_view op_name(std::string_view tag) {
  constexpr std::pair<std::string_view, std::string_view> jax[] = {
      {"maximum", "max"},   {"minimum", "min"},  {"sigmoid", "logistic"},
      {"equal", "eq"},      {"not_equal", "ne"}, {"less", "lt"},
      {"less_equal", "le"}, {"greater", "gt"},   {"greater_equal", "ge"}};
  for (auto const& [from, to] : jax)
    if (tag == from) return to;
  return tag;
}

// Op's IR name, folded at compile time: callers per op would otherwise each search the table.
template <class Op>
inline constexpr std::string_view ir_name = op_name(Op::name);

// v broadcast to shape s by numpy's rules (trailing axes aligned); v itself when it has s, or
// when it is a literal (a rank-0 literal stays a scalar operand, as in JAX's jaxprs).
template <class = void>
value_id broadcast(graph& g, value_id v, zenith::shape const& s) {
  value const& x = g.at(v);
  if (x.shape == s || x.kind == value_kind::literal) return v;
  std::size_t off = s.size() - x.shape.size();
  zenith::dtype d = x.dtype;
  return g.add_equation("broadcast_in_dim", {v}, d, s,
                        {{"broadcast_dimensions", iota_list(off, x.shape.size())}});
}
ZENITH_RUNTIME_INSTANCE(value_id broadcast<>(graph& g, value_id v, zenith::shape const& s))

// v (of shape `from`) with axes of size 1 inserted to give shape s: the axes of s that are not
// in `inserted` (a bit mask over s's axes) take v's axes in order.
template <class = void>
value_id insert_axes(graph& g, value_id v, zenith::shape const& s, std::uint32_t inserted) {
  value const& x = g.at(v);
  if (x.shape == s) return v;
  zenith::dtype d = x.dtype;
  std::vector<std::int64_t> dims;
  for (std::size_t k = 0; k < s.size(); ++k)
    if (!(inserted >> k & 1)) dims.push_back(std::int64_t(k));
  return g.add_equation("broadcast_in_dim", {v}, d, s, {{"broadcast_dimensions", dims}});
}
ZENITH_RUNTIME_INSTANCE(value_id insert_axes<>(graph& g, value_id v, zenith::shape const& s,
                                               std::uint32_t inserted))

// v converted to dtype d (v itself when it is d already).
template <class = void>
value_id convert(graph& g, value_id v, zenith::dtype d) {
  value const& x = g.at(v);
  if (x.dtype == d) return v;
  if (x.kind == value_kind::literal) return g.add_literal(d, x.literal);
  zenith::shape s = x.shape;
  return g.add_equation("convert_element_type", {v}, d, s,
                        {{"new_dtype", d}, {"weak_type", false}});
}
ZENITH_RUNTIME_INSTANCE(value_id convert<>(graph& g, value_id v, zenith::dtype d))

template <class = void>
value_id reshape(graph& g, value_id v, zenith::shape const& s) {
  value const& x = g.at(v);
  if (x.shape == s) return v;
  zenith::dtype d = x.dtype;
  return g.add_equation("reshape", {v}, d, s,
                        {{"new_sizes", shape_list(s)},
                         {"dimensions", std::string("None")},
                         {"sharding", std::string("None")}});
}
ZENITH_RUNTIME_INSTANCE(value_id reshape<>(graph& g, value_id v, zenith::shape const& s))

// numpy's matmul of a and b (already of the result's dtype) as one dot_general.
template <class = void>
value_id matmul(graph& g, value_id a, value_id b, zenith::detail::matmul_dims const& d,
                zenith::dtype dt) {
  std::size_t ra = g.at(a).shape.size(), rb = g.at(b).shape.size();
  std::vector<std::int64_t> lc{std::int64_t(ra - 1)};
  std::vector<std::int64_t> rc{std::int64_t(d.b_vector ? 0 : rb - 2)}, lb, rbat;
  if (!d.a_vector && !d.b_vector && !d.batch.empty()) {
    // Both operands broadcast to the batch shape; the batch axes are dot_general's batch.
    std::size_t r = d.batch.size();
    zenith::shape sa = d.batch, sb = d.batch;
    sa.push_back(d.m);
    sa.push_back(d.k);
    sb.push_back(d.k);
    sb.push_back(d.n);
    a = broadcast(g, a, sa);
    b = broadcast(g, b, sb);
    lc = {std::int64_t(r + 1)};
    rc = {std::int64_t(r)};
    lb = rbat = iota_list(0, r);
  }
  return g.add_equation("dot_general", {a, b}, dt, d.out,
                        {{"lhs_contracting", lc},
                         {"rhs_contracting", rc},
                         {"lhs_batch", lb},
                         {"rhs_batch", rbat},
                         {"preferred_element_type", dt}});
}
ZENITH_RUNTIME_INSTANCE(value_id matmul<>(graph& g, value_id a, value_id b,
                                          zenith::detail::matmul_dims const& d, zenith::dtype dt))

}  // namespace detail

template <class E>
value_id emit(recorder& r, E const& e);

namespace detail {

// Called for each elementwise op, reduction and attributed barrier (softmax, log_softmax,
// layer_norm, conv2d) Op that a program emits, with its operands' element type T: the layers that
// run and differentiate IR register Op's kernel and rules for T (ir/op_table.hpp), so that a
// program compiles those of the ops it uses only. Defined by autodiff/ir_ops.hpp.
template <class Op, class T>
void op_emitted();

// Called for the element type T of every value emit records: the trace's runtime registers what
// it does with arrays of T where it does not always (autodiff/ir_tape_run.hpp defines it).
template <element T>
void dtype_emitted();

// An elementwise op's equation named `name` on the values in[order[0]], in[order[1]], ...
// (in[0], in[1], ... where order is null), each broadcast to s first: compiled once, whatever
// the op, so that an expression's emitter holds only its walk.
template <class = void>
value_id map_equation(graph& g, std::string_view name, zenith::dtype d, zenith::shape const& s,
                      value_id const* in, std::size_t n, std::uint8_t const* order) {
  std::vector<value_id> v(n);
  for (std::size_t k = 0; k < n; ++k) v[k] = broadcast(g, in[order ? order[k] : k], s);
  return g.add_equation(name, std::move(v), d, s);
}
ZENITH_RUNTIME_INSTANCE(value_id map_equation<>(graph& g, std::string_view name, zenith::dtype d,
                                                zenith::shape const& s, value_id const* in,
                                                std::size_t n, std::uint8_t const* order))

// JAX's operand orders where they differ from zenith's.
inline constexpr std::uint8_t select_n_order[] = {0, 2, 1};  // where: the false case first
inline constexpr std::uint8_t clamp_order[] = {1, 0, 2};     // clip(x, lo, hi): clamp(lo, x, hi)

template <class Op, class... Cs, std::size_t... I>
value_id emit_map(recorder& r, map_node<Op, Cs...> const& e, std::index_sequence<I...>) {
  using T = value_t<map_node<Op, Cs...>>;
  graph& g = r.target();
  emit_functions const& f = r.functions();
  value_id const in[] = {emit(r, zenith::get<I>(e.children))...};
  if constexpr (std::is_same_v<Op, ops::cast<T>>) {
    return f.convert(g, f.broadcast(g, in[0], e.shape()), dtype_of<T>());
  } else {
    // The interpreter picks a kernel by the last operand's type (a where's condition is bool).
    op_emitted<Op, value_t<std::tuple_element_t<sizeof...(Cs) - 1, std::tuple<Cs...>>>>();
    std::string_view name = ir_name<Op>;
    std::uint8_t const* order = nullptr;
    if constexpr (std::is_same_v<Op, ops::where>) {
      name = "select_n";
      order = select_n_order;
    } else if constexpr (std::is_same_v<Op, ops::clip>) {
      name = "clamp";
      order = clamp_order;
    }
    return f.map(g, name, dtype_of<T>(), e.shape(), in, sizeof...(Cs), order);
  }
}

template <class = void>
value_id literal(graph& g, zenith::dtype d, double x) {
  return g.add_literal(d, x);
}
ZENITH_RUNTIME_INSTANCE(value_id literal<>(graph& g, zenith::dtype d, double x))

// The views' equations on the value `in` of shape `from`, of dtype d, giving shape s.
template <class = void>
value_id transpose_equation(graph& g, value_id in, views::transpose const& t, zenith::dtype d,
                            zenith::shape const& s, zenith::shape const& from) {
  std::vector<std::int64_t> perm(from.size());
  for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = std::int64_t(t.perm[k]);
  return g.add_equation("transpose", {in}, d, s, {{"permutation", perm}});
}
ZENITH_RUNTIME_INSTANCE(value_id transpose_equation<>(graph& g, value_id in,
                                                      views::transpose const& t, zenith::dtype d,
                                                      zenith::shape const& s,
                                                      zenith::shape const& from))

template <class = void>
value_id squeeze_equation(graph& g, value_id in, views::squeeze const& q, zenith::dtype d,
                          zenith::shape const& s, zenith::shape const& from) {
  return g.add_equation("squeeze", {in}, d, s, {{"dimensions", mask_list(q.axes, from.size())}});
}
ZENITH_RUNTIME_INSTANCE(value_id squeeze_equation<>(graph& g, value_id in, views::squeeze const& q,
                                                    zenith::dtype d, zenith::shape const& s,
                                                    zenith::shape const& from))

template <class = void>
value_id slice_equation(graph& g, value_id in, views::slice const& view, zenith::dtype d,
                        zenith::shape const& s, zenith::shape const& from) {
  // Negative steps: reverse those axes first (JAX's slice takes positive strides only).
  std::vector<std::int64_t> rev, start(from.size()), limit(from.size()), stride(from.size());
  for (std::size_t k = 0; k < from.size(); ++k) {
    std::int64_t st = view.start[k], step = view.step[k], n = std::int64_t(s[k]);
    if (step < 0) {
      rev.push_back(std::int64_t(k));
      st = std::int64_t(from[k]) - 1 - st;
      step = -step;
    }
    start[k] = st;
    stride[k] = step;
    limit[k] = n == 0 ? st : st + step * (n - 1) + 1;
  }
  if (!rev.empty()) in = g.add_equation("rev", {in}, d, from, {{"dimensions", rev}});
  bool unit = std::all_of(stride.begin(), stride.end(), [](std::int64_t k) { return k == 1; });
  attr_value strides = unit ? attr_value(std::string("None")) : attr_value(stride);
  return g.add_equation("slice", {in}, d, s,
                        {{"start_indices", start}, {"limit_indices", limit}, {"strides", strides}});
}
ZENITH_RUNTIME_INSTANCE(value_id slice_equation<>(graph& g, value_id in, views::slice const& view,
                                                  zenith::dtype d, zenith::shape const& s,
                                                  zenith::shape const& from))

template <class View, class C>
value_id emit_view(recorder& r, view_node<View, C> const& e) {
  value_id in = emit(r, e.child);
  graph& g = r.target();
  emit_functions const& f = r.functions();
  zenith::dtype d = dtype_of<value_t<C>>();
  if constexpr (std::is_same_v<View, views::transpose>) {
    return f.transpose(g, in, e.view, d, e.shape(), e.child.shape());
  } else if constexpr (std::is_same_v<View, views::broadcast_to>) {
    return f.broadcast(g, in, e.shape());
  } else if constexpr (std::is_same_v<View, views::expand_dims>) {
    return f.insert_axes(g, in, e.shape(), 1u << e.view.axis);
  } else if constexpr (std::is_same_v<View, views::squeeze>) {
    return f.squeeze(g, in, e.view, d, e.shape(), e.child.shape());
  } else {
    static_assert(std::is_same_v<View, views::slice>, "zenith: a view with no IR form");
    return f.slice(g, in, e.view, d, e.shape(), e.child.shape());
  }
}

// A reduction's equation (then its kept axes put back as 1 where keepdims).
template <class = void>
value_id reduce_equation(graph& g, value_id in, std::string_view name, zenith::dtype d,
                         std::uint32_t axes, bool indexed, bool keepdims, zenith::shape const& from,
                         zenith::shape const& s) {
  zenith::shape dropped;
  for (std::size_t k = 0; k < from.size(); ++k)
    if (!(axes >> k & 1)) dropped.push_back(from[k]);
  attributes a{{"axes", mask_list(axes, from.size())}};
  if (indexed) a.set("index_dtype", d);
  if (name == ops::reduce_sum::name) a.set("out_sharding", std::string("None"));
  value_id out = g.add_equation(name, {in}, d, dropped, std::move(a));
  return keepdims ? insert_axes(g, out, s, axes) : out;
}
ZENITH_RUNTIME_INSTANCE(value_id reduce_equation<>(
    graph& g, value_id in, std::string_view name, zenith::dtype d, std::uint32_t axes, bool indexed,
    bool keepdims, zenith::shape const& from, zenith::shape const& s))

template <class Op, class C>
value_id emit_reduce(recorder& r, reduce_node<Op, C> const& e) {
  value_id in = emit(r, e.child);
  op_emitted<Op, value_t<C>>();
  return r.functions().reduce(r.target(), in, Op::name, dtype_of<value_t<reduce_node<Op, C>>>(),
                              e.axes, indexed_reduction<Op>, e.keepdims, e.child.shape(),
                              e.shape());
}

// The barriers' equations, on operands already of the result's dtype d.
template <class = void>
value_id along_axis_equation(graph& g, std::string_view op, value_id x, zenith::dtype d,
                             zenith::shape const& s, std::size_t axis) {
  return g.add_equation(op, {x}, d, s, {{"axis", std::int64_t(axis)}});
}
ZENITH_RUNTIME_INSTANCE(value_id along_axis_equation<>(graph& g, std::string_view op, value_id x,
                                                       zenith::dtype d, zenith::shape const& s,
                                                       std::size_t axis))

template <class = void>
value_id layer_norm_equation(graph& g, value_id x, zenith::dtype d, zenith::shape const& s,
                             std::size_t axis, double eps) {
  return g.add_equation("layer_norm", {x}, d, s, {{"axis", std::int64_t(axis)}, {"epsilon", eps}});
}
ZENITH_RUNTIME_INSTANCE(value_id layer_norm_equation<>(graph& g, value_id x, zenith::dtype d,
                                                       zenith::shape const& s, std::size_t axis,
                                                       double eps))

template <class = void>
value_id concat_equation(graph& g, std::vector<value_id>& parts, zenith::dtype d,
                         zenith::shape const& s, std::size_t axis, bool new_axis) {
  if (new_axis) {
    // stack: each part gets the new axis, then one concatenation along it.
    for (auto& p : parts) {
      zenith::shape ps = g.at(p).shape, t;
      for (std::size_t k = 0; k <= ps.size(); ++k) {
        if (k == axis) t.push_back(1);
        if (k < ps.size()) t.push_back(ps[k]);
      }
      p = insert_axes(g, p, t, 1u << axis);
    }
  }
  return g.add_equation("concatenate", std::move(parts), d, s, {{"dimension", std::int64_t(axis)}});
}
ZENITH_RUNTIME_INSTANCE(value_id concat_equation<>(graph& g, std::vector<value_id>& parts,
                                                   zenith::dtype d, zenith::shape const& s,
                                                   std::size_t axis, bool new_axis))

template <class = void>
value_id conv2d_equation(graph& g, std::string_view op, value_id a, value_id b, zenith::dtype d,
                         zenith::shape const& s, conv2d_geometry const& geo) {
  std::vector<std::int64_t> stride{std::int64_t(geo.stride[0]), std::int64_t(geo.stride[1])};
  std::vector<std::int64_t> pad{std::int64_t(geo.pad[0]), std::int64_t(geo.pad[1])};
  std::vector<std::int64_t> dil{std::int64_t(geo.dil[0]), std::int64_t(geo.dil[1])};
  return g.add_equation(op, {a, b}, d, s,
                        {{"window_strides", stride}, {"padding", pad}, {"rhs_dilation", dil}});
}
ZENITH_RUNTIME_INSTANCE(value_id conv2d_equation<>(graph& g, std::string_view op, value_id a,
                                                   value_id b, zenith::dtype d,
                                                   zenith::shape const& s,
                                                   conv2d_geometry const& geo))

template <class = void>
value_id any_equation(graph& g, std::string_view op, std::vector<value_id> in, zenith::dtype d,
                      zenith::shape s, attributes attrs) {
  return g.add_equation(op, std::move(in), d, std::move(s), std::move(attrs));
}
ZENITH_RUNTIME_INSTANCE(value_id any_equation<>(graph& g, std::string_view op,
                                                std::vector<value_id> in, zenith::dtype d,
                                                zenith::shape s, attributes attrs))

}  // namespace detail

// The functions a recorder made by a transform builds equations with.
template <class = void>
inline constexpr emit_functions emit_functions_of{&recorder::add_leaf<>,
                                                  &detail::literal<>,
                                                  &detail::map_equation<>,
                                                  &detail::convert<>,
                                                  &detail::broadcast<>,
                                                  &detail::insert_axes<>,
                                                  &detail::reshape<>,
                                                  &detail::transpose_equation<>,
                                                  &detail::squeeze_equation<>,
                                                  &detail::slice_equation<>,
                                                  &detail::reduce_equation<>,
                                                  &detail::matmul<>,
                                                  &detail::along_axis_equation<>,
                                                  &detail::layer_norm_equation<>,
                                                  &detail::concat_equation<>,
                                                  &detail::conv2d_equation<>,
                                                  &detail::any_equation<>};

// Appends e's equations to the recorder's graph; returns the value of e's result.
template <class E>
value_id emit(recorder& r, E const& e) {
  graph& g = r.target();
  emit_functions const& f = r.functions();
  detail::dtype_emitted<value_t<E>>();
  if constexpr (is_array_v<E>) {
    return r.leaf(e);
  } else if constexpr (requires {
                         requires E::dense;
                         e.data();
                       }) {
    // A fixed-size tensor read where it is (tensor_ref): a constant, copied (the graph keeps
    // its constants alive, and the tensor may not outlive it).
    using T = value_t<E>;
    auto a = array<T>::empty(e.shape());
    std::copy(e.data(), e.data() + a.size(), a.data());
    return r.leaf(a);
  } else if constexpr (is_scalar_node_v<E>) {
    return f.literal(g, dtype_of<value_t<E>>(), double(compute_t<value_t<E>>(e.value)));
  } else if constexpr (is_map_node_v<E>) {
    return detail::emit_map(r, e,
                            std::make_index_sequence<std::tuple_size_v<decltype(e.children)>>{});
  } else if constexpr (is_view_node_v<E>) {
    return detail::emit_view(r, e);
  } else if constexpr (is_reduce_node_v<E>) {
    return detail::emit_reduce(r, e);
  } else if constexpr (detail::is_reshape<E>) {
    return f.reshape(g, emit(r, e.child), e.shape());
  } else if constexpr (detail::is_matmul<E>) {
    zenith::dtype d = dtype_of<value_t<E>>();
    value_id a = f.convert(g, emit(r, e.lhs()), d);
    value_id b = f.convert(g, emit(r, e.rhs()), d);
    return f.matmul(g, a, b, e.dims, d);
  } else if constexpr (detail::is_softmax<E>) {
    zenith::dtype d = dtype_of<value_t<E>>();
    value_id x = f.convert(g, emit(r, e.input()), d);
    detail::op_emitted<typename E::op_type, value_t<E>>();
    return f.along_axis(g, E::op_type::name, x, d, e.shape(), e.axis);
  } else if constexpr (detail::is_layer_norm<E>) {
    zenith::dtype d = dtype_of<value_t<E>>();
    value_id x = f.convert(g, emit(r, e.input()), d);
    detail::op_emitted<ops::layer_norm, value_t<E>>();
    return f.layer_norm(g, x, d, e.shape(), e.axis, e.eps);
  } else if constexpr (detail::is_concat<E>) {
    zenith::dtype d = dtype_of<value_t<E>>();
    std::vector<value_id> parts;
    E::parts_of::each(
        e.parts, [&](auto const& p, std::size_t) { parts.push_back(f.convert(g, emit(r, p), d)); });
    return f.concat(g, parts, d, e.shape(), e.axis, E::op_type::new_axis);
  } else if constexpr (detail::is_conv2d<E>) {
    zenith::dtype d = dtype_of<value_t<E>>();
    value_id a = f.convert(g, emit(r, e.lhs()), d);
    value_id b = f.convert(g, emit(r, e.rhs()), d);
    detail::op_emitted<ops::conv2d, value_t<E>>();
    std::string_view op = E::part == conv2d_part::output       ? "conv2d"
                          : E::part == conv2d_part::input_grad ? "conv2d_input_grad"
                                                               : "conv2d_filter_grad";
    return f.conv2d(g, op, a, b, d, e.shape(), e.geometry);
  } else if constexpr (requires { ir_form(r, e); }) {
    // A node of a higher layer (the autodiff layer's sum_to, a kept value): its own IR form.
    return ir_form(r, e);
  } else {
    static_assert(sizeof(E) == 0, "zenith: an expression node with no IR form (expr/to_ir.hpp)");
  }
}

}  // namespace zenith::ir
