#pragma once
// The interpreter's kernels of the barrier ops that take attributes (backend/cpu/interpret.hpp):
// softmax, log_softmax, layer_norm, and conv2d with its two gradients, one per (op, float type),
// found in an op table (ir/op_table.hpp) where the program registered them when it emitted the
// op: a program that never records a convolution compiles none.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../core/any_array.hpp"
#include "../../core/creation.hpp"
#include "../../ir/graph.hpp"
#include "../../ir/op_table.hpp"
#include "conv.hpp"
#include "layer_norm.hpp"
#include "softmax.hpp"

namespace zenith::ir::detail {

// Equation e's result of shape `out` from its operands a and b (b null for one operand).
using barrier_kernel = any_array (*)(equation const& e, any_array const& a, any_array const* b,
                                     zenith::shape const& out);

// softmax (log_softmax when Log) or layer_norm (LayerNorm) of a along the equation's axis.
template <bool LayerNorm, bool Log, class T>
any_array normalize_kernel(equation const& e, any_array const& a, any_array const*,
                           zenith::shape const& out) {
  std::size_t axis = std::size_t(e.attrs.get<std::int64_t>("axis"));
  array<T> x = a.as<T>(), y = array<T>::empty(out);
  std::copy(x.data(), x.data() + y.size(), y.data());
  if constexpr (LayerNorm)
    zenith::detail::layer_norm_inplace(y.data(), y.shape(), axis, e.attrs.get<double>("epsilon"));
  else
    zenith::detail::softmax_inplace<Log>(y.data(), y.shape(), axis);
  return y;
}

// conv2d's part P: the output (a the input, b the filter), or a gradient (conv2d_input_grad:
// a the output's cotangent; conv2d_filter_grad: a the input, b the output's cotangent).
template <conv2d_part P, class T>
any_array conv2d_kernel(equation const& e, any_array const& a, any_array const* b,
                        zenith::shape const& out) {
  using zenith::detail::conv2d_geometry_of, zenith::detail::conv2d_into;
  auto ints = [&](std::string_view n) { return e.attrs.get<std::vector<std::int64_t>>(n); };
  conv2d_options opt;
  auto cs = ints("window_strides"), pad = ints("padding"), dil = ints("rhs_dilation");
  for (int k = 0; k < 2; ++k) {
    opt.stride[k] = int(cs[std::size_t(k)]);
    opt.padding[k] = int(pad[std::size_t(k)]);
    opt.dilation[k] = int(dil[std::size_t(k)]);
  }
  array<T> y = zeros<T>(out);  // input_grad adds into it
  if (out.numel() == 0 || a.shape().numel() == 0 || b->shape().numel() == 0) return y;
  T const *pa = a.as<T>().data(), *pb = b->as<T>().data();
  if constexpr (P == conv2d_part::output)
    conv2d_into<P>(pa, pb, conv2d_geometry_of(a.shape(), b->shape(), opt), y.data());
  else if constexpr (P == conv2d_part::input_grad)
    conv2d_into<P>(pa, pb, conv2d_geometry_of(out, b->shape(), opt), y.data());
  else
    conv2d_into<P>(pa, pb, conv2d_geometry_of(a.shape(), out, opt), y.data());
  return y;
}

// Registers barrier op Op's kernels for float or double T (conv2d's: its gradients' too, which
// its derivative rules append). Once per (Op, T); other types have no kernel.
template <class Op, class T>
void register_barrier() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    zenith::dtype d = dtype_of<T>();
    if constexpr (std::is_same_v<Op, ops::softmax>) {
      add_once<&normalize_kernel<false, false, T>>("softmax", d);
    } else if constexpr (std::is_same_v<Op, ops::log_softmax>) {
      add_once<&normalize_kernel<false, true, T>>("log_softmax", d);
    } else if constexpr (std::is_same_v<Op, ops::layer_norm>) {
      add_once<&normalize_kernel<true, false, T>>("layer_norm", d);
    } else {
      static_assert(std::is_same_v<Op, ops::conv2d>);
      add_once<&conv2d_kernel<conv2d_part::output, T>>("conv2d", d);
      add_once<&conv2d_kernel<conv2d_part::input_grad, T>>("conv2d_input_grad", d);
      add_once<&conv2d_kernel<conv2d_part::filter_grad, T>>("conv2d_filter_grad", d);
    }
  }
}

// The barrier ops registered this way.
using barrier_ops = type_list<ops::softmax, ops::log_softmax, ops::layer_norm, ops::conv2d>;

}  // namespace zenith::ir::detail
