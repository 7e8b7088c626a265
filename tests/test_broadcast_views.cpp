// Broadcasting edge cases (rank 0, empty, size 1 against large) and the views (transpose,
// slice, expand_dims, squeeze, broadcast_to, reshape), of arrays and of expressions, checked
// element by element against index arithmetic, through both the xsimd and the scalar path.
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <vector>

namespace zn = zenith;
using idx_t = std::array<std::size_t, 8>;

namespace {

struct simd_guard {
  explicit simd_guard(bool on) { zn::set_simd_enabled(on); }
  ~simd_guard() { zn::set_simd_enabled(true); }
};

// An array of shape s holding 0, 1, 2, ... (exact in float), optionally scaled and offset.
template <class T = float>
zn::array<T> iota(zn::shape s, double scale = 1, double offset = 0) {
  auto a = zn::array<T>::empty(s);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(double(i) * scale + offset);
  return a;
}

// Evaluates e with the SIMD path on and off and compares every element with want(index).
template <class E>
void check(E const& e, zn::shape const& want_shape, std::function<double(idx_t const&)> want) {
  using T = zn::value_t<E>;
  for (bool simd : {true, false}) {
    simd_guard g(simd);
    zn::array<T> got = e;
    INFO((simd ? "simd" : "scalar") << " path, shape " << got.shape());
    REQUIRE(got.shape() == want_shape);
    std::size_t n = want_shape.numel(), r = want_shape.size(), bad = 0;
    idx_t idx{};
    for (std::size_t f = 0; f < n; ++f) {
      double w = want(idx), y = double(got.data()[f]);
      if (y != w && bad++ == 0) {
        std::ostringstream os;
        for (std::size_t k = 0; k < r; ++k) os << (k ? ", " : "(") << idx[k];
        UNSCOPED_INFO("first mismatch at " << os.str() << "): got " << y << ", want " << w);
      }
      for (std::size_t k = r; k-- > 0;) {
        if (++idx[k] < want_shape[k]) break;
        idx[k] = 0;
      }
    }
    CHECK(bad == 0);
  }
}

// Python's slice semantics, written out independently: the indices a[start:stop:step] visits.
std::vector<std::int64_t> py_slice(std::int64_t n, std::optional<std::int64_t> start,
                                   std::optional<std::int64_t> stop, std::int64_t step) {
  std::int64_t lo, hi;
  if (step > 0) {
    lo = start ? (*start < 0 ? std::max<std::int64_t>(*start + n, 0) : std::min(*start, n)) : 0;
    hi = stop ? (*stop < 0 ? std::max<std::int64_t>(*stop + n, 0) : std::min(*stop, n)) : n;
  } else {
    lo = start ? (*start < 0 ? std::max<std::int64_t>(*start + n, -1) : std::min(*start, n - 1))
               : n - 1;
    hi = stop ? (*stop < 0 ? std::max<std::int64_t>(*stop + n, -1) : std::min(*stop, n - 1)) : -1;
  }
  std::vector<std::int64_t> out;
  for (std::int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("broadcasting: (3,1) with (1,4), (5,1,3) with (4,1)", "[broadcast]") {
  auto a = iota({3, 1}), b = iota({1, 4}, 10);
  check(a + b, {3, 4}, [](idx_t const& i) { return double(i[0]) + 10.0 * double(i[1]); });
  check(b - a, {3, 4}, [](idx_t const& i) { return 10.0 * double(i[1]) - double(i[0]); });
  auto c = iota({5, 1, 3}), d = iota({4, 1}, 1, 1);
  check(c * d, {5, 4, 3},
        [](idx_t const& i) { return double(i[0] * 3 + i[2]) * double(i[1] + 1); });
  check(d * c, {5, 4, 3},
        [](idx_t const& i) { return double(i[0] * 3 + i[2]) * double(i[1] + 1); });
  // Three operands broadcast together.
  auto e = iota({3});
  check(zn::where(c > 4.f, d, e), {5, 4, 3}, [](idx_t const& i) {
    return double(i[0] * 3 + i[2]) > 4 ? double(i[1] + 1) : double(i[2]);
  });
  check(zn::clip(c, e, 6.f), {5, 1, 3}, [](idx_t const& i) {
    return std::min(std::max(double(i[0] * 3 + i[2]), double(i[2])), 6.0);
  });
}

TEST_CASE("the issue's example: exp(m) * 2 + row", "[broadcast]") {
  zn::array<float> m({2, 3}, {1, 2, 3, 4, 5, 6});
  zn::array<float> row({3}, {10, 20, 30});
  auto e = zn::exp(m) * 2.f + row;  // lazy: an expression, not an array
  STATIC_REQUIRE_FALSE(zn::is_array_v<decltype(e)>);
  zn::array<float> y = e;
  REQUIRE(y.shape() == zn::shape{2, 3});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      CHECK(y(i, j) == Approx(std::exp(double(i * 3 + j + 1)) * 2 + 10.0 * (j + 1)).epsilon(1e-6));
}

TEST_CASE("broadcasting: scalars, rank 0 and empty arrays", "[broadcast]") {
  auto m = iota({2, 3});
  auto r0 = zn::full<float>({}, 5.f);
  REQUIRE(r0.ndim() == 0);
  REQUIRE(r0.size() == 1);
  check(m + r0, {2, 3}, [](idx_t const& i) { return double(i[0] * 3 + i[1]) + 5; });
  check(r0 * m, {2, 3}, [](idx_t const& i) { return double(i[0] * 3 + i[1]) * 5; });
  check(3.f - m, {2, 3}, [](idx_t const& i) { return 3 - double(i[0] * 3 + i[1]); });
  // rank 0 with rank 0 (and a scalar) stays rank 0.
  zn::array<float> s = r0 * r0 + 1;
  CHECK(s.ndim() == 0);
  CHECK(s.item() == 26.f);
  CHECK(s() == 26.f);
  zn::array<float> ex = zn::exp(zn::full<float>({}, 0.f));
  CHECK(ex.item() == 1.f);

  // A zero dimension broadcasts with 1 and gives an empty result; nothing is computed.
  auto empty = zn::zeros<float>({0, 3});
  zn::array<float> e1 = empty + iota({1, 3});
  CHECK(e1.shape() == zn::shape{0, 3});
  CHECK(e1.size() == 0);
  zn::array<float> e2 = zn::exp(empty) * 2.f + zn::full<float>({}, 1.f);
  CHECK(e2.shape() == zn::shape{0, 3});
  zn::array<float> e3 = zn::zeros<float>({0}) + zn::ones<float>({1});
  CHECK(e3.shape() == zn::shape{0});
  zn::array<float> e4 = zn::zeros<float>({4, 0, 2}) * zn::ones<float>({4, 1, 1});
  CHECK(e4.shape() == zn::shape{4, 0, 2});
  zn::array<float> e5 = zn::transpose(zn::zeros<float>({2, 0}));
  CHECK(e5.shape() == zn::shape{0, 2});
  zn::array<float> e6 = zn::reshape(zn::zeros<float>({0, 3}), {-1, 6});
  CHECK(e6.shape() == zn::shape{0, 6});
  CHECK_THROWS_AS(zn::zeros<float>({0}) + zn::ones<float>({2}), zn::shape_error);
}

TEST_CASE("a size-1 array broadcast against a big one, both paths", "[broadcast]") {
  std::size_t n = 1000003;
  auto big = iota({n});
  auto one = zn::full<float>({1}, 2.f);
  check(big * one + one, {n}, [](idx_t const& i) { return double(float(i[0]) * 2.f + 2.f); });
  auto col = iota({513, 1}), row = iota({1, 1029});
  auto unit = zn::full<float>({1, 1}, 0.5f);
  check(col * unit + row, {513, 1029},
        [](idx_t const& i) { return double(float(i[0]) * 0.5f + float(i[1])); });
  check(row - col, {513, 1029}, [](idx_t const& i) { return double(i[1]) - double(i[0]); });
}

TEST_CASE("transpose: default and permutations", "[views]") {
  auto a = iota({2, 3, 4});
  check(zn::transpose(a), {4, 3, 2},
        [](idx_t const& i) { return double(i[2] * 12 + i[1] * 4 + i[0]); });
  check(zn::transpose(a, {1, 0, 2}), {3, 2, 4},
        [](idx_t const& i) { return double(i[1] * 12 + i[0] * 4 + i[2]); });
  check(zn::transpose(a, {2, 0, 1}), {4, 2, 3},
        [](idx_t const& i) { return double(i[1] * 12 + i[2] * 4 + i[0]); });
  check(zn::transpose(a, {-1, 0, -2}), {4, 2, 3},
        [](idx_t const& i) { return double(i[1] * 12 + i[2] * 4 + i[0]); });
  // 1-D and rank 0 transpose are identities.
  check(zn::transpose(iota({5})), {5}, [](idx_t const& i) { return double(i[0]); });
  zn::array<float> t0 = zn::transpose(zn::full<float>({}, 3.f));
  CHECK(t0.item() == 3.f);
  // Large, non-contiguous: the transposed read runs with strided loads on both paths.
  auto m = iota({257, 263});
  auto n = iota({263, 257}, 2);
  check(zn::transpose(m) + n, {263, 257},
        [](idx_t const& i) { return double(i[1] * 263 + i[0]) + 2.0 * double(i[0] * 257 + i[1]); });
  // Transpose of an expression, and an expression of transposes.
  check(zn::transpose(m * 2.f + 1.f), {263, 257},
        [](idx_t const& i) { return double(i[1] * 263 + i[0]) * 2 + 1; });
  check(zn::transpose(zn::transpose(m)) - m, {257, 263}, [](idx_t const&) { return 0.0; });
}

TEST_CASE("slice: negative indices and steps, clamping, empty results", "[views]") {
  using opt = std::optional<std::int64_t>;
  struct slice_case {
    opt start, stop;
    std::int64_t step;
  };
  std::int64_t const n = 10;
  auto a = iota({std::size_t(n)});
  slice_case cases[] = {
      {2, 8, 1},       {-3, {}, 1},    {{}, {}, -1},  {8, 2, -2},    {-1, -11, -3},
      {100, -100, -1}, {-100, 100, 1}, {5, 2, 1},     {0, 10, 3},    {{}, -20, 1},
      {3, 3, 1},       {{}, {}, 4},    {9, {}, -4},   {-2, {}, -1},  {1, -1, 2},
      {{}, 0, -1},     {20, {}, -1},   {-20, {}, -1}, {{}, {}, 100}, {{}, {}, -100},
  };
  for (auto const& c : cases) {
    auto want = py_slice(n, c.start, c.stop, c.step);
    zn::range r{c.start ? *c.start : zn::range::none, c.stop ? *c.stop : zn::range::none, c.step};
    INFO("a[" << (c.start ? std::to_string(*c.start) : "") << ":"
              << (c.stop ? std::to_string(*c.stop) : "") << ":" << c.step << "]");
    check(zn::slice(a, {r}), {want.size()}, [&](idx_t const& i) { return double(want[i[0]]); });
  }
  // The one-axis form, and 2-D slices with a reversed axis (both paths).
  auto m = iota({37, 41});
  check(zn::slice(m, 1, 3, -3), {37, 35},
        [](idx_t const& i) { return double(i[0] * 41 + i[1] + 3); });
  check(zn::slice(
            m, {zn::range{-5, zn::range::none}, zn::range{zn::range::none, zn::range::none, -2}}),
        {5, 21}, [](idx_t const& i) { return double((i[0] + 32) * 41 + 40 - 2 * i[1]); });
  // A slice of an expression, an expression of slices.
  check(zn::slice(zn::exp(m * 0.f) + m, 0, 10, 0, -3), {4, 41},  // rows 10, 7, 4, 1
        [](idx_t const& i) { return 1.0 + double((10 - 3 * i[0]) * 41 + i[1]); });
  check(zn::slice(m, 1, 0, 20) * zn::slice(m, 1, 21, 41), {37, 20}, [](idx_t const& i) {
    return double(float(i[0] * 41 + i[1]) * float(i[0] * 41 + i[1] + 21));
  });
  // An empty slice of a 2-D array.
  zn::array<float> e = zn::slice(m, 0, 5, 5);
  CHECK(e.shape() == zn::shape{0, 41});
}

TEST_CASE("expand_dims, squeeze and broadcast_to", "[views]") {
  auto a = iota({3, 4});
  check(zn::expand_dims(a, 0), {1, 3, 4}, [](idx_t const& i) { return double(i[1] * 4 + i[2]); });
  check(zn::expand_dims(a, 1), {3, 1, 4}, [](idx_t const& i) { return double(i[0] * 4 + i[2]); });
  check(zn::expand_dims(a, -1), {3, 4, 1}, [](idx_t const& i) { return double(i[0] * 4 + i[1]); });
  // expand_dims turns a vector into a column that broadcasts against a row.
  auto v = iota({5});
  check(zn::expand_dims(v, 1) * v, {5, 5}, [](idx_t const& i) { return double(i[0] * i[1]); });

  auto s = iota({1, 3, 1, 2});
  check(zn::squeeze(s), {3, 2}, [](idx_t const& i) { return double(i[0] * 2 + i[1]); });
  check(zn::squeeze(s, 2), {1, 3, 2}, [](idx_t const& i) { return double(i[1] * 2 + i[2]); });
  check(zn::squeeze(s, -4), {3, 1, 2}, [](idx_t const& i) { return double(i[0] * 2 + i[2]); });
  zn::array<float> one = zn::squeeze(zn::full<float>({1, 1}, 4.f));
  CHECK(one.ndim() == 0);
  CHECK(one.item() == 4.f);

  check(zn::broadcast_to(v, {3, 5}), {3, 5}, [](idx_t const& i) { return double(i[1]); });
  check(zn::broadcast_to(zn::expand_dims(v, 1), {5, 4}), {5, 4},
        [](idx_t const& i) { return double(i[0]); });
  check(zn::broadcast_to(zn::full<float>({}, 2.f), {2, 2}), {2, 2},
        [](idx_t const&) { return 2.0; });
  // A broadcast expression (not materialised) combined with a transpose.
  check(zn::broadcast_to(v * 2.f, {5, 5}) + zn::transpose(zn::broadcast_to(v, {5, 5})), {5, 5},
        [](idx_t const& i) { return 2.0 * double(i[1]) + double(i[0]); });
}

// A broadcast of a computed value that is constant along each row is computed once per row
// (backend/cpu/evaluator.hpp, row_constant_eval); these check the values on rows where it is
// constant, where it is not, and through a transpose (the strided loop). Division and sqrt are
// correctly rounded on both paths, so the expected values are exact.
TEST_CASE("broadcast of a computed value: constant rows, varying rows, strided", "[views]") {
  std::size_t n = 7, m = 37;  // rows longer than a batch, with a scalar tail
  auto col = iota({n, 1}), row = iota({1, m}, 1, 1);
  auto inv = [](std::size_t i) { return 1.f / (float(i) + 1.f); };
  check(zn::broadcast_to(1.f / (col + 1.f), {n, m}) * row, {n, m},
        [&](idx_t const& i) { return double(inv(i[0]) * float(i[1] + 1)); });
  check(zn::broadcast_to(1.f / (col + 1.f), {n, m}) + zn::broadcast_to(zn::sqrt(row), {n, m}),
        {n, m}, [&](idx_t const& i) { return double(inv(i[0]) + std::sqrt(float(i[1] + 1))); });
  check(zn::transpose(zn::broadcast_to(1.f / (col + 1.f), {n, m})) * zn::transpose(row), {m, n},
        [&](idx_t const& i) { return double(inv(i[1]) * float(i[0] + 1)); });
  // A rank-0 value reaching every element (the cotangent of a sum has this form).
  auto s = zn::full<float>({}, 4.f);
  check(iota({n, m}) * zn::broadcast_to(zn::sqrt(s) / 8.f, {n, m}), {n, m},
        [&](idx_t const& i) { return double(float(i[0] * m + i[1]) * 0.25f); });
  // Constant on some rows only: a (2, 1, m) value broadcast to (2, 3, m) varies along m.
  auto v = iota({2, 1, m});
  check(zn::broadcast_to(1.f / (v + 1.f), {2, 3, m}), {2, 3, m},
        [&](idx_t const& i) { return double(inv(i[0] * m + i[2])); });
}

TEST_CASE("reshape: -1, of a transpose (copies that leaf), of an expression", "[views]") {
  auto a = iota({2, 3, 4});
  check(zn::reshape(a, {6, 4}), {6, 4}, [](idx_t const& i) { return double(i[0] * 4 + i[1]); });
  check(zn::reshape(a, {-1}), {24}, [](idx_t const& i) { return double(i[0]); });
  check(zn::reshape(a, {4, -1}), {4, 6}, [](idx_t const& i) { return double(i[0] * 6 + i[1]); });
  check(zn::reshape(a, {2, 1, -1, 3}), {2, 1, 4, 3},
        [](idx_t const& i) { return double(i[0] * 12 + i[2] * 3 + i[3]); });
  check(zn::reshape(a, zn::shape{24, 1}), {24, 1}, [](idx_t const& i) { return double(i[0]); });
  check(zn::reshape(zn::full<float>({}, 7.f), {1, 1}), {1, 1}, [](idx_t const&) { return 7.0; });
  // The new shape as braces of any integer types (mixed too), or any range of integers.
  check(zn::reshape(a, {a.size()}), {24}, [](idx_t const& i) { return double(i[0]); });
  check(zn::reshape(a, {a.size() / 4, -1}), {6, 4},
        [](idx_t const& i) { return double(i[0] * 4 + i[1]); });
  check(zn::reshape(a, std::vector<std::size_t>{4, 6}), {4, 6},
        [](idx_t const& i) { return double(i[0] * 6 + i[1]); });
  check(zn::reshape(a, std::array<std::int64_t, 2>{-1, 12}), {2, 12},
        [](idx_t const& i) { return double(i[0] * 12 + i[1]); });
  check(zn::reshape(a, std::vector<int>{24}), {24}, [](idx_t const& i) { return double(i[0]); });
  // A transposed leaf cannot be restrided: it is copied, and the values follow the transposed
  // row-major order.
  auto m = iota({3, 4});
  check(zn::reshape(zn::transpose(m), {12}), {12},
        [](idx_t const& i) { return double((i[0] % 3) * 4 + i[0] / 3); });
  check(zn::reshape(zn::transpose(m), {2, 6}) + zn::reshape(m, {2, 6}), {2, 6}, [](idx_t const& i) {
    std::size_t f = i[0] * 6 + i[1];
    return double((f % 3) * 4 + f / 3) + double(f);
  });
  // A reshape of an expression with a broadcast leaf, and of a reversed slice.
  auto row = iota({4}, 100);
  check(zn::reshape(m + row, {6, 2}), {6, 2}, [](idx_t const& i) {
    std::size_t f = i[0] * 2 + i[1];
    return double(f) + 100.0 * double(f % 4);
  });
  check(zn::reshape(zn::slice(iota({8}), 0, zn::range::none, zn::range::none, -1), {2, 4}), {2, 4},
        [](idx_t const& i) { return double(7 - (i[0] * 4 + i[1])); });
  // A restridable view (a slice of whole rows) is not copied.
  check(zn::reshape(zn::slice(iota({6, 4}), 0, 2, 5), {3, 2, 2}), {3, 2, 2},
        [](idx_t const& i) { return double(8 + i[0] * 4 + i[1] * 2 + i[2]); });
  // Large non-contiguous reshape on both paths.
  auto big = iota({300, 200});
  check(zn::reshape(zn::transpose(big), {100, 600}) * 2.f, {100, 600}, [](idx_t const& i) {
    std::size_t f = i[0] * 600 + i[1];
    return 2.0 * double((f % 300) * 200 + f / 300);
  });
}

TEST_CASE("views compose with each other and with expressions", "[views]") {
  auto a = iota({4, 6});
  auto b = iota({6}, -1);
  // slice(transpose(expand_dims(...))) chains push into one strided read.
  check(zn::slice(zn::transpose(a + b), 0, 1, 5, 2), {2, 4},
        [](idx_t const& i) { return double(i[1] * 6 + 1 + 2 * i[0]) - double(1 + 2 * i[0]); });
  check(zn::squeeze(zn::expand_dims(zn::transpose(a), 0)) * zn::transpose(a), {6, 4},
        [](idx_t const& i) { return double(i[1] * 6 + i[0]) * double(i[1] * 6 + i[0]); });
  check(zn::broadcast_to(zn::slice(b, 0, 0, 6, 3), {4, 2}) - zn::slice(a, 1, 1, 3), {4, 2},
        [](idx_t const& i) { return -double(3 * i[1]) - double(i[0] * 6 + 1 + i[1]); });
  check(zn::reshape(zn::transpose(zn::exp(a * 0.f)), {24}) + zn::reshape(a, {24}), {24},
        [](idx_t const& i) { return 1.0 + double(i[0]); });
}

// The node protocol (expr/node.hpp): operands() and with_operands() of each node kind. Rebuilt
// over other operands, a node keeps its attributes (axes, view, shape, eps) and computes on the
// new ones: checked against the same node built directly.
TEST_CASE("every node kind exposes its operands and rebuilds over new ones", "[views][nodes]") {
  auto a = iota({2, 3}, 0.25, -0.5), b = iota({2, 3}, -0.5, 1.0), w = iota({3, 4}, 0.1);
  auto same = [](auto const& got, auto const& want) {
    using T = zn::value_t<decltype(want)>;
    zn::array<T> g = got, x = want;
    REQUIRE(g.shape() == x.shape());
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(g.data()[i] == x.data()[i]);
  };
  auto m = a * zn::exp(b);
  CHECK(&std::get<0>(m.operands()).data()[0] == &a.data()[0]);
  same(m.with_operands(b, zn::exp(a)), b * zn::exp(a));
  auto t = zn::transpose(a);
  same(t.with_operands(b), zn::transpose(b));
  auto r = zn::reshape(a, {3, 2});
  same(r.with_operands(b), zn::reshape(b, {3, 2}));
  auto s = zn::sum(a, 1, true);
  CHECK(&std::get<0>(s.operands()) == &s.child);
  same(s.with_operands(b * 2.f), zn::sum(b * 2.f, 1, true));
  same(zn::matmul(a, w).with_operands(b, w), zn::matmul(b, w));
  same(zn::softmax(a, 0).with_operands(b), zn::softmax(b, 0));
  same(zn::layer_norm(a, -1, 1e-3).with_operands(b), zn::layer_norm(b, -1, 1e-3));
  auto c = zn::concatenate(std::vector{a, b}, 1);
  CHECK(std::get<0>(c.operands()).size() == 2);
  same(c.with_operands(std::vector{b, a}), zn::concatenate(std::vector{b, a}, 1));
  auto st = zn::stack(std::tuple{a, b * 1.f}, 0);
  static_assert(std::tuple_size_v<decltype(st.operands())> == 2);
  same(st.with_operands(b, a * 1.f), zn::stack(std::tuple{b, a * 1.f}, 0));
}
