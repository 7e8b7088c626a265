// Second derivatives through runtime loops (the tape at two levels) and checkpoint under a nested
// transform, and jacfwd / jacrev of array functions, against central differences.
#include "second_derivatives.hpp"

using namespace second_derivatives;

TEST_CASE("hessian through a runtime loop (the tape at two levels)", "[higher_order]") {
  auto W = random_array({3, 3}, 6, -0.7, 0.7);
  auto x = random_array({2, 3}, 7);
  auto net = [&](zn::array<double> const& w) {
    zn::array<double> h = x;
    for (int k = 0; k < 3; ++k) h = zn::tanh(zn::matmul(h, w));  // materialized: tape entries
    return zn::sum(h * h);
  };
  check_hessian_fd(net, W);
}

TEST_CASE("jacfwd and jacrev of array functions", "[higher_order][jacfwd][jacrev]") {
  auto x = random_array({2, 3}, 12);
  auto A = random_array({4, 2}, 13);
  auto f = [&](zn::array<double> const& v) { return zn::tanh(zn::matmul(A, v)); };
  auto J = zn::jacfwd(f)(x);
  REQUIRE(J.shape() == zn::shape{4, 3, 2, 3});
  auto cols = fd_jacobian([&](zn::array<double> const& v) { return zn::eval(f(v)); }, x);
  for (std::size_t o = 0; o < 12; ++o)
    for (std::size_t j = 0; j < 6; ++j) check_close(J.data()[o * 6 + j], cols[j][o]);
  auto K = zn::jacrev(f)(x);  // reverse mode: the same Jacobian, row by row
  REQUIRE(K.shape() == J.shape());
  for (std::size_t k = 0; k < J.size(); ++k) check_close(K.data()[k], J.data()[k], 1e-14);
}

TEST_CASE("checkpoint inside a nested transform gives the right second derivatives",
          "[higher_order][checkpoint]") {
  auto W = random_array({3, 3}, 15, -0.7, 0.7);
  auto x = random_array({2, 3}, 16);
  auto layer = zn::checkpoint([](zn::array<double> const& h, zn::array<double> const& w) {
    return zn::tanh(zn::matmul(h, w));
  });
  auto net = [&](zn::array<double> const& w) {
    zn::array<double> h = x;
    for (int k = 0; k < 2; ++k) h = layer(h, w);
    return zn::sum(h * h);
  };
  auto plain = [&](zn::array<double> const& w) {
    zn::array<double> h = x;
    for (int k = 0; k < 2; ++k) h = zn::tanh(zn::matmul(h, w));
    return zn::sum(h * h);
  };
  auto H = zn::hessian(net)(W), Hp = zn::hessian(plain)(W);
  for (std::size_t i = 0; i < H.size(); ++i) check_close(H.data()[i], Hp.data()[i], 1e-12);
}
