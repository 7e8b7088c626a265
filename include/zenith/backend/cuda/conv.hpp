#pragma once
// conv2d on a CUDA device: each part of a convolution (expr/conv.hpp) lowers (lower.hpp) to one
// call of the installed conv_runner: cuDNN, opened at run time (cudnn.hpp), or in tests a host
// stand-in, so that the operand handling is checked without a GPU. Like launch.hpp, this header
// needs neither cuDNN nor the driver.
//
//   output       cudnnConvolutionForward          y  = conv(x, w)
//   input_grad   cudnnConvolutionBackwardData     dx from dy and w
//   filter_grad  cudnnConvolutionBackwardFilter   dw from x and dy
//
// Operands are computed into dense device arrays of the result's element type first (unless
// they already are one). float and double compute in their own precision, float16 and bfloat16
// in float.
#include <string>
#include <type_traits>

#include "../../core/array.hpp"
#include "../../core/creation.hpp"
#include "../../core/recording.hpp"
#include "../../expr/conv.hpp"
#include "gemm.hpp"  // gemm_type, gemm_element: the element types the libraries take
#include "lower.hpp"

namespace zenith::cuda_backend {

// One part of a convolution of geometry g: out = part(a, b), dense NCHW / OIHW arrays.
struct conv_call {
  conv2d_part part = conv2d_part::output;
  gemm_type type = gemm_type::f32;
  conv2d_geometry g;
  void const* a = nullptr;
  void const* b = nullptr;
  void* out = nullptr;
};

// Runs convolutions on device d, in order with the kernels on its stream.
struct conv_runner {
  void (*run)(device d, conv_call const& c) = nullptr;
};

namespace detail {
inline conv_runner const*& conv_slot() {
  static conv_runner const* r = nullptr;
  return r;
}

}  // namespace detail

// Installs r as the convolution runner (null removes it) and returns the one it replaces.
inline conv_runner const* install_conv_runner(conv_runner const* r) {
  conv_runner const* old = detail::conv_slot();
  detail::conv_slot() = r;
  return old;
}

template <conv2d_part Part, class A, class B>
requires(lowerable<A>&& lowerable<B>) struct lowering<conv2d_node<Part, A, B>> {
  static auto lower(device d, conv2d_node<Part, A, B> const& e) {
    using R = value_t<conv2d_node<Part, A, B>>;
    if constexpr (!gemm_element<R>) {
      throw device_error("zenith: evaluating on " + d.str() + ": conv2d of " +
                         std::string(dtype_name<R>()) +
                         " does not run on CUDA devices (float, double, float16 and bfloat16 do)");
      return array<R>();
    } else {
      conv_runner const* runner = detail::conv_slot();
      if (!runner)
        throw device_error("zenith: evaluating on " + d.str() +
                           ": conv2d needs cuDNN, which this program does not load (zenith is "
                           "built without the CUDA backend: configure with ZENITH_CUDA on)");
      zenith::detail::note_unreplayable("a cuDNN convolution");
      zenith::shape s = e.shape();
      array<R> a = array_on_device<R>(d, e.lhs());
      array<R> b = array_on_device<R>(d, e.rhs());
      if (s.numel() == 0) return array<R>::empty(s, d);
      if (a.size() == 0 || b.size() == 0) return full<R>(s, R(0), d);  // an empty sum
      auto out = array<R>::empty(s, d);
      conv_call c{Part, gemm_type_of<R>(), e.geometry, a.data(), b.data(), out.data()};
      runner->run(d, c);
      return out;
    }
  }
};

}  // namespace zenith::cuda_backend
