#pragma once
// layer_norm on a CUDA device, lowered (lower.hpp) to kernels that already exist: the input
// computed into an array (unless it is one), its mean along the axis (a reduction kernel), the
// mean of the squared deviations from it (a reduction kernel with the subtraction and square
// fused in), and the normalization (one elementwise kernel). Two passes for the moments, as on
// the CPU, in float for 16-bit inputs. The rules (expr/layer_norm.hpp) are elementwise
// expressions and reductions over the output, the input and the cotangent, which lower like any
// other.
#include <cstdint>

#include "../../core/array.hpp"
#include "../../expr/elementwise.hpp"
#include "../../expr/layer_norm.hpp"
#include "../../expr/reduce.hpp"
#include "lower.hpp"

namespace zenith::cuda_backend {

template <class E>
requires lowerable<E>
struct lowering<layer_norm_node<E>> {
  static auto lower(device d, layer_norm_node<E> const& e) {
    using R = value_t<layer_norm_node<E>>;
    using C = compute_t<R>;
    array<R> x = array_on_device<R>(d, e.input());
    if (x.size() == 0) return x;
    std::uint32_t along = std::uint32_t(1) << e.axis;
    auto xc = zenith::detail::convert<C>(x);
    array<C> mu =
        evaluate_on_device<C>(d, reduce_node<ops::reduce_mean, decltype(xc)>(xc, along, true));
    auto sq = zenith::square(xc - mu);
    array<C> var =
        evaluate_on_device<C>(d, reduce_node<ops::reduce_mean, decltype(sq)>(sq, along, true));
    return evaluate_on_device<R>(d, zenith::detail::convert<R>((xc - mu) * rsqrt(var + C(e.eps))));
  }
};

}  // namespace zenith::cuda_backend
