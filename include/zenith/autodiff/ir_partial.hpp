#pragma once
// An elementwise op's partial derivatives as IR equations, from the op tag's own partial<I>
// (expr/ops.hpp): the rule every other layer uses, here called on `sym` operands, values of the
// graph under construction whose operators and functions append equations directly.
//
// A rule is thus compiled once per op, with no expression type behind it: built on arrays, each
// rule became its own expression tree, walked by its own emitter, and that cost a program that
// differentiates a fifth of its build.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/runtime_instance.hpp"
#include "../expr/to_ir.hpp"
#include "../ir/op_table.hpp"

namespace zenith::ir {

namespace detail {

// What the operands of one rule share: the graph they append to and the floating dtype of the
// equation being differentiated (numbers and 0/1 conversions take it).
struct sym_context {
  graph& g;
  zenith::dtype d;
};

// A value of cx's graph, as an operand of a tag's partial<I>.
struct sym {
  using symbolic_operand = void;  // expr/op_support.hpp: apply_op records equations for it
  sym_context* cx;
  value_id v;

  zenith::dtype dtype() const { return cx->g.at(v).dtype; }
  zenith::shape shape() const { return cx->g.at(v).shape; }
};

// Equation `op` over the operands, of dtype d (the first operand's when d is nullopt), broadcast
// to their common shape as expr/to_ir.hpp's emit broadcasts a map's children.
inline sym sym_equation(std::string_view op, std::vector<sym> in,
                        std::optional<zenith::dtype> d = std::nullopt) {
  sym_context& cx = *in.at(0).cx;
  zenith::shape s;
  for (sym const& x : in) s = broadcast_shapes(s, x.shape(), op);
  std::vector<value_id> ids;
  for (sym const& x : in) ids.push_back(broadcast(cx.g, x.v, s));
  zenith::dtype out = d ? *d : in[0].dtype();
  return {&cx, cx.g.add_equation(op_name(op), std::move(ids), out, s)};
}

// A number as an operand next to x: a literal of x's dtype (bool operands take the rule's
// floating dtype).
inline sym sym_number(sym const& x, double n) {
  zenith::dtype d = x.dtype() == zenith::dtype::bool_ ? x.cx->d : x.dtype();
  return {x.cx, x.cx->g.add_literal(d, n)};
}

inline sym operator-(sym const& x) { return sym_equation("neg", {x}); }

#define ZENITH_SYM_BINARY(SYM, OP, RESULT)                                                         \
  inline sym operator SYM(sym const& a, sym const& b) { return sym_equation(OP, {a, b}, RESULT); } \
  inline sym operator SYM(sym const& a, double b) {                                                \
    return sym_equation(OP, {a, sym_number(a, b)}, RESULT);                                        \
  }                                                                                                \
  inline sym operator SYM(double a, sym const& b) {                                                \
    return sym_equation(OP, {sym_number(b, a), b}, RESULT);                                        \
  }
ZENITH_SYM_BINARY(+, "add", std::nullopt)
ZENITH_SYM_BINARY(-, "sub", std::nullopt)
ZENITH_SYM_BINARY(*, "mul", std::nullopt)
ZENITH_SYM_BINARY(/, "div", std::nullopt)
ZENITH_SYM_BINARY(==, "equal", zenith::dtype::bool_)
ZENITH_SYM_BINARY(<, "less", zenith::dtype::bool_)
ZENITH_SYM_BINARY(<=, "less_equal", zenith::dtype::bool_)
ZENITH_SYM_BINARY(>, "greater", zenith::dtype::bool_)
ZENITH_SYM_BINARY(>=, "greater_equal", zenith::dtype::bool_)
#undef ZENITH_SYM_BINARY

template <class Op>
inline constexpr bool is_cast_op = false;
template <class To>
inline constexpr bool is_cast_op<ops::cast<To>> = true;

// detail::apply_op<Op> on sym operands (found by argument-dependent lookup): Op's equation; a
// cast is the rule's 0/1 conversion of a condition (as_number) to its floating dtype.
template <class Op, class... X>
sym symbolic_apply(std::type_identity<Op>, X const&... x) {
  sym_context* cx = nullptr;
  ((cx = cx ? cx : x.cx), ...);
  if constexpr (is_cast_op<Op>) {
    return {cx, convert(cx->g, x.v..., cx->d)};
  } else {
    // Rules apply to float and double values (16-bit floats compute in float).
    op_emitted<Op, float>();
    op_emitted<Op, double>();
    return sym_equation(Op::name, {x...});
  }
}

// An elementwise op's partial with respect to one operand: a value of the graph, or a number.
struct partial {
  std::optional<value_id> value;
  double number = 1;
};

// The tag's partial<J> at the equation's output y and operands xs (in the tag's order), of
// floating dtype d.
template <class Op, std::size_t J, std::size_t... I>
partial partial_of(graph& g, value_id y, std::vector<value_id> const& xs, zenith::dtype d,
                   std::index_sequence<I...>) {
  sym_context cx{g, d};
  auto p = Op::template partial<J>(sym{&cx, y}, sym{&cx, xs[I]}...);
  if constexpr (std::is_same_v<decltype(p), sym>)
    return {p.v};
  else
    return {std::nullopt, double(p)};
}

template <class Op, std::size_t J>
constexpr bool takes_derivative() {
  if constexpr (piecewise_constant_op<Op>())
    return false;
  else if constexpr (requires { Op::nondiff_operands; })
    return !((Op::nondiff_operands >> J) & 1u);
  else
    return true;
}

// The partials of an elementwise equation e of g with respect to its operands, into out (in e's
// order), for the operands want(m) selects that take a derivative; xs are e's operands in the
// tag's order, perm[J] the position in e of the tag's operand J.
using partials_fn = void (*)(graph& g, equation const& e, std::vector<value_id> const& xs,
                             std::vector<std::size_t> const& perm, std::vector<char> const& want,
                             std::vector<std::optional<partial>>& out);

template <class Op>
void op_partials(graph& g, equation const& e, std::vector<value_id> const& xs,
                 std::vector<std::size_t> const& perm, std::vector<char> const& want,
                 std::vector<std::optional<partial>>& out) {
  if constexpr (!is_cast_op<Op>) {
    zenith::dtype d = g.at(e.output).dtype;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
        if constexpr (takes_derivative<Op, J>()) {
          std::size_t m = perm[J];
          if (!want[m] || g.at(e.inputs[m]).kind == value_kind::literal) return;
          out[m] = partial_of<Op, J>(g, e.output, xs, d, std::index_sequence<I...>{});
        }
      };
      (one(std::integral_constant<std::size_t, I>{}), ...);
    }
    (std::make_index_sequence<op_arity<Op>()>{});
  }
}

// The rules are the same for every dtype: one entry per op, under this key.
inline constexpr zenith::dtype any_dtype = zenith::dtype::float32;

// Registers elementwise op Op's partials (ir/op_table.hpp). Once per Op.
template <class Op>
void register_partials() {
  add_once<&op_partials<Op>>(ir_name<Op>, any_dtype);
}

// The partials of elementwise equation e of g with respect to its operands (in e's order), for
// the operands `want(m)` selects that take a derivative (nullopt for the others). An op that is
// not in the catalogue, or whose rules no emitter registered, is a value_error naming it and
// `mode`.
template <class = void>
std::vector<std::optional<partial>> elementwise_partials(graph& g, equation const& e,
                                                         std::vector<char> const& want,
                                                         std::string_view mode) {
  std::vector<std::optional<partial>> out(e.inputs.size());
  // The tag's operand order: select_n and clamp are recorded in JAX's.
  std::vector<std::size_t> perm(e.inputs.size());
  for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = k;
  if (e.op == "select_n") perm = {0, 2, 1};
  if (e.op == "clamp") perm = {1, 0, 2};
  std::vector<value_id> xs;
  for (std::size_t k : perm) xs.push_back(e.inputs[k]);
  std::string_view op = e.op == "select_n" ? std::string_view("select") : std::string_view(e.op);
  partials_fn f = table_of<partials_fn>().find(op, any_dtype);
  if (!f) fail_unregistered(std::string(mode) + " rule", e.op, g.at(e.output).dtype);
  f(g, e, xs, perm, want, out);
  return out;
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::optional<partial>> elementwise_partials<>(
    graph& g, equation const& e, std::vector<char> const& want, std::string_view mode))

}  // namespace detail

}  // namespace zenith::ir
