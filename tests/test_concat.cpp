// concatenate and stack against plain index loops: every axis (negative too), unequal part
// sizes, expression and view parts, 16-bit and bool types, allocation counts, errors.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

namespace {

template <class T>
zn::array<T> random_array(zn::shape s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-50, 50);
  std::vector<T> v(s.numel());
  for (auto& x : v) x = T(d(rng));
  return zn::array<T>(s, v);
}

// Row-major multi-index of flat index f in shape s.
std::vector<std::size_t> unravel(std::size_t f, zn::shape const& s) {
  std::vector<std::size_t> idx(s.size());
  for (std::size_t k = s.size(); k-- > 0;) {
    idx[k] = f % s[k];
    f /= s[k];
  }
  return idx;
}
std::size_t ravel(std::vector<std::size_t> const& idx, zn::shape const& s) {
  std::size_t f = 0;
  for (std::size_t k = 0; k < s.size(); ++k) f = f * s[k] + idx[k];
  return f;
}

// out[..., i, ...] along axis comes from the part that covers i.
template <class T>
void check_concat(zn::array<T> const& out, std::vector<zn::array<T>> const& parts,
                  std::size_t axis) {
  zn::shape s = out.shape();
  std::size_t total = 0;
  for (auto const& p : parts) total += p.shape()[axis];
  REQUIRE(s[axis] == total);
  for (std::size_t f = 0; f < out.size(); ++f) {
    auto idx = unravel(f, s);
    std::size_t p = 0;
    while (idx[axis] >= parts[p].shape()[axis]) idx[axis] -= parts[p++].shape()[axis];
    REQUIRE(double(out.data()[f]) == double(parts[p].data()[ravel(idx, parts[p].shape())]));
  }
}

// out[..., i, ...] along the new axis is part i.
template <class T>
void check_stack(zn::array<T> const& out, std::vector<zn::array<T>> const& parts,
                 std::size_t axis) {
  zn::shape s = out.shape();
  REQUIRE(s.size() == parts[0].ndim() + 1);
  REQUIRE(s[axis] == parts.size());
  for (std::size_t f = 0; f < out.size(); ++f) {
    auto idx = unravel(f, s);
    std::size_t p = idx[axis];
    idx.erase(idx.begin() + std::ptrdiff_t(axis));
    REQUIRE(double(out.data()[f]) == double(parts[p].data()[ravel(idx, parts[p].shape())]));
  }
}

}  // namespace

TEST_CASE("concatenate along every axis matches an index loop", "[concat]") {
  zn::shape base{3, 4, 5};
  for (int axis = -3; axis < 3; ++axis) {
    std::size_t a = std::size_t(axis < 0 ? axis + 3 : axis);
    std::vector<zn::array<float>> parts;
    for (std::size_t n : {2, 1, 7}) {
      zn::shape s = base;
      s[a] = n;
      parts.push_back(random_array<float>(s, unsigned(n + a)));
    }
    INFO("axis " << axis);
    zn::array<float> out = zn::concatenate(parts, axis);
    check_concat(out, parts, a);
  }
  // Brace lists, the default axis 0, an empty part, and 1-D parts.
  zn::array<int> x({2}, {1, 2}), y({3}, {3, 4, 5}), none = zn::zeros<int>({0});
  zn::array<int> xy = zn::concatenate({x, none, y});
  REQUIRE(xy.shape() == zn::shape{5});
  for (int i = 0; i < 5; ++i) CHECK(xy(i) == i + 1);
  // A single part is a copy, not the part itself.
  zn::array<int> one = zn::concatenate({x});
  one(0) = 42;
  CHECK(x(0) == 1);
}

TEST_CASE("stack along every axis matches an index loop", "[concat]") {
  zn::shape s{3, 4};
  std::vector<zn::array<double>> parts;
  for (unsigned i = 0; i < 5; ++i) parts.push_back(random_array<double>(s, 10 + i));
  for (int axis = -3; axis < 3; ++axis) {
    std::size_t a = std::size_t(axis < 0 ? axis + 3 : axis);
    INFO("axis " << axis);
    zn::array<double> out = zn::stack(parts, axis);
    REQUIRE(out.shape().size() == 3);
    check_stack(out, parts, a);
  }
  // Scalars stack into a vector.
  zn::array<float> a = zn::full<float>({}, 1.5f), b = zn::full<float>({}, -2.f);
  zn::array<float> ab = zn::stack({a, b});
  REQUIRE(ab.shape() == zn::shape{2});
  CHECK(ab(0) == 1.5f);
  CHECK(ab(1) == -2.f);
}

TEST_CASE("concatenate and stack evaluate expression parts into the output", "[concat]") {
  auto a = random_array<float>({4, 5}, 1), b = random_array<float>({4, 5}, 2);
  auto c = random_array<float>({4, 5}, 3);
  std::vector<decltype(a * 2.f + c)> exprs{a * 2.f + c, b * 2.f + c};
  zn::array<float> e0 = exprs[0], e1 = exprs[1];
  for (int axis : {0, 1, -1}) {
    std::size_t ax = std::size_t(axis < 0 ? axis + 2 : axis);
    auto before = zn::cpu_memory_stats().allocations;
    zn::array<float> cat = zn::concatenate(exprs, axis);
    CHECK(zn::cpu_memory_stats().allocations - before == 1);  // the output only
    check_concat(cat, {e0, e1}, ax);
    zn::array<float> st = zn::stack(exprs, axis);
    check_stack(st, {e0, e1}, std::size_t(axis < 0 ? axis + 3 : axis));
  }
  // View parts (transposes) and a broadcasting expression part.
  auto t = random_array<float>({5, 4}, 4);
  zn::array<float> tt = zn::transpose(t);
  zn::array<float> cat = zn::concatenate({zn::transpose(t), zn::transpose(t)}, 1);
  check_concat(cat, {tt, tt}, 1);
  zn::array<float> row({5}, {1, 2, 3, 4, 5});
  zn::array<float> ar = a + row;
  zn::array<float> sr = zn::stack({a + row, a + row}, 2);
  check_stack(sr, {ar, ar}, 2);
  // The barrier result feeds a fused expression.
  zn::array<float> twice = zn::concatenate({a, b}) * 2.f;
  for (std::size_t i = 0; i < 20; ++i) {
    CHECK(twice.data()[i] == a.data()[i] * 2.f);
    CHECK(twice.data()[20 + i] == b.data()[i] * 2.f);
  }
  // A big part takes the threaded fused loop.
  auto big = random_array<std::int32_t>({300, 257}, 5),
       small = random_array<std::int32_t>({1, 257}, 6);
  zn::array<std::int32_t> bs = zn::concatenate({big, small, big});
  check_concat(bs, {big, small, big}, 0);
}

TEST_CASE("concatenate keeps 16-bit and bool element types", "[concat]") {
  auto h = random_array<zn::bfloat16>({2, 3}, 7), g = random_array<zn::bfloat16>({2, 2}, 8);
  zn::array<zn::bfloat16> hg = zn::concatenate({h, g}, -1);
  check_concat(hg, {h, g}, 1);
  auto f = random_array<zn::float16>({3}, 9);
  zn::array<zn::float16> ff = zn::stack({f, f}, 1);
  check_stack(ff, {f, f}, 1);
  zn::array<bool> p({2}, {true, false}), q({1}, {true});
  zn::array<bool> pq = zn::concatenate({p, q});
  CHECK(pq(0) == true);
  CHECK(pq(1) == false);
  CHECK(pq(2) == true);
}

TEST_CASE("concatenate and stack errors", "[concat][errors]") {
  auto a = zn::zeros<float>({2, 3}), b = zn::zeros<float>({4, 5}), c = zn::zeros<float>({2, 3, 1});
  CHECK_THROWS_AS(zn::concatenate({a, b}), zn::shape_error);
  CHECK_THROWS_WITH(zn::concatenate({a, b}, 1), Catch::Contains("concatenate") &&
                                                    Catch::Contains("(2, 3)") &&
                                                    Catch::Contains("(4, 5)"));
  CHECK_THROWS_WITH(zn::concatenate({a, c}),
                    Catch::Contains("(2, 3)") && Catch::Contains("(2, 3, 1)"));
  CHECK_NOTHROW(zn::concatenate({a, zn::zeros<float>({2, 5})}, -1));
  CHECK_THROWS_WITH(zn::stack({a, zn::zeros<float>({2, 4})}), Catch::Contains("stack") &&
                                                                  Catch::Contains("(2, 3)") &&
                                                                  Catch::Contains("(2, 4)"));
  CHECK_THROWS_AS(zn::concatenate({a, a}, 2), zn::shape_error);
  CHECK_THROWS_AS(zn::stack({a, a}, 3), zn::shape_error);
  CHECK_THROWS_AS(zn::stack({a, a}, -4), zn::shape_error);
  CHECK_THROWS_AS(zn::concatenate(std::vector<zn::array<float>>{}), zn::value_error);
  CHECK_THROWS_AS(zn::stack(std::vector<zn::array<float>>{}), zn::value_error);
  CHECK_THROWS_AS(zn::concatenate({zn::zeros<float>({}), zn::zeros<float>({})}), zn::shape_error);
}

TEST_CASE("concatenate and stack take parts of different types in a std::tuple", "[concat]") {
  auto a = random_array<float>({2, 3}, 11);
  auto b = random_array<double>({2, 2}, 12);
  zn::array<std::int32_t> i({2, 1}, {7, -8});
  // float, double and int32 parts meet at double, as in JAX.
  auto cat = zn::concatenate(std::tuple(a, b * 0.5, i), 1);
  static_assert(std::is_same_v<zn::value_t<decltype(cat)>, double>);
  zn::array<double> c = cat;
  REQUIRE(c.shape() == zn::shape{2, 6});
  for (std::size_t r = 0; r < 2; ++r) {
    for (std::size_t k = 0; k < 3; ++k) CHECK(c(r, k) == double(a(r, k)));
    for (std::size_t k = 0; k < 2; ++k) CHECK(c(r, 3 + k) == b(r, k) * 0.5);
    CHECK(c(r, 5) == double(i(r, 0)));
  }
  // stack: an array and an expression of another type, along a new last axis.
  zn::array<float> st = zn::stack(std::tuple(a, zn::transpose(zn::transpose(a)) * 2.f + 1.f), -1);
  REQUIRE(st.shape() == zn::shape{2, 3, 2});
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(st(r, k, 0) == a(r, k));
      CHECK(st(r, k, 1) == a(r, k) * 2.f + 1.f);
    }
  CHECK_THROWS_WITH(
      zn::concatenate(std::tuple(a, zn::ones<double>({3, 3})), 1),
      Catch::Contains("concatenate") && Catch::Contains("(2, 3)") && Catch::Contains("(3, 3)"));
  CHECK_THROWS_WITH(zn::stack(std::tuple(a, b)),
                    Catch::Contains("stack") && Catch::Contains("(2, 2)"));
}
