#pragma once
// conv2d: its derivative rules, on the expression type (reverse<> and forward<> of each part's
// conv2d_node, the static path) and on the IR (conv2d_rule, for "conv2d", "conv2d_input_grad"
// and "conv2d_filter_grad" equations). The node is expr/conv.hpp, its kernels
// backend/cpu/conv.hpp and backend/cuda/conv.hpp.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "../../backend/cpu/conv.hpp"
#include "../../expr/conv.hpp"
#include "../forward.hpp"
#include "../ir_builder.hpp"

namespace zenith::autodiff {

// conv2d: each of the three parts is linear in both operands, and its adjoints are the other
// parts (expr/conv.hpp), so a gradient of a convolution is convolutions again, to any order.
//   output      y = conv(x, w):      dx = input_grad(g, w),   dw = filter_grad(x, g)
//   input_grad  y = T_x(h, w):       dh = output(g, w),       dw = filter_grad(g, h)
//   filter_grad y = T_w(x, h):       dx = input_grad(h, g),   dh = output(x, g)
template <conv2d_part Part, class A, class B>
struct reverse<conv2d_node<Part, A, B>> {
  template <class G, class Sink>
  static void run(conv2d_node<Part, A, B> const& e, G const& ct, Sink& sink) {
    auto const& a = e.lhs();
    auto const& b = e.rhs();
    auto const& geo = e.geometry;
    auto g = share_operand(ct);
    constexpr auto output = conv2d_part::output, input_grad = conv2d_part::input_grad,
                   filter_grad = conv2d_part::filter_grad;
    auto to_a = [&](auto const& d) { backward(a, zenith::detail::convert<value_t<A>>(d), sink); };
    auto to_b = [&](auto const& d) { backward(b, zenith::detail::convert<value_t<B>>(d), sink); };
    if constexpr (Part == output) {
      if constexpr (detail::differentiable_v<A>) to_a(make_conv2d<input_grad>(g, b, geo));
      if constexpr (detail::differentiable_v<B>) to_b(make_conv2d<filter_grad>(a, g, geo));
    } else if constexpr (Part == input_grad) {
      if constexpr (detail::differentiable_v<A>) to_a(make_conv2d<output>(g, b, geo));
      if constexpr (detail::differentiable_v<B>) to_b(make_conv2d<filter_grad>(g, a, geo));
    } else {
      if constexpr (detail::differentiable_v<A>) to_a(make_conv2d<input_grad>(b, g, geo));
      if constexpr (detail::differentiable_v<B>) to_b(make_conv2d<output>(a, g, geo));
    }
  }
};

// conv2d (any of its parts): bilinear, as matmul.
template <conv2d_part Part, class A, class B>
struct forward<conv2d_node<Part, A, B>> {
  static auto run(conv2d_node<Part, A, B> const& e, tangents const& ts) {
    using T = value_t<conv2d_node<Part, A, B>>;
    auto const& a = e.lhs();
    auto const& b = e.rhs();
    auto const& g = e.geometry;
    if constexpr (detail::differentiable_v<A> && detail::differentiable_v<B>)
      return zenith::detail::convert<T>(make_conv2d<Part>(tangent_of(a, ts), b, g) +
                                        make_conv2d<Part>(a, tangent_of(b, ts), g));
    else if constexpr (detail::differentiable_v<A>)
      return zenith::detail::convert<T>(make_conv2d<Part>(tangent_of(a, ts), b, g));
    else
      return zenith::detail::convert<T>(make_conv2d<Part>(a, tangent_of(b, ts), g));
  }
};

}  // namespace zenith::autodiff

namespace zenith::ir::detail {

// conv2d's attributes, for the equations of its derivatives.
inline attributes conv2d_attrs(equation const& e) {
  attributes a;
  for (auto const& at : e.attrs) a.set(at.name, at.value);
  return a;
}

// The IR's rules of the three conv2d equations.
struct conv2d_rule {
  static bool names(std::string_view op) { return op.starts_with("conv2d"); }
  template <class B>
  static void vjp(B& b, equation const& e, value_id ct, std::vector<std::optional<value_id>>& out) {
    graph& g = b.g();
    std::string_view op = e.op;
    value const y = g.at(e.output);
    zenith::shape in0 = g.at(e.inputs[0]).shape;
    // The three parts of a convolution are each other's transposes (reverse<conv2d_node> above):
    //   conv2d             y = conv(x, w):  dx = input_grad(g, w),  dw = filter_grad(x, g)
    //   conv2d_input_grad  y = T_x(h, w):   dh = conv2d(g, w),      dw = filter_grad(g, h)
    //   conv2d_filter_grad y = T_w(x, h):   dx = input_grad(h, g),  dh = conv2d(x, g)
    value_id a = e.inputs[0], w = e.inputs[1];
    zenith::shape sa = in0, sw = g.at(w).shape;
    auto part = [&](std::string_view p, value_id l, value_id r, zenith::shape s) {
      return g.add_equation(p, {l, r}, y.dtype, s, conv2d_attrs(e));
    };
    if (op == "conv2d") {
      out[0] = part("conv2d_input_grad", ct, w, sa);
      out[1] = part("conv2d_filter_grad", a, ct, sw);
    } else if (op == "conv2d_input_grad") {
      out[0] = part("conv2d", ct, w, sa);
      out[1] = part("conv2d_filter_grad", ct, a, sw);
    } else {
      out[0] = part("conv2d_input_grad", w, ct, sa);
      out[1] = part("conv2d", a, ct, sw);
    }
  }
  // Each part is bilinear.
  template <class B>
  static std::optional<value_id> jvp(B& b, equation const& e,
                                     std::vector<std::optional<value_id>> const& ts) {
    return bilinear_jvp(b, e, ts);
  }
};

}  // namespace zenith::ir::detail
