#pragma once
// layer_norm: its derivative rules, on the expression type (reverse<> and forward<> of
// layer_norm_node, the static path) and on the IR (layer_norm_rule, for a "layer_norm"
// equation). The node is expr/layer_norm.hpp, its kernels backend/cpu/layer_norm.hpp and
// backend/cuda/layer_norm.hpp.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "../../backend/cpu/layer_norm.hpp"
#include "../../core/runtime_instance.hpp"
#include "../../expr/layer_norm.hpp"
#include "../forward.hpp"
#include "../ir_builder.hpp"

namespace zenith::autodiff {

// layer_norm along an axis, from the forward output y (expr/layer_norm.hpp):
//   dx = rstd * (ct - mean(ct) - y * mean(ct * y))
template <class E>
struct reverse<layer_norm_node<E>> {
  using T = value_t<layer_norm_node<E>>;
  template <class G, class Sink>
  static void run(layer_norm_node<E> const& e, G const& ct, Sink& sink,
                  array<T> const* value = nullptr) {
    if constexpr (detail::differentiable_v<E>) {
      array<T> y =
          value ? *value : zenith::detail::evaluate_unrecorded<T>(e, ops::layer_norm::name);
      auto g = share(zenith::detail::convert<T>(ct));
      backward(e.input(),
               zenith::detail::convert<value_t<E>>(zenith::detail::normalization_adjoint(e, y, g)),
               sink);
    }
  }
};

// layer_norm: dy = rstd * (t - mean(t) - y * mean(t * y)), from the forward y: the same map as
// its reverse rule (expr/layer_norm.hpp).
template <class E>
struct forward<layer_norm_node<E>> {
  using T = value_t<layer_norm_node<E>>;
  static auto run(layer_norm_node<E> const& e, tangents const& ts,
                  array<T> const* value = nullptr) {
    array<T> y = value ? *value : zenith::detail::evaluate_unrecorded<T>(e, ops::layer_norm::name);
    auto t = share(zenith::detail::convert<T>(tangent_of(e.input(), ts)));
    return zenith::detail::normalization_adjoint(e, y, t);
  }
};

}  // namespace zenith::autodiff

namespace zenith::ir::detail {

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
ZENITH_RUNTIME_INSTANCE(value_id layer_norm_linear<>(vjp_builder& b, equation const& e, value_id v))

// The IR's rules of a "layer_norm" equation: its Jacobian is symmetric, so both apply it.
struct layer_norm_rule {
  static bool names(std::string_view op) { return op == "layer_norm"; }
  template <class B>
  static void vjp(B& b, equation const& e, value_id ct, std::vector<std::optional<value_id>>& out) {
    out[0] = layer_norm_linear(b, e, ct);
  }
  template <class B>
  static std::optional<value_id> jvp(B& b, equation const& e,
                                     std::vector<std::optional<value_id>> const& ts) {
    return layer_norm_linear(b, e, *ts[0]);
  }
};

}  // namespace zenith::ir::detail
