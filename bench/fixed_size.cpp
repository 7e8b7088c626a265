// Fixed-size expressions: zenith::tensor against Eigen's fixed-size matrices.
//
//   bench/fixed_size [reps]
//
// Each row runs one small computation over a batch of different inputs (so nothing can be
// hoisted out of the loop), writes every result, and repeats; the time per evaluation is the
// best of several trials. A checksum of all results is printed so no work is optimised away,
// and zenith's and Eigen's results are compared.
//
// Build (the CMake target `fixed_size` uses the same flags):
//   g++ -std=c++20 -O3 -march=native -Iinclude -isystem /usr/include/eigen3
//       -I/usr/include/x86_64-linux-gnu/openblas-pthread bench/fixed_size.cpp -lopenblas -lpthread
#pragma GCC diagnostic push  // Eigen 3.4's AVX headers have unused variables
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Dense>
#pragma GCC diagnostic pop

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

namespace {

using V3 = zn::tensor<double, 3>;
using M3 = zn::tensor<double, 3, 3>;

constexpr std::size_t batch = 512;
constexpr int trials = 21;

// Forces the compiler to assume the memory behind p was read and changed: results are kept and
// every repetition is computed again.
inline void clobber(void const* p) { asm volatile("" : : "r"(p) : "memory"); }

double value(std::size_t i, int k) { return std::sin(0.37 * double(i) + 1.13 * k + 0.2); }

// ---------------------------------------------------------------------------------------------
// The kernels: one evaluation per batch element, for each library. noinline keeps each loop in
// its own function, compiled the same way for both.

// 1. r = sin(q) * 2 + q on 3-vectors.
__attribute__((noinline)) void zn_vec3(V3 const* q, V3* r, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) r[i] = zn::sin(q[i]) * 2.0 + q[i];
}
__attribute__((noinline)) void eg_vec3(Eigen::Vector3d const* q, Eigen::Vector3d* r,
                                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) r[i] = (q[i].array().sin() * 2.0 + q[i].array()).matrix();
}

// 2. R = A * B + C elementwise on 3x3.
__attribute__((noinline)) void zn_ew33(M3 const* a, M3 const* b, M3 const* c, M3* r,
                                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) r[i] = a[i] * b[i] + c[i];
}
__attribute__((noinline)) void eg_ew33(Eigen::Matrix3d const* a, Eigen::Matrix3d const* b,
                                       Eigen::Matrix3d const* c, Eigen::Matrix3d* r,
                                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) r[i] = (a[i].array() * b[i].array() + c[i].array()).matrix();
}

// 3. R = A B C, a 3x3 matrix product chain.
__attribute__((noinline)) void zn_mm33(M3 const* a, M3 const* b, M3 const* c, M3* r,
                                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) r[i] = zn::matmul(zn::matmul(a[i], b[i]), c[i]);
}
__attribute__((noinline)) void eg_mm33(Eigen::Matrix3d const* a, Eigen::Matrix3d const* b,
                                       Eigen::Matrix3d const* c, Eigen::Matrix3d* r,
                                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) r[i] = a[i] * b[i] * c[i];
}

// 4. A rigid transform and a cross product: w = (R p + t) x p.
__attribute__((noinline)) void zn_rigid(M3 const* rot, V3 const* p, V3 const* t, V3* w,
                                        std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) w[i] = zn::cross(zn::matmul(rot[i], p[i]) + t[i], p[i]);
}
__attribute__((noinline)) void eg_rigid(Eigen::Matrix3d const* rot, Eigen::Vector3d const* p,
                                        Eigen::Vector3d const* t, Eigen::Vector3d* w,
                                        std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) w[i] = (rot[i] * p[i] + t[i]).cross(p[i]);
}

// 5. A reduction: s = sum(A * B) (the Frobenius inner product) on 3x3.
__attribute__((noinline)) void zn_sum33(M3 const* a, M3 const* b, double* s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) s[i] = zn::sum(a[i] * b[i]);
}
__attribute__((noinline)) void eg_sum33(Eigen::Matrix3d const* a, Eigen::Matrix3d const* b,
                                        double* s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) s[i] = (a[i].array() * b[i].array()).sum();
}

// ---------------------------------------------------------------------------------------------

// Best time per evaluation of each of two runs, measured in alternation (so a noisy neighbour
// or a frequency change hits both alike).
template <class Z, class E>
std::pair<double, double> best_ns_per_op(Z&& zrun, E&& erun, void const* zout, void const* eout,
                                         int reps) {
  auto time = [&](auto& run, void const* out) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      run();
      clobber(out);
    }
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() /
           (double(reps) * double(batch));
  };
  double bz = 1e300, be = 1e300;
  for (int trial = 0; trial < trials; ++trial) {
    bz = std::min(bz, time(zrun, zout));
    be = std::min(be, time(erun, eout));
  }
  return {bz, be};
}

struct row {
  std::string name;
  double zn_ns, eg_ns, max_diff, checksum;
};

template <class T>
double sum_all(T const& x) {
  double s = 0;
  for (std::size_t k = 0; k < std::size_t(x.size()); ++k) s += x.data()[k];
  return s;
}

template <class ZT, class ET>
void diff_and_sum(std::vector<ZT> const& z, std::vector<ET> const& e, double& diff, double& sum) {
  diff = 0;
  sum = 0;
  for (std::size_t i = 0; i < z.size(); ++i) {
    for (std::size_t k = 0; k < std::size_t(z[i].size()); ++k) {
      // Eigen is column-major: element k of zenith's row-major (r, c) is Eigen's (r, c).
      std::size_t cols = std::size_t(e[i].cols()), rr = k / cols, cc = k % cols;
      diff = std::max(diff, std::abs(z[i].data()[k] - e[i](Eigen::Index(rr), Eigen::Index(cc))));
    }
    sum += sum_all(z[i]) + sum_all(e[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 200;

  std::vector<V3> zq(batch), zp(batch), zt(batch), zr(batch);
  std::vector<M3> za(batch), zb(batch), zc(batch), zm(batch);
  std::vector<Eigen::Vector3d> eq(batch), ep(batch), et(batch), er(batch);
  std::vector<Eigen::Matrix3d> ea(batch), eb(batch), ec(batch), em(batch);
  std::vector<double> zs(batch), es(batch);
  for (std::size_t i = 0; i < batch; ++i) {
    for (int k = 0; k < 3; ++k) {
      zq[i][k] = eq[i](k) = value(i, k);
      zp[i][k] = ep[i](k) = value(i, k + 3);
      zt[i][k] = et[i](k) = value(i, k + 6);
    }
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) {
        za[i](r, c) = ea[i](r, c) = value(i, 10 + 3 * r + c);
        zb[i](r, c) = eb[i](r, c) = value(i, 20 + 3 * r + c);
        zc[i](r, c) = ec[i](r, c) = value(i, 30 + 3 * r + c);
      }
  }

  std::vector<row> rows;
  auto add = [&](std::string name, auto zrun, auto erun, auto const& zout, auto const& eout) {
    auto [z, e] = best_ns_per_op(zrun, erun, zout.data(), eout.data(), reps);
    row rw{std::move(name), z, e, 0, 0};
    if constexpr (std::is_same_v<std::decay_t<decltype(zout)>, std::vector<double>>) {
      for (std::size_t i = 0; i < batch; ++i) {
        rw.max_diff = std::max(rw.max_diff, std::abs(zout[i] - eout[i]));
        rw.checksum += zout[i] + eout[i];
      }
    } else {
      diff_and_sum(zout, eout, rw.max_diff, rw.checksum);
    }
    rows.push_back(rw);
  };

  add(
      "vec3  r = sin(q)*2 + q", [&] { zn_vec3(zq.data(), zr.data(), batch); },
      [&] { eg_vec3(eq.data(), er.data(), batch); }, zr, er);
  add(
      "3x3   R = A*B + C (elementwise)",
      [&] { zn_ew33(za.data(), zb.data(), zc.data(), zm.data(), batch); },
      [&] { eg_ew33(ea.data(), eb.data(), ec.data(), em.data(), batch); }, zm, em);
  add(
      "3x3   R = A B C (matmul chain)",
      [&] { zn_mm33(za.data(), zb.data(), zc.data(), zm.data(), batch); },
      [&] { eg_mm33(ea.data(), eb.data(), ec.data(), em.data(), batch); }, zm, em);
  add(
      "vec3  w = (R p + t) x p",
      [&] { zn_rigid(za.data(), zp.data(), zt.data(), zr.data(), batch); },
      [&] { eg_rigid(ea.data(), ep.data(), et.data(), er.data(), batch); }, zr, er);
  add(
      "3x3   s = sum(A*B)", [&] { zn_sum33(za.data(), zb.data(), zs.data(), batch); },
      [&] { eg_sum33(ea.data(), eb.data(), es.data(), batch); }, zs, es);

  std::printf(
      "fixed-size expressions, %zu inputs per batch, best of %d alternating trials x %d reps\n",
      batch, trials, reps);
  std::printf("%-34s %12s %12s %8s %10s\n", "case", "zenith ns", "Eigen ns", "ratio", "max |diff|");
  double checksum = 0, worst = 0;
  for (auto const& r : rows) {
    double ratio = r.zn_ns / r.eg_ns;
    worst = std::max(worst, ratio);
    checksum += r.checksum;
    std::printf("%-34s %12.2f %12.2f %7.2fx %10.1e\n", r.name.c_str(), r.zn_ns, r.eg_ns, ratio,
                r.max_diff);
  }
  std::printf("worst ratio zenith/Eigen: %.2fx (target <= 1.2x)\n", worst);
  std::printf("checksum %.12g\n", checksum);
  return 0;
}
