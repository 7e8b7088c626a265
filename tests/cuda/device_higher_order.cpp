// Nested transforms over device arrays, without a GPU: hessian, grad of grad and
// Hessian-vector products of functions of arrays on the stand-in device (emulated_gpu.hpp) give
// the CPU's values (which tests/autodiff/higher_order checks against finite differences), every
// pass at both levels run as generated kernels and library calls. Built with
// ZENITH_HIGHER_ORDER, as zenith_higher_order_tests is.
#include "emulated_gpu.hpp"

using namespace emulated;

TEST_CASE("hessian, grad of grad and Hessian-vector products of functions of device arrays",
          "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<double>({5}, -1, 1), v = values<double>({5}, 0.5, 1.5);
  auto dx = x.to(gpu0), dv = v.to(gpu0);

  // Elementwise chains, a reduction that reads its value, a softmax and a layer_norm.
  auto f = [](auto const& z) {
    return zn::sum(zn::sin(z) * z * z) + zn::logsumexp(z * 2.0) + zn::sum(zn::softmax(z, 0) * z) +
           zn::sum(zn::layer_norm(z, 0, 0.1) * zn::exp(z));
  };
  zn::array<double> h = zn::hessian(f)(dx);
  REQUIRE(h.device() == gpu0);
  check_close(h, zn::hessian(f)(x), 1e-12);

  // grad of grad of a scalar function of a scalar parameter, through a matmul.
  auto m = values<double>({4, 5}, -1, 1), w = values<double>({5, 3}, -1, 1);
  auto dm = m.to(gpu0), dw = w.to(gpu0);
  auto g = [](auto const& s, auto const& a, auto const& b) {
    return zn::sum(zn::tanh(zn::matmul(a * s, b)));
  };
  auto dg = [&](auto const& s, auto const& a, auto const& b) { return zn::grad(g)(s, a, b); };
  zn::array<double> s({}, {0.7});
  zn::array<double> gg = zn::grad(dg)(s.to(gpu0), dm, dw);
  check_close(gg, zn::grad(dg)(s, m, w), 1e-12);

  // A Hessian-vector product, forward over reverse.
  auto grad_f = [&](auto const& z) { return zn::grad(f)(z); };
  auto [gx, hv] = zn::jvp(grad_f, std::make_tuple(dx), std::make_tuple(dv));
  auto [hgx, hhv] = zn::jvp(grad_f, std::make_tuple(x), std::make_tuple(v));
  check_close(gx, hgx, 1e-12);
  check_close(hv, hhv, 1e-12);
}
