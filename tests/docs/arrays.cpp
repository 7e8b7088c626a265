// The examples of docs/arrays.md, compiled and run by ctest as doc.arrays.
// Each `// [doc:NAME]` ... `// [/doc:NAME]` region appears verbatim in the page (doc.snippets
// checks that), and every region asserts its results, so the page cannot rot.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>
#include <zenith/zenith.hpp>
#if __has_include(<xtensor/xtensor.hpp>)
#define DOC_HAVE_XTENSOR 1
#include <xtensor/xarray.hpp>
#include <xtensor/xmath.hpp>
#include <zenith/interop/xtensor.hpp>
#endif

namespace zn = zenith;

#include "check.hpp"

// What operator<< prints.
template <class X>
std::string str(X const& x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// Whether f() throws an Err.
template <class Err, class F>
bool throws(F&& f) {
  try {
    f();
  } catch (Err const&) {
    return true;
  }
  return false;
}

template <class E>
constexpr std::string_view dtype_of(E const&) {
  return zn::dtype_name<zn::value_t<E>>();
}

void basics() {
  // [doc:arrays-basics]
  zn::array<float> m({2, 3}, {1, 2, 3, 4, 5, 6});  // shape, then row-major values
  CHECK(m.shape() == zn::shape{2, 3});
  CHECK(m.shape()[1] == 3 && m.ndim() == 2 && m.size() == 6);
  CHECK(m(1, 2) == 6.f);       // element read
  m(1, 2) = 60.f;              // element write
  CHECK(m(-1, -1) == 60.f);    // negative indices count from the end
  CHECK(m.data()[5] == 60.f);  // contiguous row-major storage
  std::cout << m << '\n';      // [[1, 2, 3],
                               //  [4, 5, 60]]

  zn::array<double> s({}, {2.5});  // rank 0: shape ()
  CHECK(s.ndim() == 0 && s.item() == 2.5);

  zn::array<float> copy = m;  // copies share the buffer (a refcounted handle)
  copy(0, 0) = -1.f;
  CHECK(m(0, 0) == -1.f);
  // [/doc:arrays-basics]
  CHECK(str(m) == "[[-1, 2, 3],\n [4, 5, 60]]");
}

void shapes() {
  // [doc:arrays-shapes]
  int rows = 2;
  std::size_t cols = 3;
  zn::shape a{rows, cols};                      // braces of any integer types
  zn::shape b(std::vector<std::size_t>{2, 3});  // or a std::vector / std::array
  CHECK(a == b && a.numel() == 6);
  CHECK(a.str() == "(2, 3)");  // NumPy style, as in every error message
  CHECK(zn::shape{7}.str() == "(7,)" && zn::shape{}.str() == "()");
  // [/doc:arrays-shapes]
}

void dtypes() {
  // [doc:arrays-dtypes]
  zn::array<float> f({3}, {1, 2, 3});
  zn::array<double> d({3}, {1, 2, 3});
  zn::array<std::int32_t> i({3}, {1, 2, 3});

  CHECK(dtype_of(f + d) == "float64");    // float with double: double
  CHECK(dtype_of(f * 2.0) == "float32");  // a C++ scalar is weak: takes the array's type
  CHECK(dtype_of(i + 2) == "int32");
  CHECK(dtype_of(i * 2.5) == "float32");  // floating scalar, integer array: float32
  CHECK(dtype_of(i / i) == "float32");    // true division
  CHECK(dtype_of(zn::exp(i)) == "float32");
  CHECK(dtype_of(f > 2.f) == "bool");  // comparisons give bool

  zn::array<zn::bfloat16> h({3}, {1, 2, 3});  // 16-bit storage, arithmetic in float
  CHECK(dtype_of(h * 2.f) == "bfloat16");
  zn::array<std::int32_t> n = zn::cast<std::int32_t>(f * 1.7f);  // explicit conversion
  CHECK(n(2) == 5);
  // [/doc:arrays-dtypes]
}

void creation() {
  // [doc:arrays-creation]
  auto z = zn::zeros<float>({2, 3});
  auto o = zn::ones<double>({4});
  auto c = zn::full<int>({2, 2}, 7);
  auto r = zn::arange<float>(5);           // [0, 1, 2, 3, 4]
  auto q = zn::arange<float>(1, 2, 0.25);  // [1, 1.25, 1.5, 1.75]
  auto l = zn::linspace<double>(0, 1, 5);  // [0, 0.25, 0.5, 0.75, 1]
  auto e = zn::eye<float>(3);              // 3 x 3 identity
  // [/doc:arrays-creation]
  CHECK(z.shape() == zn::shape{2, 3} && z(1, 2) == 0.f);
  CHECK(o.size() == 4 && o(3) == 1.0);
  CHECK(c(1, 1) == 7);
  CHECK(str(r) == "[0, 1, 2, 3, 4]");
  CHECK(str(q) == "[1, 1.25, 1.5, 1.75]");
  CHECK(str(l) == "[0, 0.25, 0.5, 0.75, 1]");
  CHECK(e(1, 1) == 1.f && e(1, 2) == 0.f);
}

void lazy() {
  // [doc:arrays-lazy]
  zn::array<float> m({2, 3}, {1, 2, 3, 4, 5, 6});
  zn::array<float> row({3}, {10, 20, 30});

  auto before = zn::cpu_memory_stats().allocations;
  auto e = zn::exp(m) * 2.f + row;  // an expression: a small struct, nothing computed
  CHECK(zn::cpu_memory_stats().allocations == before);
  CHECK(e.shape() == zn::shape{2, 3});  // its shape is known already

  zn::array<float> y = e;  // one fused pass: one allocation, for y
  CHECK(zn::cpu_memory_stats().allocations == before + 1);
  CHECK(zn::allclose(y, zn::exp(m) * 2.f + row));
  auto y2 = zn::eval(e);  // the same, spelled as a call
  // [/doc:arrays-lazy]
  CHECK(std::abs(y2(1, 2) - (2.f * std::exp(6.f) + 30.f)) < 1e-3f);
}

// [doc:arrays-no-dangling]
auto affine(zn::array<float> const& x) {
  zn::array<float> w({3}, {1, 2, 3});  // a local
  return x * w + 1.f;                  // fine: the expression holds handles to x and w
}
// [/doc:arrays-no-dangling]

void no_dangling() {
  auto e = affine(zn::ones<float>({2, 3}));  // both arrays are gone from the caller's view
  zn::array<float> y = e;
  CHECK(str(y) == "[[2, 3, 4],\n [2, 3, 4]]");
}

void assignment() {
  // [doc:arrays-assign]
  zn::array<float> a = zn::arange<float>(4);  // [0, 1, 2, 3]
  float* old = a.data();

  a = a * 2.f + 1.f;       // rebinds a; a is the sole owner, so a's buffer is reused
  CHECK(a.data() == old);  // in place, no allocation

  zn::array<float> b = a;  // b shares the buffer
  a = a * 10.f;            // rebinds a to a fresh buffer; never writes through to b
  CHECK(a(1) == 30.f && b(1) == 3.f);

  zn::array<float> c = b;    // c shares b's buffer
  zn::assign(b, b + 100.f);  // write-through: every array sharing the buffer sees it
  CHECK(c(1) == 103.f);
  zn::assign(b, zn::zeros<float>({1}));  // the expression broadcasts to b's shape
  CHECK(c(3) == 0.f);
  // [/doc:arrays-assign]
}

void expr_sees() {
  // [doc:arrays-handles]
  zn::array<float> a({2}, {1, 2});
  auto e = a + 1.f;              // e holds a handle to a's current buffer
  a = a * 3.f;                   // a is not the sole owner (e shares it): a gets a fresh buffer
  CHECK(zn::eval(e)(1) == 3.f);  // e still reads the old values
  // [/doc:arrays-handles]
  CHECK(a(1) == 6.f);
}

void pointers() {
  // [doc:arrays-pointers]
  std::vector<double> host{1, 2, 3, 4, 5, 6};

  auto c = zn::copy_from(host.data(), {2, 3});  // owns a copy
  auto v = zn::view(host.data(), {2, 3});       // zero-copy; host must outlive v
  host[0] = 42;
  CHECK(c(0, 0) == 1 && v(0, 0) == 42);

  zn::assign(v, v * 2.0);  // writes into host's memory
  CHECK(host[5] == 12);
  v = v + 1.0;  // rebinding never writes into borrowed memory: v now owns a new buffer
  CHECK(host[5] == 12 && v(1, 2) == 13);
  // [/doc:arrays-pointers]
}

void views() {
  // [doc:arrays-views]
  auto x = zn::reshape(zn::arange<float>(6), {2, 3});  // [[0, 1, 2], [3, 4, 5]]

  zn::array<float> t = zn::transpose(x);         // shape (3, 2)
  zn::array<float> r = zn::reshape(x, {3, -1});  // (3, 2); one -1 is inferred
  zn::array<float> p = zn::transpose(zn::ones<float>({2, 3, 4}), {1, 0, 2});  // (3, 2, 4)

  // Python slicing: x[:, 0:3:2], arange(5)[::-2], and x[:, 1:3] along one axis
  zn::array<float> s = zn::slice(x, {zn::range{}, zn::range{0, 3, 2}});
  zn::array<float> rev = zn::slice(zn::arange<float>(5), {zn::range{.step = -2}});
  zn::array<float> col = zn::slice(x, /*axis=*/1, 1, 3);

  zn::array<float> ed = zn::expand_dims(zn::arange<float>(3), 0);  // (1, 3)
  zn::array<float> sq = zn::squeeze(ed);                           // (3,)
  zn::array<float> bt = zn::broadcast_to(zn::arange<float>(3), {2, 3});

  zn::array<float> y = zn::transpose(x) * 2.f + 1.f;  // views fuse: still one pass
  // [/doc:arrays-views]
  CHECK(str(t) == "[[0, 3],\n [1, 4],\n [2, 5]]");
  CHECK(p.shape() == zn::shape{3, 2, 4});
  CHECK(str(r) == "[[0, 1],\n [2, 3],\n [4, 5]]");
  CHECK(str(s) == "[[0, 2],\n [3, 5]]");
  CHECK(str(rev) == "[4, 2, 0]");
  CHECK(str(col) == "[[1, 2],\n [4, 5]]");
  CHECK(ed.shape() == zn::shape{1, 3} && sq.shape() == zn::shape{3});
  CHECK(str(bt) == "[[0, 1, 2],\n [0, 1, 2]]");
  CHECK(str(y) == "[[1, 7],\n [3, 9],\n [5, 11]]");
}

void broadcasting() {
  // [doc:arrays-broadcast]
  zn::array<float> col({3, 1}, {1, 2, 3});
  zn::array<float> row({4}, {10, 20, 30, 40});
  zn::array<float> grid = col * row;  // (3, 1) with (4,) gives (3, 4)
  CHECK(grid.shape() == zn::shape{3, 4} && grid(2, 3) == 120.f);

  zn::array<float> centred = grid - zn::array<float>({}, {5});  // rank 0 broadcasts too
  CHECK(centred(0, 0) == 5.f);
  // [/doc:arrays-broadcast]
}

void elementwise() {
  // [doc:arrays-elementwise]
  zn::array<float> x({4}, {-2, -0.5, 0.5, 2});
  zn::array<float> y = zn::where(x > 0.f, zn::sqrt(zn::abs(x)), zn::square(x));
  zn::array<float> c = zn::clip(x, -1, 1);
  zn::array<float> m = zn::maximum(x, 0);  // elementwise; zn::max is a reduction
  zn::array<float> r = zn::round(x);       // half to even, as NumPy
  // [/doc:arrays-elementwise]
  CHECK(zn::allclose(y, zn::array<float>({4}, {4, 0.25f, std::sqrt(0.5f), std::sqrt(2.f)})));
  CHECK(str(c) == "[-1, -0.5, 0.5, 1]");
  CHECK(str(m) == "[0, 0, 0.5, 2]");
  CHECK(str(r) == "[-2, -0, 0, 2]");
}

void printing() {
  // [doc:arrays-printing]
  std::cout << zn::arange<float>(2000) << '\n';   // [0, 1, 2, ..., 1997, 1998, 1999]
  std::cout << zn::arange<int>(3) * 2 << '\n';    // an expression prints its values
  std::cout << (zn::arange<int>(3) > 0) << '\n';  // [false, true, true]
  std::cout << zn::shape{2, 3} << '\n';           // (2, 3)
  // [/doc:arrays-printing]
  CHECK(str(zn::arange<float>(2000)) == "[0, 1, 2, ..., 1997, 1998, 1999]");
  CHECK(str(zn::arange<int>(3) * 2) == "[0, 2, 4]");
  CHECK(str(zn::arange<int>(3) > 0) == "[false, true, true]");
}

void reductions() {
  // [doc:arrays-reductions]
  zn::array<float> x({2, 3}, {1, 2, 3, 4, 5, 6});

  zn::array<float> all = zn::sum(x);                      // all axes: shape (), 21
  zn::array<float> rows = zn::sum(x, 1);                  // one axis: [6, 15]
  zn::array<float> keep = zn::sum(x, 1, true);            // keepdims: shape (2, 1)
  zn::array<float> some = zn::mean(x, {0, 1});            // a list of axes
  zn::array<float> last = zn::max(x, -1);                 // negative axes count from the end
  zn::array<std::int64_t> am = zn::argmax(x, 0);          // int64 indices: [1, 1, 1]
  zn::array<std::int64_t> flat = zn::argmin(x);           // of the flattened array: 0
  zn::array<float> lse = zn::logsumexp(x, 1);             // stable log(sum(exp(x)))
  zn::array<float> v = zn::var(x, 1, false, /*ddof=*/1);  // NumPy's ddof
  zn::array<std::int32_t> count = zn::sum(x > 2.f);       // a sum of bools is int32

  zn::array<float> dot = zn::sum(x * x, 1);  // reads x once: no x * x temporary
  zn::array<float> z = (x - zn::mean(x, 1, true)) / zn::std(x, 1, true);  // barrier, then a pass
  // [/doc:arrays-reductions]
  CHECK(all.ndim() == 0 && all.item() == 21.f);
  CHECK(str(rows) == "[6, 15]");
  CHECK(keep.shape() == zn::shape{2, 1} && keep(1, 0) == 15.f);
  CHECK(some.item() == 3.5f);
  CHECK(str(last) == "[3, 6]");
  CHECK(str(am) == "[1, 1, 1]" && flat.item() == 0);
  CHECK(std::abs(lse(0) - std::log(std::exp(1.f) + std::exp(2.f) + std::exp(3.f))) < 1e-5f);
  CHECK(str(v) == "[1, 1]");
  CHECK(count.item() == 4);
  CHECK(str(dot) == "[14, 77]");
  float sd = std::sqrt(2.f / 3.f);
  CHECK(zn::allclose(z, zn::array<float>({2, 3}, {-1 / sd, 0, 1 / sd, -1 / sd, 0, 1 / sd})));
}

void library_ops() {
  // [doc:arrays-library-ops]
  zn::array<float> a({2, 3}, {1, 2, 3, 4, 5, 6});
  zn::array<float> v({3}, {1, 0, -1});

  zn::array<float> g = zn::matmul(a, zn::transpose(a));  // (2, 3) @ (3, 2): (2, 2)
  zn::array<float> av = zn::matmul(a, v);                // matrix @ vector: (2,)
  auto batch = zn::ones<float>({4, 2, 3});
  zn::array<float> bm = zn::matmul(batch, zn::transpose(a));  // batched: (4, 2, 2)

  zn::array<float> p = zn::softmax(a, 1);             // each row sums to 1
  zn::array<float> lp = zn::log_softmax(a * 100.f);   // last axis; stable for large inputs
  zn::array<float> ln = zn::layer_norm(a) * v + 1.f;  // rows: mean 0, variance 1; then scaled

  zn::array<float> cat = zn::concatenate({a, a}, 1);  // (2, 6)
  zn::array<float> st = zn::stack({v, v, v}, 0);      // (3, 3)

  zn::array<float> mixed = zn::concatenate(std::tuple(a, a * 2.f + 1.f), 0);  // (4, 3)

  auto image = zn::ones<float>({1, 2, 5, 5});      // (N, C, H, W)
  auto filter = zn::ones<float>({3, 2, 3, 3});     // (O, C, KH, KW)
  zn::array<float> y = zn::conv2d(image, filter);  // (1, 3, 3, 3)
  zn::array<float> y2 =
      zn::conv2d(image, filter, {.stride = {2, 2}, .padding = {1, 1}});  // (1, 3, 3, 3)
  // [/doc:arrays-library-ops]
  CHECK(str(g) == "[[14, 32],\n [32, 77]]");
  CHECK(str(av) == "[-2, -2]");
  CHECK(bm.shape() == zn::shape{4, 2, 2} && bm(3, 1, 1) == 15.f);
  CHECK(std::abs(p(0, 0) + p(0, 1) + p(0, 2) - 1) < 1e-6f && p(0, 2) > p(0, 1));
  CHECK(std::isfinite(lp(0, 0)) && std::abs(lp(0, 2)) < 1e-6f && std::abs(lp(0, 1) + 100) < 1e-3f);
  CHECK(str(cat) == "[[1, 2, 3, 1, 2, 3],\n [4, 5, 6, 4, 5, 6]]");
  CHECK(st.shape() == zn::shape{3, 3} && st(2, 2) == -1.f);
  CHECK(mixed.shape() == zn::shape{4, 3} && mixed(3, 2) == 13.f);
  CHECK(y.shape() == zn::shape{1, 3, 3, 3} && y(0, 2, 1, 1) == 18.f);   // 2 channels x 9 taps
  CHECK(y2.shape() == zn::shape{1, 3, 3, 3} && y2(0, 0, 0, 0) == 8.f);  // a corner: 2 x 2 x 2
}

void tensors() {
  // [doc:arrays-tensor]
  zn::tensor<double, 3> q{0.1, 0.2, 0.3};          // shape in the type, storage inline
  zn::tensor<double, 2, 3> m{1, 2, 3, 4, 5, 6};    // brace-initialised row-major
  static_assert(sizeof(m) == 6 * sizeof(double));  // no heap, no handle

  zn::tensor<double, 3> r = zn::sin(q) * 2.0 + q;  // unrolled straight-line code
  zn::tensor<double, 2, 3> b = m * q;              // broadcasting, checked at compile time
  zn::tensor<double, 2> s = zn::sum<1>(m);         // compile-time axes: [6, 15]
  double total = zn::sum(m);                       // rank-0 tensor<double> converts
  zn::tensor<double, 3, 2> mt = zn::transpose(m);
  zn::tensor<double, 3, 2> rs = zn::reshape<3, 2>(m);
  zn::tensor<double, 2> mq = zn::matmul(m, q);
  zn::tensor<double, 3> c = zn::cross(q, r);
  double n = zn::norm(q);

  zn::array<double> mixed = m + zn::ones<double>({2, 3});  // with an array: an array
  // [/doc:arrays-tensor]
  CHECK(std::abs(r(2) - (std::sin(0.3) * 2 + 0.3)) < 1e-15);
  CHECK(b(1, 2) == 6 * 0.3 && s(0) == 6 && s(1) == 15 && total == 21);
  CHECK(mt(2, 1) == 6 && rs(2, 1) == 6 && rs(1, 0) == 3);
  CHECK(std::abs(mq(0) - 1.4) < 1e-12);
  CHECK(std::abs(c(0) - (q(1) * r(2) - q(2) * r(1))) < 1e-15);
  CHECK(std::abs(n - std::sqrt(0.14)) < 1e-15);
  CHECK(mixed(1, 2) == 7);
}

void xtensor_interop() {
#ifdef DOC_HAVE_XTENSOR
  // [doc:arrays-xtensor]
  // #include <zenith/interop/xtensor.hpp>  (not part of <zenith/zenith.hpp>)
  zn::array<double> a({2, 2}, {1, 2, 3, 4});
  auto xa = zn::to_xtensor(a);  // xt::xarray_adaptor over a's buffer, zero-copy
  xa(0, 1) = 20;
  CHECK(a(0, 1) == 20);
  auto x2 = zn::to_xtensor<2>(a);  // rank in the type: xt::xtensor_adaptor

  xt::xarray<double> x = {{1, 2, 3}, {4, 5, 6}};
  zn::array<double> v = zn::from_xtensor(x);  // a zenith view of x's memory
  zn::assign(v, zn::exp(v));                  // zenith computes, x sees the result
  CHECK(std::abs(x(1, 2) - std::exp(6.0)) < 1e-12);
  // [/doc:arrays-xtensor]
  CHECK(x2(1, 1) == 4);
#endif
}

void errors() {
  // [doc:arrays-errors]
  zn::array<float> a = zn::ones<float>({2, 3});
  zn::array<float> b = zn::ones<float>({2});
  try {
    auto e = a + b;  // thrown here, while building the expression
  } catch (zn::shape_error const& err) {
    CHECK(std::string(err.what()) == "add: cannot broadcast shapes (2, 3) and (2,)");
  }
  try {
    a(2, 0) = 1.f;
  } catch (zn::index_error const& err) {  // every zenith error derives from zn::error
    CHECK(std::string(err.what()) == "array(): index 2 out of range for axis 0 of shape (2, 3)");
  }
  try {
    zn::array<float> bad({2, 2}, {1, 2, 3});
  } catch (zn::value_error const& err) {
    CHECK(std::string(err.what()) == "array: 3 values given for shape (2, 2) (4 elements)");
  }
  // [/doc:arrays-errors]
  CHECK(throws<zn::shape_error>([&] { auto e = a + b; }));
  CHECK(throws<zn::index_error>([&] { a(2, 0) = 1.f; }));
  CHECK(throws<zn::value_error>([] { zn::array<float> bad({2, 2}, {1, 2, 3}); }));
  CHECK(throws<zn::error>([&] { auto e = a + b; }));
}

int main() {
  basics();
  shapes();
  dtypes();
  creation();
  lazy();
  no_dangling();
  assignment();
  expr_sees();
  pointers();
  views();
  broadcasting();
  elementwise();
  printing();
  reductions();
  library_ops();
  tensors();
  xtensor_interop();
  errors();
  std::puts("doc.arrays: all examples passed");
}
