// Errors are thrown when an expression is built, as the right zenith::error subclass, with a
// one-line message naming the op and the shapes.
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <string>
#include <type_traits>

namespace zn = zenith;

namespace {

template <class A, class B>
concept can_maximum = requires(A a, B b) {
  zn::maximum(a, b);
};
template <class A>
concept can_exp = requires(A a) {
  zn::exp(a);
};

// The message of the zenith::error that f throws ("" if none).
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (zn::error const& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the error hierarchy", "[errors]") {
  STATIC_REQUIRE(std::is_base_of_v<std::runtime_error, zn::error>);
  STATIC_REQUIRE(std::is_base_of_v<zn::error, zn::shape_error>);
  STATIC_REQUIRE(std::is_base_of_v<zn::error, zn::dtype_error>);
  STATIC_REQUIRE(std::is_base_of_v<zn::error, zn::index_error>);
  STATIC_REQUIRE(std::is_base_of_v<zn::error, zn::value_error>);
  // With an expression, the elementwise functions build expressions; on plain numbers they are
  // scalar math (expr/scalar_math.hpp), so generic code may call zn::exp on what it holds.
  STATIC_REQUIRE(can_maximum<zn::array<float>, double>);
  STATIC_REQUIRE(can_maximum<int, zn::array<float>>);
  STATIC_REQUIRE(can_maximum<float, double>);
  STATIC_REQUIRE(can_exp<double>);
  STATIC_REQUIRE(std::is_same_v<decltype(zn::maximum(1.f, 2.0)), double>);
  CHECK(zn::maximum(1.f, 2.0) == 2.0);
}

TEST_CASE("a shape mismatch throws when the expression is built", "[errors]") {
  zn::array<float> a = zn::zeros<float>({2, 3});
  zn::array<float> b = zn::zeros<float>({4});
  CHECK(message_of([&] { (void)(a + b); }) == "add: cannot broadcast shapes (2, 3) and (4,)");
  CHECK(message_of([&] { (void)(b * a); }) == "mul: cannot broadcast shapes (4,) and (2, 3)");
  CHECK_THROWS_AS(a - b, zn::shape_error);
  CHECK_THROWS_AS(a / b, zn::shape_error);
  CHECK_THROWS_AS(a < b, zn::shape_error);
  CHECK_THROWS_AS(zn::maximum(a, b), zn::shape_error);
  CHECK_THROWS_WITH(zn::pow(a, b), Catch::StartsWith("pow:"));
  CHECK_THROWS_WITH(zn::atan2(a, b), Catch::StartsWith("atan2:"));
  CHECK_THROWS_WITH(zn::where(a > 0.f, a, b), Catch::Contains("(2, 3) and (4,)"));
  CHECK_THROWS_WITH(zn::clip(a, b, 1.f), Catch::Contains("(2, 3) and (4,)"));
  // Deep in an expression: the op that fails is named, with the shapes that meet there.
  auto ok = zn::exp(a) * 2.f;
  CHECK(message_of([&] { (void)(ok + zn::sin(b)); }) ==
        "add: cannot broadcast shapes (2, 3) and (4,)");
  CHECK(message_of([&] {
          (void)(zn::zeros<float>({5, 1, 3}) + zn::zeros<float>({4, 2}));
        }) == "add: cannot broadcast shapes (5, 1, 3) and (4, 2)");
  // Rank 0 and empty shapes print as NumPy does.
  CHECK(message_of([&] { (void)(zn::zeros<float>({0}) + b); }) ==
        "add: cannot broadcast shapes (0,) and (4,)");
  // Nothing is thrown for shapes that do broadcast.
  CHECK_NOTHROW(a + zn::zeros<float>({3}));
  CHECK_NOTHROW(a + zn::full<float>({}, 1.f));
}

TEST_CASE("bad axes and view arguments", "[errors]") {
  auto a = zn::zeros<float>({2, 3, 4});
  CHECK_THROWS_AS(zn::transpose(a, {0, 1}), zn::shape_error);
  CHECK_THROWS_AS(zn::transpose(a, {0, 1, 1}), zn::shape_error);
  CHECK_THROWS_AS(zn::transpose(a, {0, 1, 3}), zn::shape_error);
  CHECK_THROWS_AS(zn::transpose(a, {0, 1, -4}), zn::shape_error);
  CHECK_THROWS_WITH(zn::transpose(a, {0, 1, 1}), Catch::Contains("(2, 3, 4)"));
  CHECK_THROWS_AS(zn::expand_dims(a, 4), zn::shape_error);
  CHECK_THROWS_AS(zn::expand_dims(a, -5), zn::shape_error);
  CHECK_NOTHROW(zn::expand_dims(a, 3));
  CHECK_NOTHROW(zn::expand_dims(a, -4));
  CHECK_THROWS_AS(zn::squeeze(a, 0), zn::shape_error);  // size 2, not 1
  CHECK_THROWS_WITH(zn::squeeze(a, 1), Catch::Contains("(2, 3, 4)"));
  CHECK_THROWS_AS(zn::squeeze(a, 3), zn::shape_error);
  CHECK_THROWS_AS(zn::broadcast_to(a, {3, 4}), zn::shape_error);
  CHECK_THROWS_AS(zn::broadcast_to(a, {2, 5, 4}), zn::shape_error);
  CHECK_THROWS_WITH(zn::broadcast_to(a, {2, 5, 4}),
                    Catch::Contains("(2, 3, 4)") && Catch::Contains("(2, 5, 4)"));
  CHECK_THROWS_AS(zn::slice(a, 3, 0, 1), zn::shape_error);
  CHECK_THROWS_AS(zn::slice(a, {zn::range{}, zn::range{}, zn::range{}, zn::range{}}),
                  zn::shape_error);
  // A zero step is a bad value, not a bad shape.
  CHECK_THROWS_AS(zn::slice(a, 1, 0, 3, 0), zn::value_error);
  CHECK_THROWS_AS(zn::slice(a, {zn::range{0, 1, 0}}), zn::value_error);
  CHECK_THROWS_WITH(zn::slice(a, 1, 0, 3, 0), Catch::Contains("step 0"));
}

TEST_CASE("bad reshapes", "[errors]") {
  auto a = zn::zeros<float>({2, 3});
  CHECK_THROWS_AS(zn::reshape(a, {4, 2}), zn::shape_error);
  CHECK_THROWS_WITH(zn::reshape(a, {4, 2}), Catch::Contains("(2, 3)") && Catch::Contains("(4, 2)"));
  CHECK_THROWS_AS(zn::reshape(a, {-1, -1}), zn::shape_error);
  CHECK_THROWS_AS(zn::reshape(a, {4, -1}), zn::shape_error);
  CHECK_THROWS_AS(zn::reshape(a, {-2, 3}), zn::value_error);
  CHECK_THROWS_AS(zn::reshape(zn::zeros<float>({0, 3}), {0, -1}), zn::shape_error);
  CHECK_NOTHROW(zn::reshape(a, {3, -1}));
  CHECK_THROWS_AS(zn::reshape(a, std::vector<long>{-3, 2}), zn::value_error);
  CHECK_THROWS_WITH(zn::reshape(a, {~std::size_t(0), std::size_t(1)}),
                    Catch::Contains("reshape") && Catch::Contains("too large"));
  // Errors in an expression's view are thrown when the view is built, before any evaluation.
  CHECK_THROWS_AS(zn::reshape(a + 1.f, {5}), zn::shape_error);
}

TEST_CASE("memory that cannot be had is a memory_error naming the array", "[errors]") {
  STATIC_REQUIRE(std::is_base_of_v<zn::error, zn::memory_error>);
  // 2^60 floats: more than any machine has.
  CHECK_THROWS_AS(zn::zeros<float>({1ll << 40, 1ll << 20}), zn::memory_error);
  CHECK_THROWS_WITH(zn::zeros<float>({1ll << 40, 1ll << 20}),
                    "array: cannot allocate 4611686018427387904 bytes for shape (1099511627776, "
                    "1048576) of float32");
  // A size whose byte count does not fit in 64 bits.
  CHECK_THROWS_WITH(zn::array<double>::empty({1ll << 40, 1ll << 30}),
                    "array: cannot allocate more than 2^64 bytes for shape (1099511627776, "
                    "1073741824) of float64");
  // Nothing is lost: allocation works again afterwards.
  CHECK(zn::ones<float>({3}).size() == 3);
}

TEST_CASE("error messages are one line", "[errors]") {
  auto a = zn::zeros<float>({2, 3});
  std::string msgs[] = {
      message_of([&] {
        (void)(a + zn::zeros<float>({3, 2}));
      }),
      message_of([&] {
        (void)zn::transpose(a, {0, 0});
      }),
      message_of([&] { (void)zn::reshape(a, {7}); }),
      message_of([&] { (void)zn::slice(a, 0, 0, 1, 0); }),
      message_of([&] { (void)a(5, 0); }),
      message_of([&] { (void)a.item(); }),
      message_of([&] {
        (void)zn::array<float>({2}, {1, 2, 3});
      }),
      message_of([&] { (void)zn::shape({-1}); }),
      message_of([&] { zn::assign(a, zn::zeros<float>({4})); }),
      message_of([&] { (void)zn::arange<float>(0, 1, 0); }),
  };
  for (auto const& m : msgs) {
    INFO(m);
    CHECK_FALSE(m.empty());
    CHECK(m.find('\n') == std::string::npos);
  }
}
