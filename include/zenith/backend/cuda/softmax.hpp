#pragma once
// softmax and log_softmax on a CUDA device, lowered (lower.hpp) to the kernels that already
// exist: the input computed into an array (unless it is one), its maximum along the axis (a
// reduction kernel), the sum of exp(x - max) along the axis (a reduction kernel with the
// subtraction and exp fused in), and the normalization (one elementwise kernel). The maximum
// comes first for the same reason as on the CPU: large inputs do not overflow. Their reverse
// rules (autodiff/backward.hpp) are elementwise expressions and reductions over the output and
// the cotangent, which lower like any other.
#include <cstdint>

#include "../../core/array.hpp"
#include "../../expr/elementwise.hpp"
#include "../../expr/reduce.hpp"
#include "../../expr/softmax.hpp"
#include "lower.hpp"

namespace zenith::cuda_backend {

template <class Op, class E>
requires lowerable<E>
struct lowering<softmax_node<Op, E>> {
  static auto lower(device d, softmax_node<Op, E> const& e) {
    using R = value_t<softmax_node<Op, E>>;
    array<R> x = array_on_device<R>(d, e.input());
    if (x.size() == 0) return x;
    std::uint32_t along = std::uint32_t(1) << e.axis;
    array<R> m = evaluate_on_device<R>(d, reduce_node<ops::reduce_max, array<R>>(x, along, true));
    auto z = x - m;
    auto ez = zenith::exp(z);
    array<R> s =
        evaluate_on_device<R>(d, reduce_node<ops::reduce_sum, decltype(ez)>(ez, along, true));
    if constexpr (Op::log)
      return evaluate_on_device<R>(d, z - zenith::log(s));
    else
      return evaluate_on_device<R>(d, ez / s);
  }
};

}  // namespace zenith::cuda_backend
