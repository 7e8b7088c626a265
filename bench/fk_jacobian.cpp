// Robotics-size forward mode: the position Jacobian (3x7) of a 7-joint arm (a Franka-Panda-like
// modified-DH table, one 4x4 homogeneous transform per joint).
//
//   bench/fk_jacobian [reps]
//
// - zenith: zn::jacfwd of the forward kinematics written once, generic over the number type, as
//   a chain of 4x4 transforms built from scalars (tensor<dual<double, 7>, 4, 4>).
// - zenith, textbook form: the same arm as a Ceres user writes it (constants as T(...), the
//   table as angles, the chain from an identity).
// - the textbook form with the table's cos and sin given instead of computed: what the seven
//   libm calls for the table's angles cost the textbook form.
// - hand-written: the geometric Jacobian, column i = z_i x (p - o_i), from the same chain of
//   transforms in double (the frames' z axes and origins).
// - Ceres Jet: the same forward kinematics on ceres::Jet<double, 7> with plain 4x4 arrays
//   (built when Ceres' jet.h is found).
// - fk only: the forward kinematics in double, for scale.
//
// Each row evaluates the Jacobian for a batch of different joint vectors (nothing can be hoisted
// out of the loop), writes every result, and repeats; implementations alternate, and the median
// and best per-Jacobian times over the trials are printed, with the results cross-checked.
//
// Build (the CMake target `fk_jacobian` uses the same flags):
//   g++ -std=c++20 -O3 -march=native -Iinclude -isystem /usr/include/eigen3
//       -I/usr/include/x86_64-linux-gnu/openblas-pthread bench/fk_jacobian.cpp -lopenblas -lpthread
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <zenith/zenith.hpp>

#if defined(ZENITH_BENCH_CERES)
#pragma GCC diagnostic push  // Eigen 3.4's AVX headers have unused variables
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <ceres/jet.h>
#pragma GCC diagnostic pop
#endif

namespace zn = zenith;

namespace {

// Modified DH (Craig): joint i's transform is RotX(alpha_{i-1}) TransX(a_{i-1}) RotZ(q_i)
// TransZ(d_i). cos / sin of alpha are stored (exact 0 and +-1 for the Panda's right angles).
struct dh_row {
  double a, d, ca, sa;
};
constexpr std::array<dh_row, 7> panda{{
    {0.0, 0.333, 1.0, 0.0},
    {0.0, 0.0, 0.0, -1.0},
    {0.0, 0.316, 0.0, 1.0},
    {0.0825, 0.0, 0.0, 1.0},
    {-0.0825, 0.384, 0.0, -1.0},
    {0.0, 0.0, 0.0, 1.0},
    {0.088, 0.0, 0.0, 1.0},
}};
constexpr double flange_d = 0.107;

// ---------------------------------------------------------------------------------------------
// zenith: the textbook forward kinematics, generic over the number type T.

template <class T>
ZENITH_FIXED_INLINE zn::tensor<T, 4, 4> joint_transform(T const& q, dh_row const& p) {
  T const c = zn::cos(q), s = zn::sin(q);
  return {c,        -s,       0.0,   p.a,          //
          s * p.ca, c * p.ca, -p.sa, -p.d * p.sa,  //
          s * p.sa, c * p.sa, p.ca,  p.d * p.ca,   //
          0.0,      0.0,      0.0,   1.0};
}

struct fk_position_fn {
  template <class Q>
  ZENITH_FIXED_INLINE auto operator()(Q const& q) const {
    using T = typename Q::value_type;
    zn::tensor<T, 4, 4> m = joint_transform(q(0), panda[0]);
    for (std::size_t i = 1; i < 7; ++i) m = zn::matmul(m, joint_transform(q(i), panda[i]));
    // The flange: TransZ(flange_d), a constant.
    return zn::tensor<T, 3>{m(0, 3) + flange_d * m(0, 2), m(1, 3) + flange_d * m(1, 2),
                            m(2, 3) + flange_d * m(2, 2)};
  }
};
constexpr fk_position_fn fk_position{};

using Q = zn::tensor<double, 7>;
using J = zn::tensor<double, 3, 7>;

// The same forward kinematics as a Ceres user writes it: every constant made a number of type T
// (T(0.0), T(a)), the DH table as angles whose cos and sin are taken at run time, and the chain
// starting from an identity transform.
struct dh_angles {
  double a, d, alpha;
};
double const half_pi = std::acos(0.0);
std::array<dh_angles, 7> const panda_angles{{
    {0.0, 0.333, 0.0},
    {0.0, 0.0, -half_pi},
    {0.0, 0.316, half_pi},
    {0.0825, 0.0, half_pi},
    {-0.0825, 0.384, -half_pi},
    {0.0, 0.0, half_pi},
    {0.088, 0.0, half_pi},
}};

// One modified-DH transform, every entry a T.
template <class T>
ZENITH_FIXED_INLINE zn::tensor<T, 4, 4> dh_transform(T const& q, T const& a, T const& d,
                                                     T const& ca, T const& sa) {
  using std::cos, std::sin;
  T const ct = cos(q), st = sin(q);
  return {ct,      -st,     T(0.0), a,        //
          st * ca, ct * ca, -sa,    -sa * d,  //
          st * sa, ct * sa, ca,     ca * d,   //
          T(0.0),  T(0.0),  T(0.0), T(1.0)};
}

// The table's cos and sin of alpha taken at run time, as the textbook form does ...
template <class T>
ZENITH_FIXED_INLINE zn::tensor<T, 4, 4> dh_transform(T const& q, dh_angles const& p) {
  using std::cos, std::sin;
  return dh_transform(q, T(p.a), T(p.d), T(cos(p.alpha)), T(sin(p.alpha)));
}
// ... or given (the plain form's table), for the row that measures what those calls cost.
template <class T>
ZENITH_FIXED_INLINE zn::tensor<T, 4, 4> dh_transform(T const& q, dh_row const& p) {
  return dh_transform(q, T(p.a), T(p.d), T(p.ca), T(p.sa));
}

// The chain over a table of rows, from an identity, then the flange as a last fixed transform.
template <class Row>
struct fk_textbook_fn {
  std::array<Row, 7> const* table;
  Row flange;
  template <class Q>
  ZENITH_FIXED_INLINE auto operator()(Q const& q) const {
    using T = typename Q::value_type;
    auto m = zn::tensor<T, 4, 4>::identity();
    for (std::size_t i = 0; i < 7; ++i) m = zn::matmul(m, dh_transform(q(i), (*table)[i]));
    m = zn::matmul(m, dh_transform(T(0.0), flange));
    return zn::tensor<T, 3>{m(0, 3), m(1, 3), m(2, 3)};
  }
};
constexpr fk_textbook_fn<dh_angles> fk_textbook{&panda_angles, {0.0, flange_d, 0.0}};
// The textbook form with the DH table's cos and sin given instead of taken at run time: the
// difference to the textbook row is what the seven libm sincos calls of the table's angles cost,
// which no library can take off.
constexpr fk_textbook_fn<dh_row> fk_textbook_given{&panda, {0.0, flange_d, 1.0, 0.0}};

__attribute__((noinline)) void zn_jacobian(Q const* q, J* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = zn::jacfwd(fk_position)(q[i]);
}

__attribute__((noinline)) void zn_textbook_jacobian(Q const* q, J* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = zn::jacfwd(fk_textbook)(q[i]);
}

__attribute__((noinline)) void zn_textbook_given_jacobian(Q const* q, J* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = zn::jacfwd(fk_textbook_given)(q[i]);
}

__attribute__((noinline)) void zn_fk(Q const* q, zn::tensor<double, 3>* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = fk_position(q[i]);
}

// ---------------------------------------------------------------------------------------------
// Hand-written geometric Jacobian, plain doubles: the same chain of transforms, keeping each
// frame's z axis and origin; column i = z_i x (p - o_i).

__attribute__((noinline)) void hand_jacobian(Q const* qs, J* out, std::size_t n) {
  for (std::size_t b = 0; b < n; ++b) {
    double const* q = qs[b].data();
    double m[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};  // rows 0..2 of the running transform
    double z[7][3], o[7][3];
    for (std::size_t i = 0; i < 7; ++i) {
      dh_row const& p = panda[i];
      double const c = std::cos(q[i]), s = std::sin(q[i]);
      double const t[12] = {c,     -s,          0,        p.a,      s * p.ca, c * p.ca,
                            -p.sa, -p.d * p.sa, s * p.sa, c * p.sa, p.ca,     p.d * p.ca};
      double r[12];
      for (int row = 0; row < 3; ++row) {
        for (int col = 0; col < 4; ++col) {
          double acc =
              m[row * 4 + 0] * t[col] + m[row * 4 + 1] * t[4 + col] + m[row * 4 + 2] * t[8 + col];
          if (col == 3) acc += m[row * 4 + 3];
          r[row * 4 + col] = acc;
        }
      }
      for (int k = 0; k < 12; ++k) m[k] = r[k];
      for (int k = 0; k < 3; ++k) {
        z[i][k] = m[k * 4 + 2];
        o[i][k] = m[k * 4 + 3];
      }
    }
    double pe[3];
    for (int k = 0; k < 3; ++k) pe[k] = m[k * 4 + 3] + flange_d * m[k * 4 + 2];
    double* jac = out[b].data();
    for (std::size_t i = 0; i < 7; ++i) {
      double const d0 = pe[0] - o[i][0], d1 = pe[1] - o[i][1], d2 = pe[2] - o[i][2];
      jac[0 * 7 + i] = z[i][1] * d2 - z[i][2] * d1;
      jac[1 * 7 + i] = z[i][2] * d0 - z[i][0] * d2;
      jac[2 * 7 + i] = z[i][0] * d1 - z[i][1] * d0;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Ceres Jet<double, 7>: the same forward kinematics on plain 4x4 arrays of Jets.

#if defined(ZENITH_BENCH_CERES)
using jet = ceres::Jet<double, 7>;

__attribute__((noinline)) void jet_jacobian(Q const* qs, J* out, std::size_t n) {
  for (std::size_t b = 0; b < n; ++b) {
    jet q[7];
    for (int i = 0; i < 7; ++i) q[i] = jet(qs[b][std::size_t(i)], i);
    jet m[16];
    for (int k = 0; k < 16; ++k) m[k] = jet(k % 5 == 0 ? 1.0 : 0.0);
    for (std::size_t i = 0; i < 7; ++i) {
      dh_row const& p = panda[i];
      jet const c = cos(q[i]), s = sin(q[i]);
      jet const t[16] = {c,        -s,       jet(0.0),   jet(p.a),
                         s * p.ca, c * p.ca, jet(-p.sa), jet(-p.d * p.sa),
                         s * p.sa, c * p.sa, jet(p.ca),  jet(p.d * p.ca),
                         jet(0.0), jet(0.0), jet(0.0),   jet(1.0)};
      jet r[16];
      for (int row = 0; row < 4; ++row)
        for (int col = 0; col < 4; ++col) {
          jet acc = m[row * 4] * t[col];
          for (int k = 1; k < 4; ++k) acc += m[row * 4 + k] * t[k * 4 + col];
          r[row * 4 + col] = acc;
        }
      for (int k = 0; k < 16; ++k) m[k] = r[k];
    }
    for (int row = 0; row < 3; ++row) {
      jet const pr = m[row * 4 + 3] + flange_d * m[row * 4 + 2];
      for (int i = 0; i < 7; ++i) out[b](std::size_t(row), std::size_t(i)) = pr.v[i];
    }
  }
}
#endif

// ---------------------------------------------------------------------------------------------

inline void clobber(void const* p) { asm volatile("" : : "r"(p) : "memory"); }

constexpr std::size_t batch = 256;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double max_rel_diff(std::vector<J> const& a, std::vector<J> const& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t k = 0; k < J::count; ++k) {
      double const scale = std::max(1.0, std::abs(b[i][k]));
      worst = std::max(worst, std::abs(a[i][k] - b[i][k]) / scale);
    }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  int const trials = argc > 1 ? std::atoi(argv[1]) : 41;
  int const reps = 40;  // batches per trial

  std::vector<Q> q(batch);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < 7; ++i) q[b][i] = std::sin(0.37 * double(b) + 1.13 * double(i));

  struct impl {
    char const* name;
    void (*run)(Q const*, J*, std::size_t);
    std::vector<J> out;
    std::vector<double> ns;
  };
  std::vector<impl> impls;
  impls.push_back({"zenith jacfwd", zn_jacobian, std::vector<J>(batch), {}});
  impls.push_back({"hand-written geometric", hand_jacobian, std::vector<J>(batch), {}});
  impls.push_back(
      {"zenith jacfwd, textbook form", zn_textbook_jacobian, std::vector<J>(batch), {}});
  impls.push_back({"(textbook form, the table's cos / sin given)",
                   zn_textbook_given_jacobian,
                   std::vector<J>(batch),
                   {}});
#if defined(ZENITH_BENCH_CERES)
  impls.push_back({"Ceres Jet<double, 7>", jet_jacobian, std::vector<J>(batch), {}});
#endif
  std::vector<zn::tensor<double, 3>> pos(batch);
  std::vector<double> fk_ns;

  using clock = std::chrono::steady_clock;
  for (int t = -2; t < trials; ++t) {  // two warm-up trials
    for (auto& im : impls) {
      auto const t0 = clock::now();
      for (int r = 0; r < reps; ++r) {
        im.run(q.data(), im.out.data(), batch);
        clobber(im.out.data());
      }
      double const ns =
          std::chrono::duration<double, std::nano>(clock::now() - t0).count() / (reps * batch);
      if (t >= 0) im.ns.push_back(ns);
    }
    auto const t0 = clock::now();
    for (int r = 0; r < reps; ++r) {
      zn_fk(q.data(), pos.data(), batch);
      clobber(pos.data());
    }
    double const ns =
        std::chrono::duration<double, std::nano>(clock::now() - t0).count() / (reps * batch);
    if (t >= 0) fk_ns.push_back(ns);
  }

  double checksum = 0;
  for (auto const& im : impls)
    for (auto const& j : im.out)
      for (double v : j) checksum += v;
  double const hand = median(impls[1].ns);
  std::printf(
      "position Jacobian (3x7) of a 7-joint arm, %zu joint vectors x %d reps, %d trials\n\n", batch,
      reps, trials);
  std::printf(
      "| implementation | median ns | best ns | / hand-written | max rel. diff vs hand |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (auto const& im : impls)
    std::printf("| %s | %.1f | %.1f | %.2f | %.1e |\n", im.name, median(im.ns),
                *std::min_element(im.ns.begin(), im.ns.end()), median(im.ns) / hand,
                max_rel_diff(im.out, impls[1].out));
  std::printf("| (forward kinematics only, double) | %.1f | %.1f | %.2f | |\n", median(fk_ns),
              *std::min_element(fk_ns.begin(), fk_ns.end()), median(fk_ns) / hand);
#if defined(ZENITH_BENCH_CERES)
  std::printf("\nJet / zenith: %.2f, Jet / zenith textbook form: %.2f (medians)\n",
              median(impls[4].ns) / median(impls[0].ns), median(impls[4].ns) / median(impls[2].ns));
#endif
  std::printf("checksum %.6f\n", checksum);
  for (auto const& im : impls)
    if (max_rel_diff(im.out, impls[1].out) > 1e-9) {
      std::printf("MISMATCH: %s\n", im.name);
      return 1;
    }
  return 0;
}
