// hessian of array functions against central differences of the gradient: elementwise ops,
// broadcasting, matmul and a matrix argument. The reductions and the runtime loops have files of
// their own (test_hessian_reductions.cpp, test_hessian_loops.cpp): nested transforms instantiate
// so many types that one file of all three needed 14-16 GB to compile.
#include "second_derivatives.hpp"

using namespace second_derivatives;

TEST_CASE("hessian of array functions against differences of the gradient", "[higher_order]") {
  auto x = random_array({4}, 2);
  SECTION("elementwise and broadcasting") {
    // exp(v * v): the cotangent at v * v carries an exp and both operands take it (reuse_node).
    check_hessian_fd(
        [](auto const& v) {
          return zn::sum(zn::exp(v) * zn::sin(v) + v * v * v + zn::exp(v * v) * 0.25);
        },
        x);
  }
  SECTION("mixing elements: a quadratic form and a matmul") {
    auto A = random_array({4, 4}, 3);
    check_hessian_fd(
        [&](auto const& v) {
          auto y = zn::matmul(A, v);
          return zn::sum(zn::tanh(y) * y);
        },
        x);
  }
  SECTION("a matrix argument") {
    auto W = random_array({2, 3}, 4);
    auto H = zn::hessian([](auto const& w) { return zn::sum(zn::square(zn::matmul(w, w))); })(
        random_array({3, 3}, 5));
    CHECK(H.shape() == zn::shape{3, 3, 3, 3});
    check_hessian_fd([](auto const& w) { return zn::sum(zn::sin(w) * w); }, W);
  }
}
