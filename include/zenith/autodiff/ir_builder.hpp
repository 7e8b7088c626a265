#pragma once
// What the IR's derivative rules build with: vjp_builder, which appends equations to a graph,
// and the helpers the rules share (the general ones in ir_vjp.hpp and ir_jvp.hpp, the barriers'
// in autodiff/rules/).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/any_array.hpp"
#include "../core/runtime_instance.hpp"
#include "../expr/to_ir.hpp"
#include "ir_ops.hpp"

namespace zenith::ir::detail {

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
ZENITH_RUNTIME_INSTANCE(class vjp_builder_t<>)
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
ZENITH_RUNTIME_INSTANCE(value_id unreduce<>(vjp_builder& b, value_id ct, zenith::shape in,
                                            std::uint32_t axes))

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
ZENITH_RUNTIME_INSTANCE(value_id transpose_last<>(vjp_builder& b, value_id v))

// The same equation applied to other operands (a linear op on a tangent).
template <class = void>
value_id again(vjp_builder& b, equation const& e, std::vector<value_id> in) {
  value const& y = b.g().at(e.output);
  return b.g().add_equation(e.op, std::move(in), y.dtype, y.shape, e.attrs);
}
ZENITH_RUNTIME_INSTANCE(value_id again<>(vjp_builder& b, equation const& e,
                                         std::vector<value_id> in))

// The tangent of a bilinear equation (dot_general, each conv2d part): e(ta, b) + e(a, tb), the
// terms of operands without a tangent left out.
template <class = void>
std::optional<value_id> bilinear_jvp(vjp_builder& b, equation const& e,
                                     std::vector<std::optional<value_id>> const& ts) {
  std::optional<value_id> sum;
  if (ts[0]) sum = again(b, e, {*ts[0], e.inputs[1]});
  if (ts[1]) {
    value_id c = again(b, e, {e.inputs[0], *ts[1]});
    sum = sum ? b.binary("add", *sum, c) : c;
  }
  return sum;
}
ZENITH_RUNTIME_INSTANCE(std::optional<value_id> bilinear_jvp<>(
    vjp_builder& b, equation const& e, std::vector<std::optional<value_id>> const& ts))

// A zero of v's shape and dtype: the tangent of an operand that has none, where a rule needs
// them all.
template <class = void>
value_id zero_like(vjp_builder& b, value_id v) {
  zenith::shape s = b.g().at(v).shape;  // first: appending moves the values
  return b.broadcast(b.g().add_literal(b.g().at(v).dtype, 0), s);
}
ZENITH_RUNTIME_INSTANCE(value_id zero_like<>(vjp_builder& b, value_id v))

}  // namespace zenith::ir::detail
