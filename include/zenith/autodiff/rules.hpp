#pragma once
// The derivative rules of the barrier ops, one header each in autodiff/rules/: matmul (the IR's
// dot_general), conv2d, softmax and log_softmax, layer_norm, concatenate and stack. Each holds
// both forms of its rules: the static path's reverse<> and forward<> specializations of its
// node, and a rule struct for the IR (names(op), vjp, jvp) that ir_vjp.hpp and ir_jvp.hpp find
// here by the equation's op name. A new barrier adds its header to the list below.
#include <string_view>

#include "../expr/op_support.hpp"
#include "rules/concatenate.hpp"
#include "rules/conv2d.hpp"
#include "rules/layer_norm.hpp"
#include "rules/matmul.hpp"
#include "rules/softmax.hpp"

namespace zenith::ir::detail {

using barrier_rules =
    type_list<dot_general_rule, conv2d_rule, softmax_rule, layer_norm_rule, concatenate_rule>;

// Calls f with the rule (a value of its struct) of the barrier op named op; false when no
// barrier's rule names it.
template <class F>
bool with_barrier_rule(std::string_view op, F&& f) {
  return [&]<class... R>(type_list<R...>) {
    return ((R::names(op) && (f(R{}), true)) || ...);
  }(barrier_rules{});
}

}  // namespace zenith::ir::detail
