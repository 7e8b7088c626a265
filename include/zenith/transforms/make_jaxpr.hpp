#pragma once
// make_jaxpr: the IR a function records, printed in JAX's jaxpr format.
//
//   auto f = [](auto const& x, auto const& w) { return zn::tanh(zn::matmul(x, w)); };
//   std::cout << zn::make_jaxpr(f)(x, w);
//   // { lambda ; a:f32[4,3] b:f32[3,2]. let
//   //     c:f32[4,2] = dot_general[dimension_numbers=(([1], [0]), ([], [])) ...] a b
//   //     d:f32[4,2] = tanh c
//   //   in (d,) }
//
// Every array of every argument (arrays and trees of arrays; other arguments pass through) is
// an input of the graph. The function runs once on the real values, as under grad: each
// expression it materializes from an input appends its equations (expr/to_ir.hpp), and the
// result it returns (an expression, an array or a tree of them) appends its own and names the
// graph's outputs. Arrays the function reads that are not arguments are constants of the graph.
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/trace.hpp"
#include "../core/tree.hpp"
#include "../expr/to_ir.hpp"
#include "../ir/jaxpr.hpp"
#include "grad.hpp"

namespace zenith {

// A traced function's graph; prints as jaxpr text.
class jaxpr {
 public:
  explicit jaxpr(ir::graph g) : g_(std::move(g)) {}
  ir::graph const& graph() const { return g_; }
  template <class = void>
  std::string str() const {
    return ir::to_jaxpr(g_);
  }

 private:
  ir::graph g_;
};

template <class Ch, class Tr>
std::basic_ostream<Ch, Tr>& operator<<(std::basic_ostream<Ch, Tr>& os, jaxpr const& j) {
  return os << j.str();
}

namespace detail {

// A tree argument as the function sees it: each array an alias under a fresh identity, traced
// by st and bound to a new input of the graph. Other arguments as they are.
template <class Arg>
Arg jaxpr_argument(Arg const& arg, trace_state& st) {
  if constexpr (is_tree_of<Arg, any_array_leaf>()) {
    Arg t = arg;
    for_each_leaf(t, [&](auto& a) {
      using A = std::remove_cvref_t<decltype(a)>;
      if (!a.storage())
        throw value_error(
            "make_jaxpr: an argument holds an array with no storage "
            "(default-constructed)");
      auto b = buffer::alias(a.storage());
      st.traced.insert(b.get());
      a = A::from_buffer(std::move(b), a.data(), a.shape());
      ir::detail::dtype_emitted<value_t<A>>();
      st.ir->bind(st.ir->graph.add_input(dtype_of<value_t<A>>(), a.shape()), a);
    });
    return t;
  } else {
    return arg;
  }
}

// The function's result as the graph's outputs.
template <class Out>
void jaxpr_outputs(Out const& out, ir::recorder& rec) {
  if constexpr (expression<Out>) {
    rec.target().add_output(ir::emit(rec, out));
  } else if constexpr (is_tree_of<Out, any_array_leaf>()) {
    Out leaves = out;  // for_each_leaf visits a tree it may rebind; arrays are handles
    for_each_leaf(leaves, [&](auto const& a) { rec.target().add_output(ir::emit(rec, a)); });
  } else if constexpr (requires { std::tuple_size<Out>::value; }) {
    std::apply([&](auto const&... o) { (jaxpr_outputs(o, rec), ...); }, out);
  } else {
    static_assert(sizeof(Out) == 0,
                  "zenith::make_jaxpr: the function must return an expression, an array, or a "
                  "tree or tuple of them");
  }
}

template <class F>
struct make_jaxpr_fn {
  F f;
  template <class... Args>
  jaxpr operator()(Args const&... args) const {
    trace_state st = nested_trace("make_jaxpr");
    // Braces: the arguments become inputs left to right.
    std::tuple<Args...> traced{jaxpr_argument(args, st)...};
    trace_scope scope(&st);
    auto out = std::apply(f, traced);
    jaxpr_outputs(out, st.ir->rec);
    return jaxpr(st.ir->graph);
  }
};

}  // namespace detail

// f's IR on the given arguments, as an object that prints as a jaxpr (and holds the graph).
template <class F>
auto make_jaxpr(F f) {
  return detail::make_jaxpr_fn<F>{std::move(f)};
}

}  // namespace zenith
