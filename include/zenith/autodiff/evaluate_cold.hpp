#pragma once
// evaluate_cold<T>(e): e as a fresh array, for the cold paths of the reverse pass (a cotangent
// that cannot join the gradient's loop, a loss whose layout is not one row). On e's device where
// it is on one; else by the block interpreter from e's IR (backend/cpu/interpret.hpp), as the
// tape runs: what an expression type compiles for such a path is its emitter (expr/to_ir.hpp),
// not a fused loop and a reduction of its own. The run is one step of a jit recording, and is
// recorded by the enclosing traces that read what it reads (run_traced).
#include <vector>

#include "../backend/cpu/evaluate.hpp"
#include "../core/any_array.hpp"
#include "../expr/to_ir.hpp"
#include "ir_tape_run.hpp"

namespace zenith::detail {

// The value v of g, running only the equations it needs.
template <class = void>
any_array run_cold(ir::graph const& g, ir::value_id v) {
  std::vector<any_array> vals(g.values().size());
  run_traced(g, vals, ir::needed_equations(g, vals, {v}), {v});
  if (vals[v].empty()) {  // no equation: a constant or a literal
    ir::value const& x = g.at(v);
    if (x.kind == ir::value_kind::constant) return ir::detail::constant_array(x);
    return with_dtype(
        x.dtype, [&]<class T>() -> any_array { return full<T>({}, T(compute_t<T>(x.literal))); });
  }
  return vals[v];
}
ZENITH_RUNTIME_INSTANCE(any_array run_cold<>(ir::graph const& g, ir::value_id v))

template <element T, expression E>
array<T> evaluate_cold(E const& e) {
  if (device d = device_of(e); d != cpu) return evaluate_on<T>(d, e);
  ir::graph g;
  ir::recorder r(g);
  ir::value_id v;
  if constexpr (std::is_same_v<value_t<E>, T>)
    v = ir::emit(r, e);
  else
    v = ir::emit(r, map_node<ops::cast<T>, E>(e));
  array<T> out = run_cold(g, v).template as<T>();
  // An expression of numbers only (a broadcast constant) is a rank-0 literal in the IR.
  if (out.shape() != e.shape()) return full<T>(e.shape(), out.data()[0]);
  return out;
}

}  // namespace zenith::detail
