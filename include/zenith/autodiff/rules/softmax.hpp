#pragma once
// softmax and log_softmax: their derivative rules, on the expression type (reverse<> and
// forward<> of softmax_node, the static path) and on the IR (softmax_rule: what ir_vjp.hpp and
// ir_jvp.hpp run for a "softmax" or "log_softmax" equation). The node is expr/softmax.hpp, its
// kernels backend/cpu/softmax.hpp and backend/cuda/softmax.hpp.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "../../backend/cpu/softmax.hpp"
#include "../../expr/softmax.hpp"
#include "../forward.hpp"
#include "../ir_builder.hpp"

namespace zenith::autodiff {

// softmax / log_softmax along an axis, from the forward output y:
//   softmax:     dx = y * (ct - sum(ct * y))     log_softmax: dx = ct - exp(y) * sum(ct)
template <class Op, class E>
struct reverse<softmax_node<Op, E>> {
  using T = value_t<softmax_node<Op, E>>;
  template <class G, class Sink>
  static void run(softmax_node<Op, E> const& e, G const& ct, Sink& sink,
                  array<T> const* value = nullptr) {
    if constexpr (detail::differentiable_v<E>) {
      array<T> y = value ? *value : zenith::detail::evaluate_unrecorded<T>(e, Op::name);
      auto g = share(zenith::detail::convert<T>(ct));
      if constexpr (Op::log)
        backward(e.input(), zenith::detail::convert<value_t<E>>(g - exp(y) * sum(g, e.axis, true)),
                 sink);
      else
        backward(e.input(), zenith::detail::convert<value_t<E>>(y * (g - sum(g * y, e.axis, true))),
                 sink);
    }
  }
};

// softmax: dy = y * (t - sum(t * y)); log_softmax: dy = t - sum(exp(y) * t), from the forward y.
template <class Op, class E>
struct forward<softmax_node<Op, E>> {
  using T = value_t<softmax_node<Op, E>>;
  static auto run(softmax_node<Op, E> const& e, tangents const& ts,
                  array<T> const* value = nullptr) {
    array<T> y = value ? *value : zenith::detail::evaluate_unrecorded<T>(e, Op::name);
    auto t = share(zenith::detail::convert<T>(tangent_of(e.input(), ts)));
    if constexpr (Op::log)
      return t - sum(exp(y) * t, e.axis, true);
    else
      return y * (t - sum(t * y, e.axis, true));
  }
};

}  // namespace zenith::autodiff

namespace zenith::ir::detail {

// The IR's rules of a "softmax" or "log_softmax" equation, from its output y.
struct softmax_rule {
  static bool names(std::string_view op) { return op == "softmax" || op == "log_softmax"; }
  template <class B>
  static void vjp(B& b, equation const& e, value_id ct, std::vector<std::optional<value_id>>& out) {
    std::string_view op = e.op;
    value const y = b.g().at(e.output);
    std::uint32_t axis = 1u << e.attrs.get<std::int64_t>("axis");
    if (op == "softmax") {  // y * (ct - sum(ct * y))
      value_id s = b.broadcast(b.sum(b.binary("mul", ct, e.output), axis, true), y.shape);
      out[0] = b.binary("mul", e.output, b.binary("sub", ct, s));
    } else {  // ct - exp(y) * sum(ct)
      value_id s = b.broadcast(b.sum(ct, axis, true), y.shape);
      out[0] = b.binary("sub", ct, b.binary("mul", b.eq("exp", {e.output}, y.shape), s));
    }
  }
  template <class B>
  static std::optional<value_id> jvp(B& b, equation const& e,
                                     std::vector<std::optional<value_id>> const& ts) {
    std::string_view op = e.op;
    value const y = b.g().at(e.output);
    std::uint32_t axis = 1u << e.attrs.get<std::int64_t>("axis");
    if (op == "softmax") {  // y * (t - sum(t * y))
      value_id s = b.broadcast(b.sum(b.binary("mul", *ts[0], e.output), axis, true), y.shape);
      return b.binary("mul", e.output, b.binary("sub", *ts[0], s));
    }
    // t - sum(exp(y) * t)
    value_id p = b.eq("exp", {e.output}, y.shape);
    value_id s = b.broadcast(b.sum(b.binary("mul", *ts[0], p), axis, true), y.shape);
    return b.binary("sub", *ts[0], s);
  }
};

}  // namespace zenith::ir::detail
