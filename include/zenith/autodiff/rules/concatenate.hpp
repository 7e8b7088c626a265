#pragma once
// concatenate and stack: their derivative rules, on the expression type (reverse<> and
// forward<> of concat_node, the static path) and on the IR (concatenate_rule, for a
// "concatenate" equation; stack records as one). The node is expr/concat.hpp, its kernels
// backend/cpu/concat.hpp and backend/cuda/concat.hpp.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "../../backend/cpu/concat.hpp"
#include "../../expr/concat.hpp"
#include "../forward.hpp"
#include "../ir_builder.hpp"

namespace zenith::autodiff {

// concatenate / stack: each part takes its slice of the cotangent (stack: without the new axis).
template <class Op, class Parts>
struct reverse<concat_node<Op, Parts>> {
  template <class G, class Sink>
  static void run(concat_node<Op, Parts> const& e, G const& ct, Sink& sink) {
    auto g = share(ct);
    int axis = int(e.axis);
    std::int64_t at = 0;
    e.for_each_part([&](auto const& part, std::size_t) {
      using P = std::remove_cvref_t<decltype(part)>;
      zenith::shape s = part.shape();
      std::int64_t len = Op::new_axis ? 1 : std::int64_t(s[e.axis]);
      if constexpr (detail::differentiable_v<P>) {
        auto piece = slice(g, axis, at, at + len);
        if constexpr (Op::new_axis)
          backward(part, zenith::detail::convert<value_t<P>>(reshape(piece, s)), sink);
        else
          backward(part, zenith::detail::convert<value_t<P>>(piece), sink);
      }
      at += len;
    });
  }
};

// concatenate / stack: the parts' tangents, concatenated the same way.
template <class Op, class E>
struct forward<concat_node<Op, std::vector<E>>> {
  static auto run(concat_node<Op, std::vector<E>> const& e, tangents const& ts) {
    using TE = decltype(tangent_of(std::declval<E const&>(), ts));
    std::vector<TE> parts;
    parts.reserve(e.parts.size());
    for (auto const& p : e.parts) parts.push_back(tangent_of(p, ts));
    return concat_node<Op, std::vector<TE>>(std::move(parts), int(e.axis));
  }
};
template <class Op, class... Es>
struct forward<concat_node<Op, std::tuple<Es...>>> {
  static auto run(concat_node<Op, std::tuple<Es...>> const& e, tangents const& ts) {
    return zenith::detail::apply(
        [&](auto const&... p) {
          using Parts = std::tuple<decltype(tangent_of(p, ts))...>;
          return concat_node<Op, Parts>(Parts(tangent_of(p, ts)...), int(e.axis));
        },
        e.parts);
  }
};

}  // namespace zenith::autodiff

namespace zenith::ir::detail {

// The IR's rules of a "concatenate" equation.
struct concatenate_rule {
  static bool names(std::string_view op) { return op == "concatenate"; }
  // Each part takes its slice of the cotangent.
  template <class B>
  static void vjp(B& b, equation const& e, value_id ct, std::vector<std::optional<value_id>>& out) {
    graph& g = b.g();
    value const y = g.at(e.output);
    std::size_t axis = std::size_t(e.attrs.get<std::int64_t>("dimension"));
    std::int64_t at = 0;
    for (std::size_t p = 0; p < e.inputs.size(); ++p) {
      zenith::shape s = g.at(e.inputs[p]).shape;
      std::vector<std::int64_t> st(s.size(), 0), lim = shape_list(y.shape);
      st[axis] = at;
      lim[axis] = at + std::int64_t(s[axis]);
      at = lim[axis];
      out[p] =
          b.eq("slice", {ct}, s,
               {{"start_indices", st}, {"limit_indices", lim}, {"strides", std::string("None")}});
    }
  }
  // Linear: the tangents concatenated the same way, zeros for parts without one.
  template <class B>
  static std::optional<value_id> jvp(B& b, equation const& e,
                                     std::vector<std::optional<value_id>> const& ts) {
    std::vector<value_id> parts;
    for (std::size_t k = 0; k < ts.size(); ++k)
      parts.push_back(ts[k] ? *ts[k] : zero_like(b, e.inputs[k]));
    return again(b, e, parts);
  }
};

}  // namespace zenith::ir::detail
