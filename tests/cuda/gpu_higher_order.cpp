// Nested transforms over arrays on a real CUDA device (ctest label gpu): hessian and
// Hessian-vector products (jvp of grad) of a function of device arrays, against the CPU's, as
// tests/cuda/device_higher_order.cpp does on the host's stand-in device. Built with
// one small function (each nested transform costs gigabytes of compiler
// memory). Exits with 77, which ctest reports as skipped, where there is no usable device.
#include <zenith/zenith.hpp>

#include <cstdio>
#include <tuple>

#include "../docs/check.hpp"
#include "device_values.hpp"

namespace zn = zenith;

using zenith_test::matches_host;
using zenith_test::values;

int main() {
  if (zn::cuda_backend::device_count() == 0) {
    std::printf("gpu_higher_order: no CUDA device here, skipped\n");
    return 77;
  }
  zn::device gpu = zn::cuda(0);
  zn::memory_stats before = zn::cuda_memory_stats(0);
  {
    // Nested: hessian, and Hessian-vector products as jvp of grad.
    auto x = values<double>({5}, -1, 1), v = values<double>({5}, 0.5, 1.5);
    auto f = [](auto const& z) { return zn::sum(zn::sin(z) * z * z) + zn::logsumexp(z); };
    CHECK(matches_host(zn::hessian(f)(x.to(gpu)), zn::hessian(f)(x), 1e-12));
    auto grad_f = [&](auto const& z) { return zn::grad(f)(z); };
    auto [gx, hv] = zn::jvp(grad_f, std::make_tuple(x.to(gpu)), std::make_tuple(v.to(gpu)));
    auto [hgx, hhv] = zn::jvp(grad_f, std::make_tuple(x), std::make_tuple(v));
    CHECK(matches_host(gx, hgx, 1e-12));
    CHECK(matches_host(hv, hhv, 1e-12));
  }
  CHECK(zn::cuda_memory_stats(0).bytes_in_use == before.bytes_in_use);
  std::printf("gpu_higher_order: passed\n");
  return 0;
}
