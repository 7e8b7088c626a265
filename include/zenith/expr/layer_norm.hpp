#pragma once
// layer_norm along one axis, as a barrier node:
//   y = (x - mean(x)) / sqrt(var(x) + eps),  mean and (biased) variance along the axis,
// the normalization of a transformer's LayerNorm without its scale and shift, which a user
// applies as y * gamma + beta (fused into whatever reads y). The CPU backend
// (backend/cpu/layer_norm.hpp) evaluates the input once into the output buffer and normalizes
// it in place, two passes for the moments (no cancellation for large means); CUDA lowers it to
// two reduction kernels and one elementwise kernel (backend/cuda/layer_norm.hpp).
//
// Its derivative is one linear map, the same both ways (it is symmetric), over the output y:
//   J v = rstd * (v - mean(v) - y * mean(v * y)),  rstd = 1 / sqrt(var(x) + eps),
// so the reverse rule (ct -> dx) and the forward rule (t -> dy) are the same expression,
// normalization_adjoint below, and like every rule it is differentiable again.
// Integer and bool inputs give float32; floating inputs keep their type.
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/expr_base.hpp"
#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "reduce.hpp"

namespace zenith {

namespace ops {
struct layer_norm {
  static constexpr std::string_view name = "layer_norm";
};
}  // namespace ops

template <expression E>
struct layer_norm_node : expr_base<layer_norm_node<E>> {
  using value_type = float_of_t<value_t<E>>;
  using op_type = ops::layer_norm;
  static constexpr bool barrier = true;
  static constexpr bool fixed = false;

  std::tuple<E> children;
  std::size_t axis;  // normalized, 0 <= axis < rank
  double eps;

  layer_norm_node(E e, int ax, double epsilon) : children(std::move(e)), eps(epsilon) {
    axis = normalize_axis(ax, input().shape().size(), ops::layer_norm::name);
    if (!(eps > 0) || !std::isfinite(eps)) {
      std::ostringstream os;
      os << "layer_norm: eps must be positive and finite, got " << eps << " (input of shape "
         << input().shape() << ")";
      throw value_error(os.str());
    }
  }
  E const& input() const { return std::get<0>(children); }
  zenith::shape shape() const { return input().shape(); }
  std::tuple<E const&> operands() const { return {input()}; }  // the node protocol (expr/node.hpp)
  template <class D>
  layer_norm_node<D> with_operands(D d) const {
    return layer_norm_node<D>(std::move(d), int(axis), eps);
  }

  template <class F>
  void for_each_array(F&& f) const {
    input().for_each_array(f);
  }
};

// Normalizes e along axis (default: the last) to zero mean and unit variance; eps (> 0) is
// added to the variance, as in torch.nn.functional.layer_norm.
template <expression E>
auto layer_norm(E const& e, int axis = -1, double eps = 1e-5) {
  return layer_norm_node<E>(e, axis, eps);
}

namespace detail {
// rstd * (v - mean(v) - y * mean(v * y)) along e's axis, for the node e with output y (an
// array) and a tangent or cotangent v read twice (a shared node): both rules of layer_norm.
template <class E, class Y, class V>
auto normalization_adjoint(layer_norm_node<E> const& e, Y const& y, V const& v) {
  using T = value_t<layer_norm_node<E>>;
  int axis = int(e.axis);
  auto x = convert<T>(e.input());
  auto centered = x - mean(x, axis, true);
  auto rstd = rsqrt(mean(square(centered), axis, true) + T(e.eps));
  return rstd * (v - mean(v, axis, true) - y * mean(v * y, axis, true));
}
}  // namespace detail

}  // namespace zenith
