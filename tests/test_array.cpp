// The array API: construction, shapes, creation functions (NumPy semantics), element access,
// item(), printing, copy_from / view, allclose.
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace zn = zenith;

namespace {
template <class T>
std::vector<double> values(zn::array<T> const& a) {
  std::vector<double> v(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) v[i] = double(a.data()[i]);
  return v;
}
template <class X>
std::string str(X const& x) {
  std::ostringstream os;
  os << x;
  return os.str();
}
}  // namespace

TEST_CASE("construction from a shape and values", "[array]") {
  zn::array<float> a({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(a.shape() == zn::shape{2, 3});
  CHECK(a.ndim() == 2);
  CHECK(a.size() == 6);
  CHECK(a.shape().size() == 2);
  CHECK(a.shape()[0] == 2);
  CHECK(a.shape()[1] == 3);
  CHECK(a.device() == zn::cpu);
  CHECK(values(a) == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0);  // 64-byte aligned

  std::vector<double> v{1.5, 2.5, 3.5};
  zn::array<double> b({3}, v);
  CHECK(values(b) == v);
  zn::array<int> c({}, {42});  // rank 0
  CHECK(c.ndim() == 0);
  CHECK(c.size() == 1);
  CHECK(c.item() == 42);

  CHECK_THROWS_AS(zn::array<float>({2, 3}, {1, 2, 3}), zn::value_error);
  CHECK_THROWS_AS(zn::array<float>({2}, std::vector<float>{1, 2, 3}), zn::value_error);
  CHECK_THROWS_WITH(zn::array<float>({2, 3}, {1, 2}),
                    Catch::Contains("2 values") && Catch::Contains("(2, 3)"));

  // The default array is empty, of shape (0,).
  zn::array<float> e;
  CHECK(e.shape() == zn::shape{0});
  CHECK(e.size() == 0);

  // Raw pointers come in only through copy_from / view: no (shape, 0) or (ptr, shape) overload.
  STATIC_REQUIRE_FALSE(std::is_constructible_v<zn::array<float>, zn::shape, int>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<zn::array<float>, float*, zn::shape>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<zn::array<float>, zn::shape, float*>);
}

TEST_CASE("shape accepts braces of any integer type, vectors and std::array", "[array][shape]") {
  int rows = 2;
  std::size_t cols = 3;
  long depth = 4;
  unsigned short one = 1;
  zn::shape s1{2, 3};
  zn::shape s2{rows, cols};
  zn::shape s3{std::size_t(2), std::size_t(3)};
  zn::shape s4 = std::vector<std::size_t>{2, 3};
  zn::shape s5 = std::array<int, 2>{2, 3};
  zn::shape s6 = std::vector<int>{2, 3};
  zn::shape s7{cols};
  zn::shape s8{rows, cols, depth, one};
  CHECK(s1 == s2);
  CHECK(s1 == s3);
  CHECK(s1 == s4);
  CHECK(s1 == s5);
  CHECK(s1 == s6);
  CHECK(s7.size() == 1);
  CHECK(s7[0] == 3);
  CHECK(s8.numel() == 24);
  CHECK(zn::shape{}.numel() == 1);
  CHECK(zn::shape{0, 5}.numel() == 0);
  // The same in array construction and creation functions.
  CHECK(zn::zeros<float>({rows, cols}).shape() == s1);
  CHECK(zn::zeros<float>(std::vector<std::size_t>{2, 3}).shape() == s1);
  CHECK(zn::zeros<float>(std::array<long, 2>{2, 3}).shape() == s1);
  CHECK(zn::array<float>({rows, cols}, std::vector<float>(6, 1.f)).size() == 6);

  // Printing is NumPy's.
  CHECK(s1.str() == "(2, 3)");
  CHECK(s7.str() == "(3,)");
  CHECK(zn::shape{}.str() == "()");
  CHECK(str(s8) == "(2, 3, 4, 1)");

  // Negative dimensions (and unsigned wrap-arounds) are value_errors.
  int neg = -2;
  std::size_t zero = 0;
  CHECK_THROWS_AS(zn::shape({2, -1}), zn::value_error);
  CHECK_THROWS_AS(zn::shape(neg, cols), zn::value_error);
  CHECK_THROWS_AS(zn::shape(std::vector<int>{3, -4}), zn::value_error);
  CHECK_THROWS_AS(zn::shape(std::array<long, 1>{-1}), zn::value_error);
  CHECK_THROWS_AS(zn::shape{zero - 1}, zn::value_error);
  CHECK_THROWS_AS(zn::zeros<float>({rows, neg}), zn::value_error);
  CHECK_THROWS_WITH(zn::shape({2, -1}), Catch::Contains("negative"));
  CHECK_THROWS_AS(zn::shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), zn::value_error);  // rank above 8
}

TEST_CASE("creation functions follow NumPy", "[array][creation]") {
  CHECK(values(zn::zeros<float>({2, 2})) == std::vector<double>(4, 0.0));
  CHECK(values(zn::ones<int>({3})) == std::vector<double>(3, 1.0));
  CHECK(values(zn::full<double>({2}, 2.5)) == std::vector<double>{2.5, 2.5});
  CHECK(values(zn::full({3}, 7)) == std::vector<double>{7, 7, 7});
  STATIC_REQUIRE(std::is_same_v<decltype(zn::full({3}, 7)), zn::array<int>>);
  CHECK(zn::zeros<bool>({2})(1) == false);
  CHECK(float(zn::ones<zn::bfloat16>({2})(0)) == 1.f);

  // np.arange
  CHECK(values(zn::arange<float>(5)) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(values(zn::arange<int>(1, 10, 3)) == std::vector<double>{1, 4, 7});
  CHECK(values(zn::arange<int>(10, 1, -4)) == std::vector<double>{10, 6, 2});
  CHECK(zn::arange<double>(0, 1, 0.1).size() == 10);
  CHECK(zn::arange<double>(0.5).size() == 1);
  CHECK(zn::arange<double>(-3).size() == 0);
  CHECK(zn::arange<double>(5, 5).size() == 0);
  CHECK(zn::arange<double>(0, 1, -1).size() == 0);
  auto ar = zn::arange<double>(1, 0, -0.3);
  REQUIRE(ar.size() == 4);
  CHECK(ar(3) == Approx(0.1));
  CHECK_THROWS_AS(zn::arange<float>(0, 1, 0), zn::value_error);

  // np.linspace
  CHECK(values(zn::linspace<double>(0, 1, 5)) == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  CHECK(values(zn::linspace<double>(0, 1, 5, false)) ==
        std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8});
  CHECK(values(zn::linspace<double>(2, 3, 1)) == std::vector<double>{2});
  CHECK(zn::linspace<double>(2, 3, 0).size() == 0);
  CHECK(zn::linspace<float>(0, 1).size() == 50);
  CHECK(values(zn::linspace<int>(0, 10, 4)) == std::vector<double>{0, 3, 6, 10});
  CHECK(values(zn::linspace<double>(1, -1, 3)) == std::vector<double>{1, 0, -1});
  auto ls = zn::linspace<double>(0, 1, 7);
  CHECK(ls(6) == 1.0);  // the endpoint is exact

  // np.eye
  CHECK(values(zn::eye<int>(3)) == std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(zn::eye<float>(2, 3).shape() == zn::shape{2, 3});
  CHECK(values(zn::eye<float>(2, 3)) == std::vector<double>{1, 0, 0, 0, 1, 0});
  CHECK(values(zn::eye<float>(3, 3, 1)) == std::vector<double>{0, 1, 0, 0, 0, 1, 0, 0, 0});
  CHECK(values(zn::eye<float>(3, 3, -1)) == std::vector<double>{0, 0, 0, 1, 0, 0, 0, 1, 0});
  CHECK(zn::eye<float>(0).size() == 0);
  CHECK(zn::eye<float>(3, 0).shape() == zn::shape{3, 0});
}

TEST_CASE("element access reads and writes through; index errors", "[array]") {
  zn::array<float> a({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(a(0, 0) == 1);
  CHECK(a(1, 2) == 6);
  CHECK(a(-1, -1) == 6);  // negative indices count from the end
  CHECK(a(-2, 1) == 2);
  zn::array<float> shared = a;  // copies share the buffer
  a(1, 2) = 60;
  CHECK(a.data()[5] == 60);
  CHECK(shared(1, 2) == 60);
  a.data()[0] = -1;
  CHECK(shared(0, 0) == -1);
  zn::array<float> const& ca = a;
  CHECK(ca(0, 1) == 2);

  CHECK_THROWS_AS(a(2, 0), zn::index_error);
  CHECK_THROWS_AS(a(0, 3), zn::index_error);
  CHECK_THROWS_AS(a(-3, 0), zn::index_error);
  CHECK_THROWS_AS(a(0), zn::index_error);
  CHECK_THROWS_AS(a(0, 0, 0), zn::index_error);
  CHECK_THROWS_AS(ca(5, 0), zn::index_error);
  CHECK_THROWS_WITH(a(0, 3), Catch::Contains("(2, 3)"));
  CHECK_THROWS_AS(zn::zeros<float>({0})(0), zn::index_error);

  // item(): the one value of a size-1 array of any rank.
  CHECK(zn::full<float>({1, 1, 1}, 3.f).item() == 3.f);
  CHECK(zn::full<int>({}, 4).item() == 4);
  CHECK_THROWS_AS(a.item(), zn::value_error);
  CHECK_THROWS_AS(zn::zeros<float>({0}).item(), zn::value_error);
}

TEST_CASE("printing is NumPy-like", "[array][print]") {
  CHECK(str(zn::array<float>({2, 3}, {1, 2, 3, 4, 5, 6})) == "[[1, 2, 3],\n [4, 5, 6]]");
  CHECK(str(zn::array<double>({3}, {0.5, -1, 2.25})) == "[0.5, -1, 2.25]");
  CHECK(str(zn::array<int>({2, 1, 2}, {1, 2, 3, 4})) == "[[[1, 2]],\n\n [[3, 4]]]");
  CHECK(str(zn::full<float>({}, 3.5f)) == "3.5");
  CHECK(str(zn::array<bool>({2}, {true, false})) == "[true, false]");
  CHECK(str(zn::zeros<float>({0})) == "[]");
  CHECK(str(zn::zeros<float>({2, 0})) == "[]");
  // An expression prints its value.
  zn::array<float> a({2}, {1, 2});
  CHECK(str(a * 2.f + 1.f) == "[3, 5]");
  CHECK(str(a < 1.5f) == "[true, false]");
  // Large arrays are summarised with the first and last three items of each long axis.
  CHECK(str(zn::arange<int>(2000)) == "[0, 1, 2, ..., 1997, 1998, 1999]");
  std::string m = str(zn::reshape(zn::arange<int>(3000), {100, 30}));
  CHECK(m.rfind("[[0, 1, 2, ..., 27, 28, 29],\n [30, 31, 32, ..., 57, 58, 59],\n", 0) == 0);
  CHECK(m.find("89],\n ...,\n [2910, 2911, 2912, ..., 2937, 2938, 2939],\n") != std::string::npos);
  CHECK(m.ends_with("\n [2970, 2971, 2972, ..., 2997, 2998, 2999]]"));
  CHECK(m.size() < 300);
  // 1000 elements are printed in full.
  CHECK(str(zn::arange<int>(1000)).find("...") == std::string::npos);
  // The stream's formatting flags apply.
  std::ostringstream os;
  os.precision(3);
  os << zn::array<double>({2}, {3.14159, 2.71828});
  CHECK(os.str() == "[3.14, 2.72]");
}

TEST_CASE("copy_from copies, view shares the caller's memory", "[array]") {
  std::vector<float> mem{1, 2, 3, 4, 5, 6};
  auto c = zn::copy_from(mem.data(), {2, 3});
  auto v = zn::view(mem.data(), {3, 2});
  CHECK(c.shape() == zn::shape{2, 3});
  CHECK(v.shape() == zn::shape{3, 2});
  CHECK(v.data() == mem.data());
  CHECK(c.data() != mem.data());
  CHECK(values(c) == std::vector<double>{1, 2, 3, 4, 5, 6});

  // Writes through the view land in the caller's memory, and the other way round.
  v(2, 1) = 60;
  CHECK(mem[5] == 60);
  mem[0] = -1;
  CHECK(v(0, 0) == -1);
  // copy_from is independent of both.
  CHECK(c(0, 0) == 1);
  CHECK(c(1, 2) == 6);
  c(0, 1) = 20;
  CHECK(mem[1] == 2);

  // assign() writes an expression into the view, i.e. into the caller's memory...
  zn::assign(v, v * 2.f);
  CHECK(mem == std::vector<float>{-2, 4, 6, 8, 10, 120});
  // ...while `v = expr` rebinds v to a new buffer and leaves the caller's memory alone.
  v = v + 1.f;
  CHECK(v.data() != mem.data());
  CHECK(v(0, 0) == -1);
  CHECK(mem[0] == -2);
  // A const pointer can be copied from.
  std::vector<double> const cm{1, 2};
  CHECK(values(zn::copy_from(cm.data(), {2})) == std::vector<double>{1, 2});
  // Views do not free the caller's memory; zero-size copies and views are fine.
  CHECK(zn::copy_from(mem.data(), {0}).size() == 0);
}

TEST_CASE("eval and allclose", "[array]") {
  zn::array<float> a({3}, {1, 2, 3});
  auto e = zn::eval(a * 2.f);
  STATIC_REQUIRE(std::is_same_v<decltype(e), zn::array<float>>);
  CHECK(values(e) == std::vector<double>{2, 4, 6});
  CHECK(zn::eval(a).data() == a.data());  // an array evaluates to itself

  zn::array<float> b({3}, {1.f, 2.f + 1e-6f, 3.f});
  CHECK(zn::allclose(a, b));
  CHECK_FALSE(zn::allclose(a, b, 0, 0));
  CHECK(zn::allclose(a, a + 0.05f, 0, 0.051));
  CHECK_FALSE(zn::allclose(a, a + 0.05f, 0, 0.049));
  CHECK(zn::allclose(a * 2.f, e));
  CHECK(zn::allclose(zn::full<float>({2, 3}, 1.f), zn::ones<double>({3})));  // broadcasts
  zn::array<float> nan({1}, {NAN});
  CHECK_FALSE(zn::allclose(nan, nan));
  zn::array<float> inf({1}, {INFINITY});
  CHECK(zn::allclose(inf, inf));
  CHECK_THROWS_AS(zn::allclose(a, zn::ones<float>({2})), zn::shape_error);
}
