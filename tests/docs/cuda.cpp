// The examples of docs/cuda.md, compiled and run by ctest as doc.cuda (built with ZENITH_CUDA).
// Each `// [doc:NAME]` ... `// [/doc:NAME]` region appears verbatim in the page (doc.snippets
// checks that), and every region asserts its results, so the page cannot rot.
#include <cstdio>
#include <string>
#include <zenith/backend/cuda/kernel_source.hpp>
#include <zenith/backend/cuda/nvrtc.hpp>
#include <zenith/zenith.hpp>

namespace zn = zenith;

#include "check.hpp"

void kernel_source() {
  // [doc:cuda-kernel-source]
  // #include <zenith/backend/cuda/kernel_source.hpp> and <zenith/backend/cuda/nvrtc.hpp>
  zn::array<float> a = zn::ones<float>({256, 64}), b = zn::ones<float>({64});
  auto e = a * zn::sin(b) + zn::exp(-a * a);
  namespace cb = zn::cuda_backend;
  auto plan = cb::make_device_plan(e, zn::cpu);  // for a launch: the arrays' device
  auto k = cb::elementwise_kernel<float>(plan, {cb::layout::strided});
  // k.text: extern "C" __global__ void zn_ew_...(zn_idx n, float* out, const float* in0, ...)
  auto cubin = cb::nvrtc_compile(k.text, k.name, 90);  // sm_90; needs no GPU
  CHECK(!cubin.image.empty());
  // [/doc:cuda-kernel-source]
  CHECK(k.text.find("extern \"C\" __global__ void " + k.name +
                    "(zn_idx n, float* __restrict__ out") != std::string::npos);
  CHECK(k.text.find("sin(") != std::string::npos && k.text.find("exp(") != std::string::npos);
}

void device_arrays() {
  // [doc:cuda-device-arrays]
  zn::array<float> x({3}, {1.f, 2.f, 3.f});
  if (zn::cuda_backend::device_count() > 0) {
    zn::device gpu = zn::cuda(0);
    zn::array<float> d = x.to(gpu);                  // a copy in device memory
    zn::array<float> o = zn::ones<float>({3}, gpu);  // creation on a device: full, zeros, ones
    CHECK(d.device() == gpu && o.device() == gpu);
    zn::array<float> back = d.to(zn::cpu);  // and back; a copy, done when to() returns
    CHECK(zn::allclose(back, x));
    zn::memory_stats s = zn::cuda_memory_stats(0);  // as zn::cpu_memory_stats()
    CHECK(s.bytes_in_use >= 2 * 3 * sizeof(float));
  }
  CHECK(x.to(zn::cpu).data() == x.data());  // already there: the same array, no copy
  // [/doc:cuda-device-arrays]
}

void device_expression() {
  // [doc:cuda-device-expression]
  if (zn::cuda_backend::device_count() > 0) {
    zn::device gpu = zn::cuda(0);
    zn::array<float> a = zn::linspace<float>(-1, 1, 1 << 20).to(gpu);
    zn::array<float> b = zn::linspace<float>(0, 2, 1 << 20).to(gpu);
    zn::array<float> y = a * zn::sin(b) + zn::exp(-a * a);  // one kernel, on the GPU
    CHECK(y.device() == gpu);
    zn::array<float> on_cpu = y.to(zn::cpu);
    CHECK(zn::allclose(on_cpu,
                       zn::array<float>(a.to(zn::cpu) * zn::sin(b.to(zn::cpu)) +
                                        zn::exp(-a.to(zn::cpu) * a.to(zn::cpu))),
                       1e-5, 1e-6));
  }
  // [/doc:cuda-device-expression]
}

void device_grad() {
  // [doc:cuda-device-grad]
  if (zn::cuda_backend::device_count() > 0) {
    zn::device gpu = zn::cuda(0);
    auto loss = [](auto const& w, auto const& x) {
      return zn::mean(zn::square(zn::tanh(x * w - 0.5f)));
    };
    zn::array<float> w = zn::linspace<float>(-1, 1, 4096).to(gpu);
    zn::array<float> x = zn::linspace<float>(0, 2, 4096).to(gpu);
    auto [value, gw] = zn::value_and_grad(loss)(w, x);  // both passes run on the GPU
    CHECK(value.device() == gpu && gw.device() == gpu);
    auto [host_value, host_gw] = zn::value_and_grad(loss)(w.to(zn::cpu), x.to(zn::cpu));
    CHECK(zn::allclose(gw.to(zn::cpu), host_gw, 1e-4, 1e-6));
  }
  // [/doc:cuda-device-grad]
}

int main() {
  kernel_source();
  device_arrays();
  device_expression();
  device_grad();
  std::puts("docs/cuda.md: ok");
}
