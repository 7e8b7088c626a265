#pragma once
// The CPU kernels of conv2d_node (expr/conv.hpp): im2col and one GEMM per image (OpenBLAS).
//
//   cols (C KH KW x OH OW) = the input patches of image n, zeros where the window is outside
//   output       y[n]  (O x OH OW)  = w (O x C KH KW) . cols
//   input_grad   dx[n] = col2im(w^T . g[n])          (the patches' contributions summed back)
//   filter_grad  dw    = sum_n g[n] . cols_n^T
//
// float and double run in their own precision; other element types are computed in double and
// converted back (16-bit floats, integers).
#include <cblas.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "../../expr/conv.hpp"
#include "evaluate.hpp"

namespace zenith {

namespace detail {

// f(column entry, pixel) for every entry of one image's patch matrix: rows (c, p, q), columns
// (i, j); pixel is the offset in the c x h x w image it reads, or -1 where the window is outside.
template <class F>
void each_tap(conv2d_geometry const& g, F&& f) {
  std::size_t const ohw = g.oh * g.ow;
  for (std::size_t c = 0; c < g.c; ++c)
    for (std::size_t p = 0; p < g.kh; ++p)
      for (std::size_t q = 0; q < g.kw; ++q) {
        std::size_t row = ((c * g.kh + p) * g.kw + q) * ohw;
        for (std::size_t i = 0; i < g.oh; ++i) {
          auto y = std::int64_t(i * g.stride[0] + p * g.dil[0]) - std::int64_t(g.pad[0]);
          for (std::size_t j = 0; j < g.ow; ++j) {
            auto x = std::int64_t(j * g.stride[1] + q * g.dil[1]) - std::int64_t(g.pad[1]);
            bool inside = y >= 0 && y < std::int64_t(g.h) && x >= 0 && x < std::int64_t(g.w);
            f(row + i * g.ow + j,
              inside ? (std::int64_t(c * g.h) + y) * std::int64_t(g.w) + x : -1);
          }
        }
      }
}

// The patches of one image (c x h x w at img) as columns, zeros outside.
template <class T>
void im2col(T const* img, conv2d_geometry const& g, T* cols) {
  each_tap(g, [&](std::size_t k, std::int64_t px) { cols[k] = px < 0 ? T(0) : img[px]; });
}

// The adjoint of im2col: each column entry added back to the pixel it was read from.
template <class T>
void col2im(T const* cols, conv2d_geometry const& g, T* img) {
  each_tap(g, [&](std::size_t k, std::int64_t px) {
    if (px >= 0) img[px] += cols[k];
  });
}

// c (m x n) = op(a) . op(b) + beta c, row-major.
template <class T>
void conv_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T const* a,
               T const* b, T beta, T* c) {
  auto op = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
  int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, op(ta), op(tb), int(m), int(n), int(k), 1.0f, a, lda, b, ldb, beta,
                c, int(n));
  else
    cblas_dgemm(CblasRowMajor, op(ta), op(tb), int(m), int(n), int(k), 1.0, a, lda, b, ldb, beta, c,
                int(n));
}

// Part of the convolution of geometry g, for dense operands a and b of type T (float or double).
template <conv2d_part Part, class T>
void conv2d_into(T const* a, T const* b, conv2d_geometry const& g, T* out) {
  std::size_t const ckk = g.c * g.kh * g.kw, ohw = g.oh * g.ow;
  std::size_t const in_img = g.c * g.h * g.w, out_img = g.o * ohw;
  std::vector<T> cols(ckk * ohw);
  for (std::size_t n = 0; n < g.n; ++n) {
    if constexpr (Part == conv2d_part::output) {  // a = x, b = w
      im2col(a + n * in_img, g, cols.data());
      conv_gemm(false, false, g.o, ohw, ckk, b, cols.data(), T(0), out + n * out_img);
    } else if constexpr (Part == conv2d_part::input_grad) {  // a = g, b = w
      conv_gemm(true, false, ckk, ohw, g.o, b, a + n * out_img, T(0), cols.data());
      col2im(cols.data(), g, out + n * in_img);
    } else {  // a = x, b = g
      im2col(a + n * in_img, g, cols.data());
      conv_gemm(false, true, g.o, ckk, ohw, b + n * out_img, cols.data(), T(n ? 1 : 0), out);
    }
  }
}

}  // namespace detail

template <conv2d_part Part, class A, class B>
array<value_t<conv2d_node<Part, A, B>>> eval_barrier(conv2d_node<Part, A, B> const& node) {
  using R = value_t<conv2d_node<Part, A, B>>;
  using C = std::conditional_t<std::is_same_v<R, float>, float, double>;  // computed in
  array<C> a = detail::evaluate_untraced<C>(node.lhs());
  array<C> b = detail::evaluate_untraced<C>(node.rhs());
  zenith::shape s = node.shape();
  auto out = zeros<C>(s);  // input_grad adds into it; an empty batch leaves filter_grad 0
  if (s.numel() > 0 && a.size() > 0 && b.size() > 0)
    detail::conv2d_into<Part>(a.data(), b.data(), node.geometry, out.data());
  if constexpr (std::is_same_v<R, C>)
    return out;
  else
    return detail::evaluate_untraced<R>(out);
}

}  // namespace zenith
