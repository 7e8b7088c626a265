// The CUDA backend (docs/cuda.md): what it costs to get a kernel, and, on a GPU, how fast the
// kernels run against the device's own copy bandwidth.
//
//   build/release/bench/cuda [reps]
//
// 1. Kernel cache latency (needs NVRTC, no GPU): the generated kernel of a fused chain,
//    a * sin(b) + exp(-c * c) on float, fetched from jit_cache: a miss (NVRTC compiles it and
//    writes the disk cache), a memory hit, and a disk hit (a fresh cache over the same
//    directory), for sm_80 and sm_90.
// 2. On a GPU (skipped without one): the same chain on 2^26 floats fused (one kernel) and
//    unfused (one kernel per op, each result in memory), against a device-to-device copy of
//    the same bytes in the same run; bandwidth = bytes each must move / time.
// 3. On a GPU: zn::matmul of n x n device arrays (float, double) against cuBLAS's GEMM called
//    directly on the same buffers.
// 4. On a GPU: the gradient's cost (bench/grad_cost.cpp on the device): value_and_grad of
//    sum(a * sin(b) + exp(-c * c)) w.r.t. a, b and c over the forward sum alone, and the
//    gradient pass's bandwidth against the copy's (it reads 3 arrays and writes 3).
#include <zenith/zenith.hpp>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

namespace zn = zenith;
namespace cu = zenith::cuda_backend;
using clock_type = std::chrono::steady_clock;

namespace {

double us_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void cache_latency(int reps) {
  zn::array<float> a = zn::ones<float>({1024}), b = a, c = a;
  auto e = a * zn::sin(b) + zn::exp(-c * c);
  auto plan = cu::make_device_plan(e, zn::cpu);
  cu::kernel_source k = cu::elementwise_kernel<float>(plan, {cu::layout::vectorized, false, 0});
  auto root =
      std::filesystem::temp_directory_path() / ("zenith_bench_cuda_" + std::to_string(::getpid()));
  std::printf("## Kernel cache latency (%s, %zu bytes of source)\n\n", k.name.c_str(),
              k.text.size());
  std::printf(
      "| arch | miss: NVRTC compile + disk write (ms) | memory hit (us) | disk hit (us) |\n");
  std::printf("|---|---:|---:|---:|\n");
  for (int arch : {80, 90}) {
    std::vector<double> miss, memory, disk;
    for (int r = 0; r < reps; ++r) {
      auto dir = root / (std::to_string(arch) + "_" + std::to_string(r));
      cu::jit_cache cache(16, dir);
      auto t0 = clock_type::now();
      auto img = cache.get(k.text, k.name, arch);
      miss.push_back(us_since(t0) / 1000);
      for (int i = 0; i < 100; ++i) {
        t0 = clock_type::now();
        (void)cache.get(k.text, k.name, arch);
        memory.push_back(us_since(t0));
      }
      for (int i = 0; i < 10; ++i) {
        cu::jit_cache fresh(16, dir);
        t0 = clock_type::now();
        (void)fresh.get(k.text, k.name, arch);
        disk.push_back(us_since(t0));
        if (fresh.stats().disk_hits != 1) std::printf("(not a disk hit!)\n");
      }
    }
    std::printf("| sm_%d | %.1f | %.2f | %.1f |\n", arch, median(miss), median(memory),
                median(disk));
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  std::printf("\n");
}

// The median of reps runs of f on gpu, each timed to completion, after one warm-up run (which
// compiles and loads the kernels).
template <class F>
double gpu_ms(zn::device gpu, int reps, F&& f) {
  f();
  zn::synchronize(gpu);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clock_type::now();
    f();
    zn::synchronize(gpu);
    t.push_back(us_since(t0) / 1000);
  }
  return median(t);
}

void gpu_chain(int reps) {
  if (cu::device_count() == 0) {
    std::printf("## On a GPU\n\nno CUDA device here: skipped\n");
    return;
  }
  zn::device gpu = zn::cuda(0);
  std::size_t n = std::size_t(1) << 26;
  // Three arrays: the chain must read 3n floats from memory, not one array thrice from cache.
  zn::array<float> a = zn::linspace<float>(-1, 1, n).to(gpu);
  zn::array<float> b = zn::linspace<float>(2, -2, n).to(gpu),
                   c = zn::linspace<float>(0, 1, n).to(gpu);
  zn::array<float> copy_dst = zn::array<float>::empty({n}, gpu);
  auto time_ms = [&](auto&& f) { return gpu_ms(gpu, reps, f); };
  double copy = time_ms(
      [&] { zn::memory_of(gpu).copy(copy_dst.data(), gpu, a.data(), gpu, n * sizeof(float)); });
  double fused = time_ms([&] { zn::array<float> y = a * zn::sin(b) + zn::exp(-c * c); });
  double unfused = time_ms([&] {
    zn::array<float> s = zn::sin(b);
    zn::array<float> p = a * s;
    zn::array<float> q = c * c;
    zn::array<float> x = zn::exp(-q);
    zn::array<float> y = p + x;
  });
  double gb = double(n) * sizeof(float) / 1e6;  // per array, in GB per ms -> GB/s below
  double copy_bw = 2 * gb / copy, fused_bw = 4 * gb / fused;
  std::printf("## a * sin(b) + exp(-c * c), 2^26 floats, cuda:0\n\n");
  std::printf("| | ms | GB/s moved | vs copy |\n|---|---:|---:|---:|\n");
  std::printf("| device-to-device copy | %.3f | %.0f | 1.00 |\n", copy, copy_bw);
  std::printf("| fused (one kernel) | %.3f | %.0f | %.2f |\n", fused, fused_bw, fused_bw / copy_bw);
  std::printf("| unfused (5 kernels) | %.3f | %.0f | %.2f |\n", unfused, 4 * gb / unfused,
              (4 * gb / unfused) / copy_bw);
  std::printf("\nfused / unfused time: %.2f\n", fused / unfused);
}

// zn::matmul on device arrays against cuBLAS's GEMM called directly on the same buffers, both
// timed to completion (synchronize) in the same run.
template <class T>
void gpu_matmul_row(zn::device gpu, std::size_t n, int reps) {
  zn::array<T> a = zn::full<T>({n, n}, T(0.5), gpu), b = zn::full<T>({n, n}, T(0.25), gpu);
  zn::array<T> c = zn::array<T>::empty({n, n}, gpu);
  double zenith = gpu_ms(gpu, reps, [&] { zn::array<T> y = zn::matmul(a, b); });
  void* h = cu::detail::cublas_handle(0);
  bool is_double = std::is_same_v<T, double>;
  double one_d = 1, zero_d = 0;
  float one_f = 1, zero_f = 0;
  void const* one = is_double ? static_cast<void const*>(&one_d) : &one_f;
  void const* zero = is_double ? static_cast<void const*>(&zero_d) : &zero_f;
  int type = is_double ? cu::detail::cuda_r_64f : cu::detail::cuda_r_32f;
  int compute = is_double ? cu::detail::cublas_compute_64f : cu::detail::cublas_compute_32f;
  auto ln = std::int64_t(n);
  double direct = gpu_ms(gpu, reps, [&] {
    cu::cublas().gemm_strided_batched(h, 0, 0, ln, ln, ln, one, b.data(), type, ln, 0, a.data(),
                                      type, ln, 0, zero, c.data(), type, ln, 0, 1, compute, -1);
  });
  double tflops = 2.0 * double(n) * double(n) * double(n) / 1e9;  // per ms -> TFLOP/s
  std::printf("| %s | %zu | %.3f | %.3f | %.1f | %.2f |\n", is_double ? "double" : "float", n,
              zenith, direct, tflops / zenith, zenith / direct);
}

void gpu_matmul(int reps) {
  if (cu::device_count() == 0) return;
  zn::device gpu = zn::cuda(0);
  std::printf("\n## matmul vs cuBLAS called directly, cuda:0\n\n");
  std::printf("| type | n | zenith ms | cuBLAS ms | zenith TFLOP/s | zenith / cuBLAS |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (std::size_t n : {256, 1024, 4096}) gpu_matmul_row<float>(gpu, n, reps);
  for (std::size_t n : {256, 1024, 4096}) gpu_matmul_row<double>(gpu, n, reps);
}

void gpu_grad_cost(int reps) {
  if (cu::device_count() == 0) return;
  zn::device gpu = zn::cuda(0);
  auto f = [](auto const& a, auto const& b, auto const& c) {
    return zn::sum(a * zn::sin(b) + zn::exp(-c * c));
  };
  auto vg = zn::value_and_grad(f, zn::argnums<0, 1, 2>);
  std::printf("\n## Gradient cost on the device, cuda:0\n\n");
  std::printf("| floats | forward ms | value_and_grad ms | ratio | grad GB/s | vs copy |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (int log2n : {22, 26}) {
    std::size_t n = std::size_t(1) << log2n;
    zn::array<float> a = zn::linspace<float>(-1, 1, n).to(gpu);
    zn::array<float> b = zn::linspace<float>(2, -2, n).to(gpu),
                     c = zn::linspace<float>(0, 1, n).to(gpu);
    zn::array<float> copy_dst = zn::array<float>::empty({n}, gpu);
    double copy = gpu_ms(gpu, reps, [&] {
      zn::memory_of(gpu).copy(copy_dst.data(), gpu, a.data(), gpu, n * sizeof(float));
    });
    double forward = gpu_ms(gpu, reps, [&] { zn::array<float> y = f(a, b, c); });
    double grad = gpu_ms(gpu, reps, [&] { auto [v, g] = vg(a, b, c); });
    double gb = double(n) * sizeof(float) / 1e6;
    double grad_bw = 6 * gb / grad;
    std::printf("| 2^%d | %.3f | %.3f | %.2f | %.0f | %.2f |\n", log2n, forward, grad,
                grad / forward, grad_bw, grad_bw / (2 * gb / copy));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  cache_latency(reps);
  gpu_chain(reps * 3);
  gpu_matmul(reps);
  gpu_grad_cost(reps * 3);
}
