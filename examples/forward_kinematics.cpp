// Forward kinematics of a 7-joint arm and its position Jacobian with zn::jacfwd.
//
// The kinematics are written the textbook way, once, generic over the number type: a chain of
// per-joint 4x4 homogeneous transforms built from scalars (modified Denavit-Hartenberg, with a
// Franka-Panda-like table). Called with a tensor<double, 7> it gives the position; jacfwd calls
// it with a tensor of dual numbers and reads the 3x7 Jacobian out of the result. Fixed-size
// throughout: nothing touches the heap.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <zenith/zenith.hpp>

namespace zn = zenith;

// Modified DH (Craig): joint i's transform is RotX(alpha_{i-1}) TransX(a_{i-1}) RotZ(q_i)
// TransZ(d_i).
struct dh_row {
  double a, d, alpha;
};
constexpr double half_pi = 1.5707963267948966;
constexpr std::array<dh_row, 7> panda{{
    {0.0, 0.333, 0.0},
    {0.0, 0.0, -half_pi},
    {0.0, 0.316, half_pi},
    {0.0825, 0.0, half_pi},
    {-0.0825, 0.384, -half_pi},
    {0.0, 0.0, half_pi},
    {0.088, 0.0, half_pi},
}};
constexpr double flange = 0.107;  // the flange sits 0.107 m along the last joint's z axis

// One joint's homogeneous transform. T is double, or a derivative number under jacfwd.
template <class T>
zn::tensor<T, 4, 4> joint_transform(T const& q, dh_row const& p) {
  T const c = zn::cos(q), s = zn::sin(q);
  double const ca = std::cos(p.alpha), sa = std::sin(p.alpha);  // constants: plain double
  return {c,      -s,     0.0, p.a,                             //
          s * ca, c * ca, -sa, -p.d * sa,                       //
          s * sa, c * sa, ca,  p.d * ca,                        //
          0.0,    0.0,    0.0, 1.0};
}

// The flange position for joint angles q (a tensor<T, 7>).
auto fk_position = [](auto const& q) {
  using T = typename std::remove_cvref_t<decltype(q)>::value_type;
  zn::tensor<T, 4, 4> m = joint_transform(q(0), panda[0]);
  for (std::size_t i = 1; i < 7; ++i) m = zn::matmul(m, joint_transform(q(i), panda[i]));
  return zn::tensor<T, 3>{m(0, 3) + flange * m(0, 2), m(1, 3) + flange * m(1, 2),
                          m(2, 3) + flange * m(2, 2)};
};

int main() {
  zn::tensor<double, 7> const q{0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785};  // a "ready" pose

  zn::tensor<double, 3> const p = fk_position(q);
  zn::tensor<double, 3, 7> const jac = zn::jacfwd(fk_position)(q);

  std::printf("flange position: (%.4f, %.4f, %.4f) m\n\n", p(0), p(1), p(2));
  std::printf("position Jacobian dp/dq (m/rad):\n");
  for (std::size_t r = 0; r < 3; ++r) {
    std::printf("  %c:", "xyz"[r]);
    for (std::size_t i = 0; i < 7; ++i) std::printf(" %8.4f", jac(r, i));
    std::printf("\n");
  }

  // A small joint step moves the flange by about J dq.
  zn::tensor<double, 7> dq;
  for (std::size_t i = 0; i < 7; ++i) dq(i) = 1e-4 * double(i + 1);
  zn::tensor<double, 3> const moved = fk_position(zn::tensor<double, 7>(q + dq));
  zn::tensor<double, 3> const predicted = p + zn::matmul(jac, dq);
  std::printf("\nstep dq: FK moved to (%.7f, %.7f, %.7f), J dq predicts (%.7f, %.7f, %.7f)\n",
              moved(0), moved(1), moved(2), predicted(0), predicted(1), predicted(2));
  // The step is small: the first-order prediction agrees to its second-order error.
  double worst = 0;
  for (std::size_t r = 0; r < 3; ++r) worst = std::max(worst, std::abs(moved(r) - predicted(r)));
  std::printf("largest difference %.2e m: %s\n", worst, worst < 1e-6 ? "ok" : "FAILED");
  return worst < 1e-6 ? 0 : 1;
}
