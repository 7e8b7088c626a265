#pragma once
// 2-D convolution (cross-correlation, as in PyTorch, JAX and cuDNN), NCHW:
//
//   zn::array<float> y = zn::conv2d(x, w);                              // x (N, C, H, W), w (O, C,
//   KH, KW) zn::array<float> z = zn::conv2d(x, w, {.stride = {2, 2}, .padding = {1, 1}});
//
//   y[n, o, i, j] = sum_{c, p, q} x[n, c, i * sh - ph + p * dh, j * sw - pw + q * dw] * w[o, c, p,
//   q]
//
// with zeros outside x. Output (N, O, OH, OW), OH = (H + 2 ph - dh (KH - 1) - 1) / sh + 1.
//
// One node template computes the three linear maps of a convolution, so that its derivatives are
// convolutions again (autodiff/backward.hpp, forward.hpp), to any order:
//   conv2d_part::output       y  = conv(x, w)        children (x, w)
//   conv2d_part::input_grad   dx = conv^T_x(g, w)    children (g, w): the adjoint in x
//   conv2d_part::filter_grad  dw = conv^T_w(x, g)    children (x, g): the adjoint in w
// All three are barriers: the CPU computes them with im2col and a GEMM (backend/cpu/conv.hpp),
// a CUDA device with cuDNN (backend/cuda/conv.hpp).
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>

#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/expr_base.hpp"
#include "../core/shape.hpp"

namespace zenith {

namespace ops {
struct conv2d {
  static constexpr std::string_view name = "conv2d";
  static constexpr std::string_view cuda = "cudnnConvolutionForward";
};
}  // namespace ops

struct conv2d_options {
  std::array<int, 2> stride{1, 1};
  std::array<int, 2> padding{0, 0};
  std::array<int, 2> dilation{1, 1};
};

enum class conv2d_part { output, input_grad, filter_grad };

// Every size of one convolution: input (n, c, h, w), filter (o, c, kh, kw), output (n, o, oh, ow).
struct conv2d_geometry {
  std::size_t n = 0, c = 0, h = 0, w = 0;
  std::size_t o = 0, kh = 0, kw = 0;
  std::size_t oh = 0, ow = 0;
  std::array<std::size_t, 2> stride{1, 1}, pad{0, 0}, dil{1, 1};

  zenith::shape input() const { return {n, c, h, w}; }
  zenith::shape filter() const { return {o, c, kh, kw}; }
  zenith::shape output() const { return {n, o, oh, ow}; }
};

namespace detail {

inline conv2d_geometry conv2d_geometry_of(zenith::shape const& x, zenith::shape const& w,
                                          conv2d_options const& opt) {
  auto fail = [&](std::string const& why) {
    throw shape_error("conv2d: " + why + " (input " + x.str() + ", filter " + w.str() + ")");
  };
  if (x.size() != 4) fail("the input must be (N, C, H, W)");
  if (w.size() != 4) fail("the filter must be (O, C, KH, KW)");
  if (x[1] != w[1])
    fail("the input has " + std::to_string(x[1]) + " channels, the filter " + std::to_string(w[1]));
  for (int k = 0; k < 2; ++k) {
    if (opt.stride[k] < 1 || opt.dilation[k] < 1 || opt.padding[k] < 0)
      fail("stride and dilation must be >= 1 and padding >= 0, got stride " +
           std::to_string(opt.stride[k]) + ", dilation " + std::to_string(opt.dilation[k]) +
           ", padding " + std::to_string(opt.padding[k]));
  }
  conv2d_geometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  for (int k = 0; k < 2; ++k) {
    g.stride[k] = std::size_t(opt.stride[k]);
    g.pad[k] = std::size_t(opt.padding[k]);
    g.dil[k] = std::size_t(opt.dilation[k]);
  }
  std::size_t in[2] = {g.h, g.w}, kernel[2] = {g.kh, g.kw}, out[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    if (kernel[k] == 0) fail("the filter is empty");
    std::size_t span = g.dil[k] * (kernel[k] - 1) + 1, padded = in[k] + 2 * g.pad[k];
    if (span > padded)
      fail("the filter (" + std::to_string(span) +
           " with dilation) is larger than the padded input (" + std::to_string(padded) + ")");
    out[k] = (padded - span) / g.stride[k] + 1;
  }
  g.oh = out[0], g.ow = out[1];
  return g;
}

}  // namespace detail

template <conv2d_part Part, expression A, expression B>
struct conv2d_node : expr_base<conv2d_node<Part, A, B>> {
  using value_type = promote_t<value_t<A>, value_t<B>>;
  using op_type = ops::conv2d;
  static constexpr conv2d_part part = Part;
  static constexpr bool barrier = true;
  static constexpr bool fixed = false;

  std::tuple<A, B> children;
  conv2d_geometry geometry;

  conv2d_node(A a, B b, conv2d_geometry const& g)
      : children(std::move(a), std::move(b)), geometry(g) {
    zenith::shape want_a = Part == conv2d_part::input_grad ? g.output() : g.input();
    zenith::shape want_b = Part == conv2d_part::filter_grad ? g.output() : g.filter();
    if (lhs().shape() != want_a || rhs().shape() != want_b)
      throw shape_error("conv2d: operands of shapes " + lhs().shape().str() + " and " +
                        rhs().shape().str() + " where " + want_a.str() + " and " + want_b.str() +
                        " were expected");
  }
  A const& lhs() const { return std::get<0>(children); }
  B const& rhs() const { return std::get<1>(children); }
  std::tuple<A const&, B const&> operands() const { return {lhs(), rhs()}; }  // expr/node.hpp
  template <class C, class D>
  conv2d_node<Part, C, D> with_operands(C c, D d) const {
    return conv2d_node<Part, C, D>(std::move(c), std::move(d), geometry);
  }
  zenith::shape shape() const {
    if constexpr (Part == conv2d_part::output)
      return geometry.output();
    else if constexpr (Part == conv2d_part::input_grad)
      return geometry.input();
    else
      return geometry.filter();
  }

  template <class F>
  void for_each_array(F&& f) const {
    lhs().for_each_array(f);
    rhs().for_each_array(f);
  }
};

template <conv2d_part Part, class A, class B>
auto make_conv2d(A const& a, B const& b, conv2d_geometry const& g) {
  return conv2d_node<Part, A, B>(a, b, g);
}

// The convolution of x (N, C, H, W) with the filter w (O, C, KH, KW): (N, O, OH, OW).
template <expression X, expression W>
auto conv2d(X const& x, W const& w, conv2d_options const& opt = {}) {
  return conv2d_node<conv2d_part::output, X, W>(
      x, w, detail::conv2d_geometry_of(x.shape(), w.shape(), opt));
}

}  // namespace zenith
