// hessian of reductions whose derivative rules read the forward value (logsumexp, softmax,
// log_softmax, mean, prod), against central differences of the gradient.
#include "second_derivatives.hpp"

using namespace second_derivatives;

TEST_CASE("hessian of reductions with rules that read the forward value", "[higher_order]") {
  auto x = random_array({4}, 2);
  check_hessian_fd([](auto const& v) { return zn::logsumexp(v * 2.0); }, x);
  check_hessian_fd([](auto const& v) { return zn::sum(zn::softmax(v, 0) * v); }, x);
  check_hessian_fd([](auto const& v) { return zn::sum(zn::log_softmax(v, 0) * v * v); }, x);
  check_hessian_fd([](auto const& v) { return zn::mean(zn::square(v - zn::mean(v))); }, x);
  check_hessian_fd([](auto const& v) { return zn::prod(v + 2.0); }, x);
}
