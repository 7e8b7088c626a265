// The transforms over arrays on a real CUDA device (ctest label gpu): vjp, jvp, Jacobians, user
// rules with checkpoint and stop_gradient, a runtime loop of layers on the tape, softmax /
// layer_norm / slices / concatenation, each against the same transform on the CPU.
// tests/cuda/device_autodiff.cpp runs these on the host's stand-in device; this runs the
// generated kernels, cuBLAS and the allocator for real (nested transforms: gpu_higher_order.cpp).
// Exits with 77, which ctest reports as skipped, where there is no usable device.
#include <zenith/zenith.hpp>

#include <cstdio>
#include <tuple>
#include <vector>

#include "../docs/check.hpp"
#include "device_autodiff_cases.hpp"
#include "device_values.hpp"

namespace zn = zenith;

using zenith_test::matches_host;
using zenith_test::values;
namespace cases = zenith_test::device_cases;

int main() {
  if (zn::cuda_backend::device_count() == 0) {
    std::printf("gpu_autodiff: no CUDA device here, skipped\n");
    return 77;
  }
  zn::device gpu = zn::cuda(0);
  zn::memory_stats before = zn::cuda_memory_stats(0);
  {
    // vjp and jvp of a reduction along an axis.
    auto x = values<float>({6, 9}, -1, 1), t = values<float>({6, 9}, 0.5, 2);
    auto ct = values<float>({6}, -1, 1);
    auto f = cases::row_sums;
    auto [y, pullback] = zn::vjp(f, x.to(gpu));
    auto [hy, hpullback] = zn::vjp(f, x);
    CHECK(matches_host(y, hy, 4e-6));
    CHECK(matches_host(std::get<0>(pullback(ct.to(gpu))), std::get<0>(hpullback(ct)), 4e-6));
    auto [jy, jt] = zn::jvp(f, std::make_tuple(x.to(gpu)), std::make_tuple(t.to(gpu)));
    auto [hjy, hjt] = zn::jvp(f, std::make_tuple(x), std::make_tuple(t));
    CHECK(matches_host(jy, hjy, 4e-6));
    CHECK(matches_host(jt, hjt, 4e-6));
  }
  {
    // Jacobians both ways.
    auto x = values<double>({4}, -1, 2);
    auto f = cases::scaled_sines;
    zn::array<double> want = zn::jacfwd(f)(x);
    CHECK(matches_host(zn::jacfwd(f)(x.to(gpu)), want, 1e-12));
    CHECK(matches_host(zn::jacrev(f)(x.to(gpu)), want, 1e-12));
  }
  {
    // A user rule, a checkpointed block and stop_gradient.
    auto x = values<double>({3, 17}, -3, 3), w = values<double>({17}, -1, 1);
    auto loss = cases::rule_and_checkpoint_loss();
    auto dg = zn::grad(loss, zn::argnums<0, 1>)(x.to(gpu), w.to(gpu));
    auto hg = zn::grad(loss, zn::argnums<0, 1>)(x, w);
    CHECK(matches_host(std::get<0>(dg), std::get<0>(hg), 1e-12));
    CHECK(matches_host(std::get<1>(dg), std::get<1>(hg), 1e-12));
  }
  {
    // The runtime loop: layers applied in a loop, each a tape entry, products on cuBLAS.
    auto mlp = cases::mlp;
    std::vector<zn::array<double>> ws{values<double>({6, 8}, -1, 1), values<double>({8, 3}, -1, 1)};
    std::vector<zn::array<double>> dws{ws[0].to(gpu), ws[1].to(gpu)};
    auto x = values<double>({5, 6}, -1, 1);
    auto gd = zn::grad(mlp)(dws, x.to(gpu));
    auto gh = zn::grad(mlp)(ws, x);
    CHECK(matches_host(gd[0], gh[0], 1e-12));
    CHECK(matches_host(gd[1], gh[1], 1e-12));
  }
  {
    // softmax, log_softmax, layer_norm, slices (one with a negative step) and concatenation.
    auto logits = values<double>({5, 7}, -3, 3), labels = values<double>({5, 7}, 0, 1);
    auto w = values<double>({7}, -1, 1);
    auto loss = cases::normalizing_loss;
    auto dg = zn::grad(loss, zn::argnums<0, 1>)(logits.to(gpu), w.to(gpu), labels.to(gpu));
    auto hg = zn::grad(loss, zn::argnums<0, 1>)(logits, w, labels);
    CHECK(matches_host(std::get<0>(dg), std::get<0>(hg), 1e-12));
    CHECK(matches_host(std::get<1>(dg), std::get<1>(hg), 1e-12));
  }
  // Every intermediate of every pass went back to the cache.
  CHECK(zn::cuda_memory_stats(0).bytes_in_use == before.bytes_in_use);
  std::printf("gpu_autodiff: passed\n");
  return 0;
}
