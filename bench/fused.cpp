// bench/fused: fused elementwise evaluation, zenith against its peers, in one process.
//
//   fused [threads] [reps]      (defaults: hardware threads, 15 reps)
//
// On n = 2^24 floats, each expression is computed four ways into a preallocated output:
//   zenith   `out = expr` with out the sole owner of a same-shape buffer (runs in place)
//   openmp   a hand-written `#pragma omp parallel for simd` loop
//   xtensor  `xt::noalias(out) = expr` with XTENSOR_USE_XSIMD (xtensor is single-threaded)
//   eigen    ArrayXf expressions (Eigen is single-threaded for these)
// zenith and OpenMP use the same number of threads. A STREAM-style triad measured in the same
// run gives the machine's bandwidth. GB/s counts the bytes the ideal loop moves: every input
// read once and the output written once (write-allocate traffic is not counted, as in STREAM).
#ifndef XTENSOR_USE_XSIMD
#error "bench/fused measures xtensor with XTENSOR_USE_XSIMD"
#endif

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>
#include <zenith/zenith.hpp>

#include "timing.hpp"

namespace zn = zenith;

namespace {

using bench::impl;
using bench::median_ms;
using bench::timing;

float zenith_sum(zn::array<float> const& a, zn::array<float> const& b) {
  zn::array<float> s = zn::sum(a * b);
  return s.item();
}

struct row_result {
  std::string name;
  double bytes;   // bytes moved by the ideal loop
  timing ms[5];   // zenith, openmp, xtensor, eigen, zenith on one thread
  double err[5];  // max relative difference from a double-precision reference
};

constexpr char const* impl_names[5] = {"zenith", "openmp", "xtensor", "eigen", "zenith 1 thread"};

double rel_err(float const* x, std::vector<double> const& ref) {
  double m = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    m = std::max(m, std::abs(double(x[i]) - ref[i]) / std::max(1.0, std::abs(ref[i])));
  return m;
}

// The hand-written OpenMP loops, as a user would write them: plain functions over pointers.
void omp_triad(float* out, float const* b, float const* c, float s, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] = b[i] + s * c[i];
}
void omp_chain(float* out, float const* a, float const* b, float const* c, float const* d,
               float const* e, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] * b[i] + c[i] * d[i] - e[i];
}
// Without -ffast-math GCC has no vector sin/exp (glibc declares its libmvec variants only under
// __FAST_MATH__), so this loop calls the scalar libm functions.
void omp_trig(float* out, float const* a, float const* b, float const* c, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] * std::sin(b[i]) + std::exp(-c[i] * c[i]);
}
float omp_dot(float const* a, float const* b, std::size_t n) {
  float acc = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : acc)
  for (std::size_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t const n = std::size_t(1) << 24;
  int threads = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  if (threads < 1) threads = 1;
  if (reps < 1) reps = 1;
  zn::set_num_threads(std::size_t(threads));
  omp_set_num_threads(threads);
  omp_set_dynamic(0);

  // Inputs: uniform in [0.5, 1.5], the same values in every implementation's containers.
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  std::vector<std::vector<float>> in(5, std::vector<float>(n));
  for (auto& v : in)
    for (auto& x : v) x = dist(gen);

  // zenith: 64-byte aligned buffers from its allocator.
  std::vector<zn::array<float>> za;
  for (auto& v : in) za.push_back(zn::copy_from(v.data(), zn::shape{n}));
  zn::array<float> zout = zn::zeros<float>(zn::shape{n});
  auto &a = za[0], &b = za[1], &c = za[2], &d = za[3], &e = za[4];

  // OpenMP: plain aligned buffers, first touched by the threads that use them.
  auto omp_alloc = [&] {
    auto* p = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
#pragma omp parallel for simd schedule(static)
    for (std::size_t i = 0; i < n; ++i) p[i] = 0.f;
    return p;
  };
  std::vector<float*> oa;
  for (auto& v : in) {
    float* p = omp_alloc();
    std::copy(v.begin(), v.end(), p);
    oa.push_back(p);
  }
  float* oout = omp_alloc();
  float *pa = oa[0], *pb = oa[1], *pc = oa[2], *pd = oa[3], *pe = oa[4];

  // xtensor: xt::xtensor<float, 1> (xsimd-aligned storage).
  std::vector<xt::xtensor<float, 1>> xa;
  for (auto& v : in) {
    xt::xtensor<float, 1> x = xt::zeros<float>({n});
    std::copy(v.begin(), v.end(), x.begin());
    xa.push_back(std::move(x));
  }
  xt::xtensor<float, 1> xout = xt::zeros<float>({n});
  auto &xa_ = xa[0], &xb = xa[1], &xc = xa[2], &xd = xa[3], &xe = xa[4];

  // Eigen: ArrayXf.
  std::vector<Eigen::ArrayXf> ea;
  for (auto& v : in) ea.push_back(Eigen::Map<Eigen::ArrayXf>(v.data(), Eigen::Index(n)));
  Eigen::ArrayXf eout = Eigen::ArrayXf::Zero(Eigen::Index(n));
  auto &ea_ = ea[0], &eb = ea[1], &ec = ea[2], &ed = ea[3], &ee = ea[4];

  // STREAM-style triad, OpenMP, same thread count: a[i] = b[i] + s*c[i].
  float const s = 3.f;
  timing triad = median_ms(reps, {{[&] { omp_triad(oout, pb, pc, s, n); }}})[0];
  double triad_bytes = 3.0 * 4.0 * double(n);

  auto one_thread = [&] { zn::set_num_threads(1); };
  auto all_threads = [&] { zn::set_num_threads(std::size_t(threads)); };
  std::vector<row_result> rows;
  bool deterministic = true;  // zenith gives bitwise the same result on 1 and `threads` threads
  bool in_place = true;       // `zout = expr` reused zout's buffer and allocated nothing

  // An elementwise row: zenith, OpenMP, xtensor, Eigen, and zenith again on one thread.
  auto elementwise_row = [&](std::string name, double bytes_per_elt, std::vector<double> const& ref,
                             std::function<void()> fz, std::function<void()> fo,
                             std::function<void()> fx, std::function<void()> fe) {
    row_result r{};
    r.name = std::move(name);
    r.bytes = bytes_per_elt * double(n);
    auto ms = median_ms(reps, {{fz}, {fo}, {fx}, {fe}, {fz, one_thread, all_threads}});
    float const* outs[4] = {zout.data(), oout, xout.data(), eout.data()};
    for (int k = 0; k < 5; ++k) {
      r.ms[k] = ms[std::size_t(k)];
      r.err[k] = rel_err(outs[k % 4], ref);
    }
    std::vector<float> one(zout.data(), zout.data() + n);  // the last run was on one thread
    float const* where = zout.data();
    std::size_t allocs = zn::cpu_memory_stats().allocations;
    fz();
    deterministic = deterministic && std::equal(one.begin(), one.end(), zout.data());
    in_place = in_place && zout.data() == where && zn::cpu_memory_stats().allocations == allocs;
    rows.push_back(r);
  };

  // Row 1: a*b + c*d - e (5 reads, 1 write).
  {
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i)
      ref[i] = double(in[0][i]) * in[1][i] + double(in[2][i]) * in[3][i] - in[4][i];
    elementwise_row(
        "a*b + c*d - e", 24, ref, [&] { zout = a * b + c * d - e; },
        [&] { omp_chain(oout, pa, pb, pc, pd, pe, n); },
        [&] { xt::noalias(xout) = xa_ * xb + xc * xd - xe; },
        [&] { eout = ea_ * eb + ec * ed - ee; });
  }

  // Row 2: a*sin(b) + exp(-c*c) (3 reads, 1 write).
  {
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) {
      double x = in[0][i], y = in[1][i], z = in[2][i];
      ref[i] = x * std::sin(y) + std::exp(-z * z);
    }
    elementwise_row(
        "a*sin(b) + exp(-c*c)", 16, ref, [&] { zout = a * zn::sin(b) + zn::exp(-c * c); },
        [&] { omp_trig(oout, pa, pb, pc, n); },
        [&] { xt::noalias(xout) = xa_ * xt::sin(xb) + xt::exp(-xc * xc); },
        [&] { eout = ea_ * eb.sin() + (-ec * ec).exp(); });
  }

  // Row 3: sum(a*b) (2 reads, no write).
  {
    double ref = 0;
    for (std::size_t i = 0; i < n; ++i) ref += double(in[0][i]) * in[1][i];
    row_result r{};
    r.name = "sum(a*b)";
    r.bytes = 8.0 * double(n);
    volatile float sink = 0;
    float got[5] = {};
    std::vector<impl> impls = {
        {[&] { sink = got[0] = zenith_sum(a, b); }},
        {[&] { sink = got[1] = omp_dot(pa, pb, n); }},
        {[&] { sink = got[2] = xt::sum(xa_ * xb)(); }},
        {[&] { sink = got[3] = (ea_ * eb).sum(); }},
        {[&] { sink = got[4] = zenith_sum(a, b); }, one_thread, all_threads}};
    auto ms = median_ms(reps, impls);
    for (std::size_t k = 0; k < 5; ++k) {
      r.ms[k] = ms[k];
      r.err[k] = std::abs(double(got[k]) - ref) / std::abs(ref);
    }
    float one = got[4];  // the last run was on one thread
    impls[0].run();
    deterministic = deterministic && got[0] == one;
    rows.push_back(r);
  }

  // The tables, in Markdown: medians (the figures to quote), then the fastest run of each.
  std::printf("zenith fused-evaluation benchmark\n\n");
  std::printf(
      "n = %zu floats (%zu MiB per array); threads: zenith %d, openmp %d, xtensor 1, eigen 1; "
      "%d timed runs each, round-robin\n\n",
      n, n * sizeof(float) >> 20, threads, threads, reps);
  std::printf(
      "STREAM triad (OpenMP, %d threads, a[i] = b[i] + s*c[i]): median %.2f ms = %.2f GB/s"
      " (best %.2f ms = %.2f GB/s)\n",
      threads, triad.median, triad_bytes / (triad.median * 1e6), triad.min,
      triad_bytes / (triad.min * 1e6));
  auto table = [&](char const* title, double timing::*which) {
    std::printf("\n%s: ms (GB/s)\n\n| expression |", title);
    for (char const* nm : impl_names) std::printf(" %s |", nm);
    std::printf(" zenith / best peer | zenith / xtensor |\n|---|");
    for (int k = 0; k < 7; ++k) std::printf("---:|");
    std::printf("\n");
    for (auto const& r : rows) {
      std::printf("| `%s` |", r.name.c_str());
      for (int k = 0; k < 5; ++k) {
        double t = r.ms[k].*which;
        std::printf(" %.2f (%.1f) |", t, r.bytes / (t * 1e6));
      }
      double best = std::min({r.ms[1].*which, r.ms[2].*which, r.ms[3].*which});
      std::printf(" %.3f | %.3f |\n", r.ms[0].*which / best, r.ms[0].*which / r.ms[2].*which);
    }
  };
  table("median time", &timing::median);
  table("fastest run", &timing::min);
  std::printf("\nmax relative error against a double-precision reference:\n");
  for (auto const& r : rows) {
    std::printf("%-22s", r.name.c_str());
    for (int k = 0; k < 5; ++k) std::printf(" %s %.1e", impl_names[k], r.err[k]);
    std::printf("\n");
  }
  std::printf("zenith on 1 and %d threads: %s\n", threads,
              deterministic ? "bitwise identical" : "DIFFERENT RESULTS");
  std::printf("zenith `out = expr`: %s\n",
              in_place ? "evaluated in place, no allocation" : "ALLOCATED A NEW BUFFER");

  for (float* p : oa) std::free(p);
  std::free(oout);
  return 0;
}
