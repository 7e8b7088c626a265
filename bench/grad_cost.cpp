// bench/grad_cost: what a gradient costs next to the forward pass, in one process.
//
//   grad_cost [threads] [reps] [log2 n]   (defaults: hardware threads, 21 reps, 22)
//
// f(a, b, c) = sum(a * sin(b) + exp(-c * c)) on n = 2^22 floats each, four ways:
//   zenith forward    zn::eval(f(a, b, c))
//   zenith grad       zn::value_and_grad(f, zn::argnums<0, 1, 2>)(a, b, c): value and 3 gradients
//   openmp forward    a hand-written `omp parallel for simd reduction` loop
//   openmp grad       one hand-written loop computing the value and all three gradients (it
//                     knows that sin and cos share an argument and reads each input once): the
//                     fused ideal a reverse pass can only approach
// The target is time(zenith grad) / time(zenith forward) <= 2.5. A STREAM-style triad in
// the same run gives the bandwidth, for reading the ratios.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>
#include <zenith/zenith.hpp>

#include "timing.hpp"

namespace zn = zenith;

namespace {

volatile float sink_value;

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  int reps = argc > 2 ? std::atoi(argv[2]) : 21;
  zn::set_num_threads(std::size_t(threads));
  omp_set_num_threads(threads);

  int const log2n = argc > 3 ? std::atoi(argv[3]) : 22;
  std::size_t const n = std::size_t(1) << log2n;
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  auto a = zn::array<float>::empty({n}), b = zn::array<float>::empty({n}),
       c = zn::array<float>::empty({n});
  for (std::size_t i = 0; i < n; ++i) {
    a.data()[i] = d(gen);
    b.data()[i] = d(gen);
    c.data()[i] = d(gen);
  }
  auto f = [](auto const& a, auto const& b, auto const& c) {
    return zn::sum(a * zn::sin(b) + zn::exp(-c * c));
  };
  auto vg = zn::value_and_grad(f, zn::argnums<0, 1, 2>);

  std::vector<float> ga(n), gb(n), gc(n), t1(n), t2(n), t3(n);
  float const *pa = a.data(), *pb = b.data(), *pc = c.data();
  float *qa = ga.data(), *qb = gb.data(), *qc = gc.data();

  // Check the zenith gradient against the hand-written one before timing anything.
  auto [v, g] = vg(a, b, c);
  double worst = 0;
  for (std::size_t i = 0; i < n; i += 997) {
    float e = std::exp(-pc[i] * pc[i]);
    worst = std::max({worst, double(std::abs(std::get<0>(g)(i) - std::sin(pb[i]))),
                      double(std::abs(std::get<1>(g)(i) - pa[i] * std::cos(pb[i]))),
                      double(std::abs(std::get<2>(g)(i) + 2 * pc[i] * e))});
  }
  if (worst > 1e-5) {
    std::fprintf(stderr, "grad_cost: zenith gradient differs from the hand-written one by %g\n",
                 worst);
    return 1;
  }

  auto results = bench::median_ms(
      reps, bench::impls_of({
                [&] { sink_value = zn::eval(f(a, b, c)).item(); },
                [&] {
                  auto r = vg(a, b, c);
                  sink_value = r.first.item();
                },
                [&] {
                  double s = 0;
#pragma omp parallel for simd reduction(+ : s)
                  for (std::size_t i = 0; i < n; ++i)
                    s += pa[i] * std::sin(pb[i]) + std::exp(-pc[i] * pc[i]);
                  sink_value = float(s);
                },
                [&] {
                  double s = 0;
#pragma omp parallel for simd reduction(+ : s)
                  for (std::size_t i = 0; i < n; ++i) {
                    float sb = std::sin(pb[i]), cb = std::cos(pb[i]), e = std::exp(-pc[i] * pc[i]);
                    s += pa[i] * sb + e;
                    qa[i] = sb;
                    qb[i] = pa[i] * cb;
                    qc[i] = -2 * pc[i] * e;
                  }
                  sink_value = float(s);
                },
                [&] {  // STREAM triad: t1 = t2 + 3 t3
                  float *x = t1.data(), *y = t2.data(), *z = t3.data();
#pragma omp parallel for simd
                  for (std::size_t i = 0; i < n; ++i) x[i] = y[i] + 3.f * z[i];
                },
            }));

  double triad_gbs = 3.0 * n * sizeof(float) / (results[4].median * 1e6);
  std::printf("grad_cost: n = 2^%d floats, %d threads, median of %d (ms)\n", log2n, threads, reps);
  std::printf("  %-16s %9s %9s\n", "", "median", "best");
  char const* names[] = {"zenith forward", "zenith grad", "openmp forward", "openmp grad"};
  for (int k = 0; k < 4; ++k)
    std::printf("  %-16s %9.3f %9.3f\n", names[k], results[k].median, results[k].min);
  std::printf("  triad bandwidth  %.1f GB/s\n", triad_gbs);
  std::printf("ratios (medians):\n");
  std::printf("  zenith grad / zenith forward   %.2f   (target <= 2.5)\n",
              results[1].median / results[0].median);
  std::printf("  openmp grad / openmp forward   %.2f\n", results[3].median / results[2].median);
  std::printf("  zenith grad / openmp grad      %.2f\n", results[1].median / results[3].median);
  std::printf("  zenith forward / openmp forward %.2f\n", results[0].median / results[2].median);
  return 0;
}
