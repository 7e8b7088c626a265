// Nested transforms over device arrays, without a GPU: hessian and Hessian-vector products of a
// function of arrays on the stand-in device (emulated_gpu.hpp) give the CPU's values (which
// tests/autodiff/higher_order checks against finite differences), every pass at both levels run
// as generated kernels. One
// small function, since each nested transform of it costs gigabytes of compiler memory (7.5 GB
// for this file under the sanitizers).
#include "emulated_gpu.hpp"

using namespace emulated;

TEST_CASE("hessian and Hessian-vector products of functions of device arrays",
          "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<double>({5}, -1, 1), v = values<double>({5}, 0.5, 1.5);
  auto dx = x.to(gpu0), dv = v.to(gpu0);

  // An elementwise chain and logsumexp (a reduction whose rule reads its value).
  auto f = [](auto const& z) { return zn::sum(zn::sin(z) * z * z) + zn::logsumexp(z); };
  zn::array<double> h = zn::hessian(f)(dx);
  REQUIRE(h.device() == gpu0);
  check_close(h, zn::hessian(f)(x), 1e-12);

  // Forward over reverse: the inner grad's seed, a node of numbers alone, has a zero tangent
  // that fits the device expression.
  auto grad_f = [&](auto const& z) { return zn::grad(f)(z); };
  auto [gx, hv] = zn::jvp(grad_f, std::make_tuple(dx), std::make_tuple(dv));
  auto [hgx, hhv] = zn::jvp(grad_f, std::make_tuple(x), std::make_tuple(v));
  check_close(gx, hgx, 1e-12);
  check_close(hv, hhv, 1e-12);
}
