// hessian through conv2d against central differences of the gradient: the reverse rules of the
// three convolution parts are convolution parts again (expr/conv.hpp), so second derivatives
// need nothing more. A file of its own, as each nested transform instantiates many types.
#include "second_derivatives.hpp"

using namespace second_derivatives;

TEST_CASE("hessian through conv2d against differences of the gradient", "[higher_order][conv]") {
  auto x = random_array({1, 2, 4, 4}, 7);
  check_hessian_fd(
      [&](auto const& w) {
        return zn::sum(zn::tanh(zn::conv2d(x, w, {{1, 1}, {1, 0}, {1, 1}})));
      },
      random_array({2, 2, 2, 2}, 8));
}
