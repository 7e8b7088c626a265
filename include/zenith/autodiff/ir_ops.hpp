#pragma once
// What registering an op means (ir/op_table.hpp): an elementwise op's interpreter kernel
// (backend/cpu/op_kernels.hpp) and its partials (ir_partial.hpp), a reduction's kernel
// (backend/cpu/interpret_barriers.hpp), a softmax's, layer_norm's or conv2d's kernels
// (backend/cpu/barrier_kernels.hpp). The emitters register the ops a program records;
// register_rule_ops those that the hand-written rules (ir_vjp.hpp, ir_jvp.hpp) append by name;
// zn::ir::register_all every op, for graphs built by hand.
#include <type_traits>

#include "../backend/cpu/barrier_kernels.hpp"
#include "../backend/cpu/interpret_barriers.hpp"
#include "../backend/cpu/op_kernels.hpp"
#include "../core/dtype.hpp"
#include "../core/runtime_instance.hpp"
#include "ir_partial.hpp"

namespace zenith::ir {

namespace detail {

template <class Op, class... Ops>
constexpr bool one_of(type_list<Ops...>) {
  return (std::is_same_v<Op, Ops> || ...);
}

template <class Op, class T>
void op_emitted() {
  if constexpr (one_of<Op>(reduction_ops{})) {
    register_reduction<Op, T>();
  } else if constexpr (one_of<Op>(barrier_ops{})) {
    register_barrier<Op, T>();
  } else {
    register_map_kernel<Op, T>();
    register_partials<Op>();
  }
}

// Ops the hand-written rules append by name, for float and double. The 16-bit floats compute
// elementwise ops in float and reduce in their own type: their reduce_sum is registered where a
// value of one is recorded (dtype_emitted, autodiff/ir_tape_run.hpp).
template <class = void>
void register_rule_ops() {
  static bool const once = [] {
    using elementwise = type_list<ops::add, ops::sub, ops::mul, ops::div, ops::neg, ops::exp,
                                  ops::rsqrt, ops::where, ops::equal, ops::not_equal, ops::less,
                                  ops::less_equal, ops::greater, ops::greater_equal>;
    [&]<class... Op>(type_list<Op...>) {
      ((op_emitted<Op, float>(), op_emitted<Op, double>()), ...);
    }(elementwise{});
    op_emitted<ops::reduce_sum, float>();
    op_emitted<ops::reduce_sum, double>();
    return true;
  }();
  (void)once;
}
ZENITH_RUNTIME_INSTANCE(void register_rule_ops<>())

}  // namespace detail

// Registers every op for every dtype: what running or differentiating a graph built by hand
// (graph::add_equation) needs, where no emitter registered the ops it names. ir::run,
// append_vjp and append_jvp call it; it compiles every kernel and rule into the program.
template <class>
void register_all() {
  static bool const once = [] {
    auto each_type = [&]<class Op>() {
      detail::op_emitted<Op, bool>();
      detail::op_emitted<Op, std::int32_t>();
      detail::op_emitted<Op, std::int64_t>();
      detail::op_emitted<Op, bfloat16>();
      detail::op_emitted<Op, float16>();
      detail::op_emitted<Op, float>();
      detail::op_emitted<Op, double>();
    };
    [&]<class... Op>(type_list<Op...>) {
      (each_type.template operator()<Op>(), ...);
    }(elementwise_ops{});
    [&]<class... Op>(type_list<Op...>) {
      (each_type.template operator()<Op>(), ...);
    }(reduction_ops{});
    [&]<class... Op>(type_list<Op...>) {
      (each_type.template operator()<Op>(), ...);
    }(detail::barrier_ops{});
    return true;
  }();
  (void)once;
}
ZENITH_RUNTIME_INSTANCE(void register_all<>())

}  // namespace zenith::ir
