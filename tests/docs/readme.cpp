// The examples of README.md, compiled and run by ctest as doc.readme.
// Each `// [doc:NAME]` ... `// [/doc:NAME]` region appears verbatim in README.md (doc.snippets
// checks that), and every region asserts its results, so the README cannot rot.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <zenith/zenith.hpp>

#include "check.hpp"

#include <zenith/zenith.hpp>
namespace zn = zenith;

void arrays() {
  // [doc:readme-arrays]
  zn::array<double> a({2, 2}, {1, 2, 3, 4});  // shape, then row-major values
  auto z = zn::zeros<float>({3, 4});          // also ones, full, arange, linspace, eye
  auto r = zn::arange<std::int32_t>(6);       // [0, 1, 2, 3, 4, 5]
  CHECK(a(1, 0) == 3 && a.shape() == zn::shape{2, 2} && a.ndim() == 2 && a.size() == 4);
  a(1, 0) = 30;             // element write
  zn::array<double> b = a;  // shares a's buffer (refcounted handle)
  CHECK(b(1, 0) == 30);
  CHECK(zn::eval(zn::sum(r)).item() == 15 && z.size() == 12);
  // [/doc:readme-arrays]
}

void lazy() {
  // [doc:readme-lazy]
  auto x = zn::linspace<float>(0, 1, 1000);
  auto f = zn::sqrt(x) * zn::sin(x) + zn::exp(-x);  // nothing computed, nothing allocated
  zn::array<float> y = f;                           // one pass over x: no temporaries
  y = y * 2.f + 1.f;                                // y's buffer is reused in place
  auto yz = zn::eval(zn::where(y > 3.f, y, 0.f));   // eval() spells "make it an array"
  CHECK(std::abs(y(999) - ((std::sqrt(1.f) * std::sin(1.f) + std::exp(-1.f)) * 2 + 1)) < 1e-5f);
  CHECK(yz(0) == 0.f && yz(999) == y(999));
  // [/doc:readme-lazy]
}

void broadcasting() {
  // [doc:readme-broadcast]
  zn::array<float> col({3, 1}, {1, 2, 3});
  zn::array<float> row({4}, {10, 20, 30, 40});
  zn::array<float> grid = col * row + 0.5;                 // (3, 1) and (4,) give (3, 4)
  zn::array<double> mixed = grid * zn::ones<double>({4});  // float with double: double
  CHECK(grid.shape() == zn::shape{3, 4} && grid(2, 3) == 120.5f && mixed(0, 0) == 10.5);
  // [/doc:readme-broadcast]
}

void reductions() {
  // [doc:readme-reduce]
  zn::array<float> x({2, 3}, {1, 2, 3, 4, 5, 6});
  zn::array<float> total = zn::sum(x);                   // shape (), 21
  zn::array<float> rows = zn::sum(x, 1);                 // [6, 15]
  zn::array<float> cols = zn::mean(x, 0, true);          // keepdims: [[2.5, 3.5, 4.5]]
  zn::array<float> both = zn::max(x, {0, 1});            // 6
  zn::array<std::int64_t> where_max = zn::argmax(x, 1);  // [2, 2]
  zn::array<float> centred = x - zn::mean(x, 1, true);   // reduction, then one fused pass
  zn::array<float> spread = zn::std(x, 1, false, /*ddof=*/1);
  CHECK(total.item() == 21 && rows(1) == 15 && cols.shape() == zn::shape{1, 3});
  CHECK(both.item() == 6 && where_max(0) == 2 && centred(1, 0) == -1 && spread(0) == 1);
  // [/doc:readme-reduce]
}

void views() {
  // [doc:readme-views]
  zn::array<float> x = zn::reshape(zn::arange<float>(6), {2, 3});
  zn::array<float> t = zn::transpose(x);                              // (3, 2), no copy
  zn::array<float> s = zn::slice(x, {zn::range{}, zn::range{1, 3}});  // x[:, 1:3]
  zn::array<float> e = zn::expand_dims(zn::squeeze(x), 0);            // (1, 2, 3)
  zn::array<float> x10 = x * 10.f;
  zn::array<float> c = zn::concatenate({x, x10}, 0);  // (4, 3)
  zn::array<float> st = zn::stack({x, x}, 0);         // (2, 2, 3)
  CHECK(t(2, 1) == 5 && s(1, 0) == 4 && e.shape() == zn::shape{1, 2, 3});
  CHECK(c(3, 2) == 50 && st.shape() == zn::shape{2, 2, 3});
  // [/doc:readme-views]
}

void library_ops() {
  // [doc:readme-matmul]
  auto x = zn::reshape(zn::linspace<float>(-1, 1, 6), {2, 3});
  auto w = zn::ones<float>({3, 4});
  zn::array<float> h = zn::tanh(zn::matmul(x, w)) * 2.f + 1.f;  // BLAS GEMM, then one pass
  zn::array<float> p = zn::softmax(h, -1);                      // stable along the last axis
  zn::array<float> lp = zn::log_softmax(h, -1);
  CHECK(h.shape() == zn::shape{2, 4} && std::abs(zn::eval(zn::sum(p, 1))(0) - 1) < 1e-6f);
  CHECK(zn::allclose(zn::exp(lp), p));
  // [/doc:readme-matmul]
}

void tensors() {
  // [doc:readme-tensor]
  zn::tensor<double, 3> q{0.1, 0.2, 0.3};          // fixed size, inline storage, no heap
  zn::tensor<double, 3> r = zn::sin(q) * 2.0 + q;  // unrolled at compile time
  zn::tensor<double, 3, 3> m = zn::tensor<double, 3, 3>::identity();
  zn::tensor<double, 3> mr = zn::matmul(m, r);
  double total = zn::sum(r);  // a rank-0 tensor converts to double
  zn::tensor<double, 3, 1> colv = zn::reshape<3, 1>(r);
  CHECK(std::abs(r(0) - (std::sin(0.1) * 2 + 0.1)) < 1e-15 && mr(2) == r(2));
  CHECK(std::abs(total - (r(0) + r(1) + r(2))) < 1e-15 && colv(2, 0) == r(2));
  // [/doc:readme-tensor]
}

void errors() {
  // [doc:readme-errors]
  try {
    auto bad = zn::ones<float>({2, 3}) + zn::ones<float>({3, 2});
  } catch (zn::shape_error const& e) {  // thrown while building the expression
    CHECK(std::string(e.what()) == "add: cannot broadcast shapes (2, 3) and (3, 2)");
  }
  // zn::tensor<double, 3>{} + zn::tensor<double, 2>{};  does not compile:
  //   "zenith: fixed-size shapes do not broadcast (each axis must match or be 1)"
  // [/doc:readme-errors]
  bool threw = false;
  try {
    auto bad = zn::ones<float>({2, 3}) + zn::ones<float>({3, 2});
  } catch (zn::shape_error const&) {
    threw = true;
  }
  CHECK(threw);
}

int main() {
  arrays();
  lazy();
  broadcasting();
  reductions();
  views();
  library_ops();
  tensors();
  errors();
  std::puts("doc.readme: all examples passed");
}
