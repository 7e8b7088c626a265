// Arrays on a real CUDA device (ctest label gpu): through the driver, the round trips and the
// allocator statistics that tests/test_device.cpp checks against a stand-in without a GPU, and
// expressions run as kernels, products through cuBLAS, convolutions through cuDNN, and gradients
// (tests/cuda/test_device_launch.cpp and device_autodiff.cpp emulate those on the host).
// Exits with 77, which ctest reports as skipped, where there is no usable device.
#include <zenith/zenith.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

#include "../docs/check.hpp"

namespace zn = zenith;

int main() {
  if (zn::cuda_backend::device_count() == 0) {
    std::printf("gpu_device_arrays: no CUDA device here, skipped\n");
    return 77;
  }
  zn::device gpu = zn::cuda(0);
  std::size_t n = std::size_t(1) << 20;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = float(i % 1000) * 0.5f - 7.f;
  zn::array<float> x({n}, values);

  zn::memory_stats before = zn::cuda_memory_stats(0);
  {
    zn::array<float> d = x.to(gpu);
    CHECK(d.device() == gpu);
    CHECK(zn::cuda_memory_stats(0).bytes_in_use == before.bytes_in_use + n * sizeof(float));
    zn::array<float> d2 = d.to(gpu);  // the same array
    CHECK(d2.data() == d.data());
    zn::array<float> back = d.to(zn::cpu);  // into page-locked memory
    CHECK(std::memcmp(back.data(), x.data(), n * sizeof(float)) == 0);
    CHECK(zn::pinned_memory_stats().bytes_in_use >= n * sizeof(float));
    zn::array<double> o = zn::ones<double>({7}, gpu);
    CHECK(zn::allclose(o.to(zn::cpu), zn::ones<double>({7})));
    // Elementwise expressions: generated kernels, compiled by NVRTC, launched on the device.
    zn::array<float> y = d * zn::sin(d) + zn::exp(-d * d);  // contiguous: the vectorized kernel
    CHECK(y.device() == gpu);
    zn::array<float> want = x * zn::sin(x) + zn::exp(-x * x);
    CHECK(zn::allclose(y.to(zn::cpu), want, 1e-5, 1e-6));
    zn::array<float> m = zn::reshape(x, {1024, 1024}), row = zn::linspace<float>(-1, 1, 1024);
    zn::array<float> s = zn::transpose(m.to(gpu)) * row.to(gpu) + 2.f;  // the strided kernel
    CHECK(zn::allclose(s.to(zn::cpu), zn::array<float>(zn::transpose(m) * row + 2.f), 1e-6, 1e-6));
    // A reduction with the expression fused in.
    zn::array<float> r = zn::sum(zn::exp(m.to(gpu) * 0.01f) * row.to(gpu), 1);
    CHECK(zn::allclose(r.to(zn::cpu), zn::array<float>(zn::sum(zn::exp(m * 0.01f) * row, 1)), 1e-4,
                       1e-4));
    // Whole-array reductions: each split among blocks, then the partials combined.
    CHECK(zn::allclose(zn::array<float>(zn::sum(d * 0.5f)).to(zn::cpu),
                       zn::array<float>(zn::sum(x * 0.5f)), 1e-5, 1e-3));
    CHECK(zn::array<std::int64_t>(zn::argmax(d)).to(zn::cpu).item() ==
          zn::array<std::int64_t>(zn::argmax(x)).item());
    CHECK(zn::array<float>(zn::min(d)).to(zn::cpu).item() == zn::array<float>(zn::min(x)).item());
    // matmul through cuBLAS, plain, transposed and batched, and inside an expression.
    zn::array<float> a = zn::reshape(zn::linspace<float>(-1, 1, 96 * 64), {96, 64});
    zn::array<float> w = zn::reshape(zn::linspace<float>(-2, 2, 64 * 48), {64, 48});
    zn::array<float> da = a.to(gpu), dw = w.to(gpu);
    CHECK(zn::allclose(zn::array<float>(zn::matmul(da, dw)).to(zn::cpu),
                       zn::array<float>(zn::matmul(a, w)), 1e-4, 1e-5));
    CHECK(zn::allclose(zn::array<float>(zn::tanh(zn::matmul(zn::transpose(da), da))).to(zn::cpu),
                       zn::array<float>(zn::tanh(zn::matmul(zn::transpose(a), a))), 1e-4, 1e-5));
    zn::array<double> bt = zn::reshape(zn::linspace<double>(-1, 1, 4 * 8 * 5), {4, 8, 5});
    zn::array<double> m5 = zn::reshape(zn::linspace<double>(0, 1, 5 * 3), {5, 3});
    CHECK(zn::allclose(zn::array<double>(zn::matmul(bt.to(gpu), m5.to(gpu))).to(zn::cpu),
                       zn::array<double>(zn::matmul(bt, m5)), 1e-12, 1e-12));
    // A gradient through both: forward and backward on the device.
    auto loss = [](auto const& wv, auto const& xv) {
      return zn::mean(zn::square(zn::tanh(zn::matmul(xv, wv))));
    };
    zn::array<float> g = zn::grad(loss)(dw, da);
    CHECK(g.device() == gpu);
    CHECK(zn::allclose(g.to(zn::cpu), zn::array<float>(zn::grad(loss)(w, a)), 1e-4, 1e-6));
    // conv2d through cuDNN: forward, and a gradient (backward data and backward filter).
    zn::array<float> img = zn::reshape(zn::linspace<float>(-1, 1, 2 * 3 * 12 * 10), {2, 3, 12, 10});
    zn::array<float> k = zn::reshape(zn::linspace<float>(-0.5, 0.5, 4 * 3 * 3 * 3), {4, 3, 3, 3});
    zn::conv2d_options opt{{2, 1}, {1, 1}, {1, 1}};
    CHECK(zn::allclose(zn::array<float>(zn::conv2d(img.to(gpu), k.to(gpu), opt)).to(zn::cpu),
                       zn::array<float>(zn::conv2d(img, k, opt)), 1e-4, 1e-5));
    auto conv_loss = [&](auto const& kv, auto const& xv) {
      return zn::sum(zn::square(zn::tanh(zn::conv2d(xv, kv, opt))));
    };
    auto [gk, gx] = zn::grad(conv_loss, zn::argnums<0, 1>)(k.to(gpu), img.to(gpu));
    auto [hk, hx] = zn::grad(conv_loss, zn::argnums<0, 1>)(k, img);
    CHECK(zn::allclose(gk.to(zn::cpu), hk, 1e-3, 1e-4));
    CHECK(zn::allclose(gx.to(zn::cpu), hx, 1e-3, 1e-4));
    if (zn::cuda_backend::device_count() > 1) {  // device to device
      zn::array<float> e = d.to(zn::cuda(1)).to(zn::cpu);
      CHECK(std::memcmp(e.data(), x.data(), n * sizeof(float)) == 0);
    }
  }
  zn::memory_stats after = zn::cuda_memory_stats(0);
  CHECK(after.bytes_in_use == before.bytes_in_use);  // every block back in the cache
  CHECK(after.cached_bytes >= n * sizeof(float));
  {  // the cached block serves the next array of that size: no new cuMemAlloc
    zn::array<float> d = x.to(gpu);
    CHECK(zn::cuda_memory_stats(0).system_allocations == after.system_allocations);
  }
  std::printf("gpu_device_arrays: passed\n");
  return 0;
}
