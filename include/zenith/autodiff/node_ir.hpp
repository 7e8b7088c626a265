#pragma once
// The IR form (expr/to_ir.hpp) of the autodiff layer's own nodes, which the rules build into
// tangents and cotangents: when transforms nest, those are materialized under the enclosing
// trace and so recorded as IR like any expression (found by ir::emit through ir_form).
#include <cstdint>
#include <vector>

#include "../core/runtime_instance.hpp"
#include "../expr/to_ir.hpp"
#include "adjoint_nodes.hpp"
#include "memoize.hpp"
#include "reuse.hpp"
#include "sum_to.hpp"

namespace zenith {

namespace detail {
// v summed over `axes` (of its shape), then reshaped to s.
template <class = void>
ir::value_id ir_sum_to(ir::graph& g, ir::value_id v, std::vector<int> const& axes,
                       zenith::shape const& s) {
  if (!axes.empty()) {
    zenith::shape in = g.at(v).shape, kept;
    std::vector<std::int64_t> list;
    for (std::size_t k = 0; k < in.size(); ++k) {
      bool summed = false;
      for (int a : axes) summed = summed || std::size_t(a) == k;
      if (summed)
        list.push_back(std::int64_t(k));
      else
        kept.push_back(in[k]);
    }
    v = g.add_equation("reduce_sum", {v}, g.at(v).dtype, kept,
                       {{"axes", list}, {"out_sharding", std::string("None")}});
  }
  return ir::detail::reshape(g, v, s);
}
ZENITH_RUNTIME_INSTANCE(ir::value_id ir_sum_to<>(ir::graph& g, ir::value_id v,
                                                 std::vector<int> const& axes,
                                                 zenith::shape const& s))
}  // namespace detail

// A barrier's kept value: the array (a value of the trace when it recorded it).
template <class B>
ir::value_id ir_form(ir::recorder& r, memo_node<B> const& e) {
  return r.leaf(e.value);
}
template <class E>
ir::value_id ir_form(ir::recorder& r, reuse_node<E> const& e) {
  return ir::emit(r, e.child());
}
template <class E>
ir::value_id ir_form(ir::recorder& r, shared_node<E> const& e) {
  return ir::emit(r, e.child);
}
template <class E>
ir::value_id ir_form(ir::recorder& r, shared_ref<E> const& e) {
  return ir::emit(r, e.child());
}

template <class C>
ir::value_id ir_form(ir::recorder& r, sum_to_node<C> const& e) {
  ir::value_id v = ir::emit(r, e.child);
  ir::detail::op_emitted<ops::reduce_sum, value_t<C>>();
  return detail::ir_sum_to(r.target(), v, e.summed_axes(), e.shape());
}

template <class E>
ir::value_id ir_form(ir::recorder& r, fold_to_node<E> const& e) {
  ir::value_id v = ir::emit(r, e.child);
  ir::detail::op_emitted<ops::reduce_sum, value_t<E>>();
  return detail::ir_sum_to(r.target(), v, detail::folded_axes(e.child.shape(), e.full), e.shape());
}

// The child written into zeros of the sliced array's shape at the slice's positions: a pad
// (after reversing the axes the slice walks backwards).
template <class E>
ir::value_id ir_form(ir::recorder& r, pad_node<E> const& e) {
  ir::graph& g = r.target();
  ir::value_id v = ir::emit(r, e.child);
  zenith::shape in = e.shape(), part = e.child.shape();
  zenith::dtype d = g.at(v).dtype;
  std::vector<std::int64_t> low(in.size()), high(in.size()), interior(in.size()), rev;
  for (std::size_t k = 0; k < in.size(); ++k) {
    std::int64_t start = e.view.start[k], step = e.view.step[k], n = std::int64_t(part[k]);
    if (step < 0) {
      rev.push_back(std::int64_t(k));
      start = std::int64_t(in[k]) - 1 - start;
      step = -step;
    }
    low[k] = start;
    interior[k] = n > 0 ? step - 1 : 0;
    high[k] = std::int64_t(in[k]) - (n > 0 ? start + (n - 1) * step + 1 : start);
  }
  v = g.add_equation(
      "pad", {v, g.add_literal(d, 0.0)}, d, in,
      {{"padding_low", low}, {"padding_high", high}, {"padding_interior", interior}});
  if (!rev.empty()) v = g.add_equation("rev", {v}, d, in, {{"dimensions", rev}});
  return v;
}

}  // namespace zenith
