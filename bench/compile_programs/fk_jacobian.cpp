// A fixed-size robotics Jacobian written the way Ceres users write forward kinematics: one
// templated function, constants as T(...), a chain from an identity 4x4, DH constants' cos and
// sin computed at run time; jacfwd gives the 3x7 position Jacobian, checked against central
// differences.
#include <array>
#include <cmath>
#include <cstdio>
#include <zenith/zenith.hpp>

namespace zn = zenith;

struct dh {
  double a, d, alpha;
};
constexpr double pi2 = 1.5707963267948966;
constexpr std::array<dh, 7> arm{{{0.0, 0.333, 0.0},
                                 {0.0, 0.0, -pi2},
                                 {0.0, 0.316, pi2},
                                 {0.0825, 0.0, pi2},
                                 {-0.0825, 0.384, -pi2},
                                 {0.0, 0.0, pi2},
                                 {0.088, 0.0, pi2}}};

template <class T>
zn::tensor<T, 4, 4> link(T const& q, dh const& p) {
  T const c = zn::cos(q), s = zn::sin(q);
  T const ca = T(std::cos(p.alpha)), sa = T(std::sin(p.alpha));
  return {c,      -s,     T(0.0), T(p.a),     //
          s * ca, c * ca, -sa,    -sa * p.d,  //
          s * sa, c * sa, ca,     ca * p.d,   //
          T(0.0), T(0.0), T(0.0), T(1.0)};
}

struct position {
  template <class Q>
  auto operator()(Q const& q) const {
    using T = typename Q::value_type;
    zn::tensor<T, 4, 4> m = zn::tensor<T, 4, 4>::identity();
    for (std::size_t i = 0; i < 7; ++i) m = zn::matmul(m, link(q(i), arm[i]));
    return zn::tensor<T, 3>{m(0, 3), m(1, 3), m(2, 3)};
  }
};

int main() {
  zn::tensor<double, 7> q{0.1, -0.785, 0.2, -2.356, 0.3, 1.571, 0.785};
  zn::tensor<double, 3, 7> J = zn::jacfwd(position{})(q);
  double worst = 0;
  for (std::size_t i = 0; i < 7; ++i) {
    zn::tensor<double, 7> qp = q, qm = q;
    qp(i) += 1e-6;
    qm(i) -= 1e-6;
    zn::tensor<double, 3> up = position{}(qp), down = position{}(qm);
    for (std::size_t r = 0; r < 3; ++r)
      worst = std::max(worst, std::abs((up(r) - down(r)) / 2e-6 - J(r, i)));
  }
  std::printf("largest Jacobian error %.2e\n", worst);
  return worst < 1e-7 ? 0 : 1;
}
