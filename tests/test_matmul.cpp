// matmul against a plain double-precision loop: 2-D, batched with broadcasting, 1-D operands,
// transposed and sliced operands (BLAS in place), expression operands, every element type,
// errors, and matmul as a barrier inside a bigger fused expression.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

namespace {

template <class T>
zn::array<T> random_array(zn::shape s, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(s.numel());
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int> d(-9, 9);
    for (auto& x : v) x = T(d(rng));
  } else {
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (auto& x : v) x = T(d(rng));
  }
  return zn::array<T>(s, v);
}

template <class T>
std::vector<double> values(zn::array<T> const& a) {
  std::vector<double> v(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) v[i] = double(a.data()[i]);
  return v;
}

// numpy.matmul on row-major double data, written out with explicit multi-indices.
struct ref_result {
  std::vector<double> v;
  zn::shape s;
};
ref_result ref_matmul(std::vector<double> const& A, zn::shape a, std::vector<double> const& B,
                      zn::shape b) {
  bool av = a.size() == 1, bv = b.size() == 1;
  std::vector<std::size_t> as = a.to_vector(), bs = b.to_vector();
  if (av) as.insert(as.begin(), 1);
  if (bv) bs.push_back(1);
  std::size_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  std::vector<std::size_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  std::size_t r = std::max(ab.size(), bb.size());
  ab.insert(ab.begin(), r - ab.size(), 1);
  bb.insert(bb.begin(), r - bb.size(), 1);
  std::vector<std::size_t> batch(r);
  for (std::size_t i = 0; i < r; ++i) batch[i] = std::max(ab[i], bb[i]);
  std::size_t nb = 1;
  for (auto d : batch) nb *= d;
  ref_result out;
  out.v.assign(nb * m * n, 0.0);
  for (std::size_t t = 0; t < nb; ++t) {
    // batch multi-index of t, then flat batch index into a and b (size-1 dims broadcast)
    std::size_t rem = t, ia = 0, ib = 0, mula = 1, mulb = 1;
    for (std::size_t d = r; d-- > 0;) {
      std::size_t idx = rem % batch[d];
      rem /= batch[d];
      ia += (ab[d] == 1 ? 0 : idx) * mula;
      ib += (bb[d] == 1 ? 0 : idx) * mulb;
      mula *= ab[d];
      mulb *= bb[d];
    }
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double acc = 0;
        for (std::size_t q = 0; q < k; ++q)
          acc += A[ia * m * k + i * k + q] * B[ib * k * n + q * n + j];
        out.v[t * m * n + i * n + j] = acc;
      }
  }
  for (auto d : batch) out.s.push_back(d);
  if (!av) out.s.push_back(m);
  if (!bv) out.s.push_back(n);
  return out;
}

template <class T>
void check_close(zn::array<T> const& got, ref_result const& want, double tol) {
  REQUIRE(got.shape() == want.s);
  REQUIRE(got.size() == want.v.size());
  for (std::size_t i = 0; i < want.v.size(); ++i)
    REQUIRE(double(got.data()[i]) == Approx(want.v[i]).margin(tol).epsilon(tol));
}

template <class T>
void check_case(zn::shape sa, zn::shape sb, double tol, unsigned seed = 1) {
  auto a = random_array<T>(sa, seed), b = random_array<T>(sb, seed + 100);
  zn::array<T> c = zn::matmul(a, b);
  INFO(sa.str() << " . " << sb.str());
  check_close(c, ref_matmul(values(a), sa, values(b), sb), tol);
}

}  // namespace

TEST_CASE("matmul of 2-D, batched and 1-D operands matches a double loop", "[matmul]") {
  std::vector<std::pair<zn::shape, zn::shape>> cases = {{{1, 1}, {1, 1}},
                                                        {{7, 13}, {13, 5}},
                                                        {{3, 7, 13}, {13, 5}},
                                                        {{2, 1, 4, 3}, {5, 3, 6}},
                                                        {{13}, {13}},
                                                        {{7, 13}, {13}},
                                                        {{13}, {13, 5}},
                                                        {{3, 7, 13}, {13}},
                                                        {{13}, {3, 13, 5}},
                                                        {{1, 13}, {13, 1}},
                                                        {{4, 1, 13}, {13, 9}},
                                                        {{13, 7}, {2, 7, 3}},
                                                        {{1, 7}, {3, 7, 1}},
                                                        {{40, 33}, {33, 29}},
                                                        {{3, 7, 13}, {3, 13, 5}},
                                                        {{2, 3, 4, 5}, {2, 3, 5, 6}},
                                                        {{3, 1, 13}, {3, 13, 1}}};
  for (auto const& [sa, sb] : cases) {
    check_case<float>(sa, sb, 1e-5);
    check_case<double>(sa, sb, 1e-12);
    check_case<std::int32_t>(sa, sb, 0);
    check_case<std::int64_t>(sa, sb, 0);
  }
}

TEST_CASE("matmul shapes follow numpy", "[matmul]") {
  auto s = [](zn::shape a, zn::shape b) {
    return zn::matmul(zn::zeros<float>(a), zn::zeros<float>(b)).shape();
  };
  CHECK(s({13}, {13}) == zn::shape{});
  CHECK(s({7, 13}, {13}) == zn::shape{7});
  CHECK(s({13}, {13, 5}) == zn::shape{5});
  CHECK(s({2, 1, 4, 3}, {5, 3, 6}) == zn::shape{2, 5, 4, 6});
  CHECK(s({3, 0}, {0, 4}) == zn::shape{3, 4});
  // Empty contraction gives zeros; empty rows give an empty result.
  zn::array<float> z = zn::matmul(zn::ones<float>({3, 0}), zn::ones<float>({0, 4}));
  for (std::size_t i = 0; i < z.size(); ++i) CHECK(z.data()[i] == 0.f);
  zn::array<std::int32_t> zi =
      zn::matmul(zn::ones<std::int32_t>({2, 0}), zn::ones<std::int32_t>({0, 2}));
  for (std::size_t i = 0; i < zi.size(); ++i) CHECK(zi.data()[i] == 0);
  zn::array<double> e = zn::matmul(zn::ones<double>({0, 3}), zn::ones<double>({3, 4}));
  CHECK(e.shape() == zn::shape{0, 4});
}

TEST_CASE("matmul reads transposed and sliced operands in place", "[matmul]") {
  auto at = random_array<float>({13, 7}, 3);  // used as at^T: (7, 13)
  auto bt = random_array<float>({5, 13}, 4);  // used as bt^T: (13, 5)
  auto a = random_array<float>({7, 13}, 5);
  auto b = random_array<float>({13, 5}, 6);
  auto v = random_array<float>({13}, 7);
  auto tr = [](zn::array<float> const& x) {  // an explicit transposed copy for the reference
    zn::array<float> y = zn::transpose(x);
    return y;
  };
  auto count = [](auto const& expr) {
    auto before = zn::cpu_memory_stats().allocations;
    zn::array<float> c = expr;
    return std::pair{c, zn::cpu_memory_stats().allocations - before};
  };
  struct one {
    zn::array<float> got;
    std::size_t allocs;
    ref_result want;
  };
  std::vector<one> cases;
  auto add = [&](auto const& expr, zn::array<float> const& x, zn::array<float> const& y) {
    auto [c, n] = count(expr);
    cases.push_back({c, n, ref_matmul(values(x), x.shape(), values(y), y.shape())});
  };
  add(zn::matmul(zn::transpose(at), b), tr(at), b);
  add(zn::matmul(a, zn::transpose(bt)), a, tr(bt));
  add(zn::matmul(zn::transpose(at), zn::transpose(bt)), tr(at), tr(bt));
  add(zn::matmul(zn::transpose(at), v), tr(at), v);  // gemv, transposed matrix
  add(zn::matmul(v, zn::transpose(bt)), v, tr(bt));  // vector . transposed matrix
  add(zn::matmul(v, b), v, b);                       // vector . matrix
  for (auto const& c : cases) {
    check_close(c.got, c.want, 1e-5);
    CHECK(c.allocs == 1);  // the result only: no copy of an operand
  }

  // Batched, transposing the last two axes of a 3-D array.
  auto x = random_array<double>({3, 13, 7}, 8);
  auto w = random_array<double>({3, 13, 5}, 9);
  zn::array<double> xt = zn::transpose(x, {0, 2, 1});
  zn::array<double> c = zn::matmul(zn::transpose(x, {0, 2, 1}), w);
  check_close(c, ref_matmul(values(xt), xt.shape(), values(w), w.shape()), 1e-12);

  // Strided vectors (step 2) go to gemv / gemm through their increments; a broadcast row
  // (stride 0) is copied first.
  auto v26 = random_array<float>({26}, 25);
  zn::array<float> vs = zn::slice(v26, 0, 0, 26, 2);
  auto [c1, n1] = count(zn::matmul(a, zn::slice(v26, 0, 0, 26, 2)));
  check_close(c1, ref_matmul(values(a), a.shape(), values(vs), vs.shape()), 1e-5);
  auto [c2, n2] = count(zn::matmul(zn::slice(v26, 0, 0, 26, 2), b));
  check_close(c2, ref_matmul(values(vs), vs.shape(), values(b), b.shape()), 1e-5);
  auto [c3, n3] = count(zn::matmul(zn::slice(v26, 0, 0, 26, 2), zn::slice(v26, 0, 1, 26, 2)));
  zn::array<float> vo = zn::slice(v26, 0, 1, 26, 2);
  check_close(c3, ref_matmul(values(vs), vs.shape(), values(vo), vo.shape()), 1e-5);
  CHECK(n1 + n2 + n3 == 3);
  zn::array<float> vb = zn::broadcast_to(v, {7, 13});
  zn::array<float> cb = zn::matmul(zn::broadcast_to(v, {7, 13}), b);
  check_close(cb, ref_matmul(values(vb), vb.shape(), values(b), b.shape()), 1e-5);

  // A column slice with step 2 is not a BLAS layout: copied, still right.
  auto wide = random_array<float>({7, 26}, 10);
  zn::array<float> sl = zn::slice(wide, 1, 0, 26, 2);
  zn::array<float> cs = zn::matmul(zn::slice(wide, 1, 0, 26, 2), b);
  check_close(cs, ref_matmul(values(sl), sl.shape(), values(b), b.shape()), 1e-5);
  // A row slice keeps unit column stride: in place with a leading dimension of 26.
  zn::array<float> rows = zn::slice(wide, 0, 1, 6);
  auto b26 = random_array<float>({26, 4}, 11);
  auto [cr, nr] = count(zn::matmul(zn::slice(wide, 0, 1, 6), b26));
  check_close(cr, ref_matmul(values(rows), rows.shape(), values(b26), b26.shape()), 1e-5);
  CHECK(nr == 1);
}

TEST_CASE("matmul of a broadcast operand is one matrix-vector product, copied", "[matmul]") {
  // A left operand whose rows are all the same, or a right one whose columns are (a stride-0
  // broadcast: the cotangent of sum(A B) is one), takes one GEMV and copies its result; the
  // broadcast is never materialised.
  auto count = [](auto const& expr) {
    auto before = zn::cpu_memory_stats().allocations;
    zn::array<double> c = expr;
    return std::pair{c, zn::cpu_memory_stats().allocations - before};
  };
  auto row = random_array<double>({1, 13}, 41), col = random_array<double>({13, 1}, 42);
  auto a = random_array<double>({7, 13}, 43), b = random_array<double>({13, 5}, 44);
  auto dense = [](auto const& e) {
    zn::array<double> d = e;
    return d;
  };
  auto check = [&](auto const& expr, zn::array<double> const& x, zn::array<double> const& y,
                   std::size_t allocs) {
    auto [c, n] = count(expr);
    check_close(c, ref_matmul(values(x), x.shape(), values(y), y.shape()), 1e-12);
    CHECK(n == allocs);
  };
  auto rows = zn::broadcast_to(row, {7, 13});
  auto cols = zn::broadcast_to(col, {13, 5});
  check(zn::matmul(rows, b), dense(rows), b, 1);           // same rows on the left
  check(zn::matmul(a, cols), a, dense(cols), 1);           // same columns on the right
  check(zn::matmul(rows, zn::broadcast_to(col, {13, 7})),  // both: the right one is gathered
        dense(rows), dense(zn::broadcast_to(col, {13, 7})), 2);
  check(zn::matmul(zn::transpose(b), zn::broadcast_to(col, {13, 3})), dense(zn::transpose(b)),
        dense(zn::broadcast_to(col, {13, 3})), 1);  // a transposed left operand
  // A broadcast of an expression: only its source is evaluated (one rank-0 buffer).
  auto s0 = random_array<double>({}, 45);
  auto spread = zn::broadcast_to(s0 * 2.0 + 1.0, {7, 13});
  check(zn::matmul(spread, b), dense(spread), b, 2);
  check(zn::matmul(a, zn::broadcast_to(s0 * 2.0 + 1.0, {13, 4})), a,
        dense(zn::broadcast_to(s0 * 2.0 + 1.0, {13, 4})), 2);
  // Batched: rows repeated within each batch, batches different; and float.
  auto brow = random_array<double>({3, 1, 13}, 46);
  auto bl = zn::broadcast_to(brow, {3, 6, 13});
  check(zn::matmul(bl, b), dense(bl), b, 1);
  auto bcol = random_array<double>({2, 13, 1}, 47);
  auto br = zn::broadcast_to(bcol, {2, 13, 4});
  check(zn::matmul(a, br), a, dense(br), 1);
  auto rowf = random_array<float>({13}, 48);
  auto bf = random_array<float>({13, 5}, 49);
  zn::array<float> rf = zn::broadcast_to(rowf, {4, 13});
  zn::array<float> cf = zn::matmul(zn::broadcast_to(rowf, {4, 13}), bf);
  check_close(cf, ref_matmul(values(rf), rf.shape(), values(bf), bf.shape()), 1e-5);
}

TEST_CASE("matmul evaluates an expression operand first", "[matmul]") {
  auto a = random_array<float>({7, 13}, 12);
  auto b = random_array<float>({13, 5}, 13);
  zn::array<float> a2 = a * 2.f + 1.f;
  zn::array<float> c = zn::matmul(a * 2.f + 1.f, b);
  check_close(c, ref_matmul(values(a2), a2.shape(), values(b), b.shape()), 1e-5);
  // A barrier operand: a matmul of a matmul.
  auto d = random_array<float>({5, 3}, 14);
  zn::array<float> cd = zn::matmul(zn::matmul(a, b), d);
  zn::array<float> ab = zn::matmul(a, b);
  check_close(cd, ref_matmul(values(ab), ab.shape(), values(d), d.shape()), 1e-5);
}

TEST_CASE("matmul element types: promotion, bfloat16, float16, bool, big integers", "[matmul]") {
  auto ai = random_array<std::int32_t>({7, 13}, 15);
  auto bf = random_array<float>({13, 5}, 16);
  auto c = zn::matmul(ai, bf);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(c)>, float>);
  check_close(zn::eval(c), ref_matmul(values(ai), ai.shape(), values(bf), bf.shape()), 1e-5);
  auto bd = random_array<double>({13, 5}, 17);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::matmul(bf, zn::transpose(bd)))>, double>);

  // bfloat16 / float16: float GEMM on the exactly converted values, one rounding at the end.
  auto check_half = [](auto tag, double tol) {
    using H = decltype(tag);
    auto a = random_array<H>({3, 7, 13}, 18), b = random_array<H>({13, 5}, 19);
    zn::array<H> c = zn::matmul(a, b);
    STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::matmul(a, b))>, H>);
    check_close(c, ref_matmul(values(a), a.shape(), values(b), b.shape()), tol);
  };
  check_half(zn::bfloat16{}, 1e-2);
  check_half(zn::float16{}, 2e-3);

  zn::array<bool> p({2, 3}, {true, false, false, false, false, false});
  zn::array<bool> q({3, 2}, {true, false, true, true, false, false});
  zn::array<bool> pq = zn::matmul(p, q);
  CHECK(pq(0, 0) == true);
  CHECK(pq(0, 1) == false);
  CHECK(pq(1, 0) == false);

  // Large enough to split rows across the thread pool; integers are exact.
  check_case<std::int32_t>({2, 64, 65}, {65, 70}, 0, 20);
  // int32 wraps like NumPy (no undefined behaviour).
  zn::array<std::int32_t> big({1, 2}, {2147483647, 1});
  zn::array<std::int32_t> two({2, 1}, {2, 0});
  zn::array<std::int32_t> w = zn::matmul(big, two);
  CHECK(w(0, 0) == -2);
}

TEST_CASE("matmul shape errors name the op and both shapes", "[matmul][errors]") {
  auto a = zn::zeros<float>({2, 3}), b = zn::zeros<float>({4, 5});
  CHECK_THROWS_AS(zn::matmul(a, b), zn::shape_error);
  CHECK_THROWS_WITH(zn::matmul(a, b), Catch::Contains("matmul") && Catch::Contains("(2, 3)") &&
                                          Catch::Contains("(4, 5)"));
  auto x = zn::zeros<float>({2, 3, 4}), y = zn::zeros<float>({5, 4, 2});
  CHECK_THROWS_WITH(zn::matmul(x, y), Catch::Contains("batch") && Catch::Contains("(2, 3, 4)") &&
                                          Catch::Contains("(5, 4, 2)"));
  auto s = zn::zeros<float>({});
  CHECK_THROWS_AS(zn::matmul(s, a), zn::shape_error);
  CHECK_THROWS_WITH(zn::matmul(zn::zeros<float>({3}), zn::zeros<float>({4})),
                    Catch::Contains("(3,)") && Catch::Contains("(4,)"));
}

TEST_CASE("matmul inside a bigger expression is one GEMM then one fused pass", "[matmul]") {
  auto x = random_array<float>({9, 13}, 21), w = random_array<float>({13, 11}, 22);
  zn::array<float> separate = zn::matmul(x, w);
  zn::array<float> want = zn::tanh(separate) * 2.f + 1.f;
  auto before = zn::cpu_memory_stats().allocations;
  zn::array<float> got = zn::tanh(zn::matmul(x, w)) * 2.f + 1.f;
  CHECK(zn::cpu_memory_stats().allocations - before == 2);  // the GEMM's buffer and the result
  REQUIRE(got.shape() == zn::shape{9, 11});
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got.data()[i] == want.data()[i]);
    double acc = 0;
    for (std::size_t q = 0; q < 13; ++q)
      acc += double(x.data()[i / 11 * 13 + q]) * double(w.data()[q * 11 + i % 11]);
    CHECK(got.data()[i] == Approx(std::tanh(acc) * 2 + 1).epsilon(1e-5).margin(1e-5));
  }
  // The expression holds its operands: returned from a function, it does not dangle.
  auto make = [] {
    auto a = random_array<float>({4, 3}, 23), b = random_array<float>({3, 2}, 24);
    return zn::matmul(a, b) + 1.f;
  };
  auto e = make();
  zn::array<float> r = e;
  auto a = random_array<float>({4, 3}, 23), b = random_array<float>({3, 2}, 24);
  auto ref = ref_matmul(values(a), a.shape(), values(b), b.shape());
  for (auto& v : ref.v) v += 1;
  check_close(r, ref, 1e-5);
}
