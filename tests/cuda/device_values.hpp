#pragma once
// Test inputs for device arrays, values spread over [lo, hi] in a scrambled order (a kernel that
// reads the wrong element gives a wrong answer), and the comparison of a result on a device with
// the CPU's. Shared by the stand-in device's tests (emulated_gpu.hpp) and the ones on a real
// GPU (gpu_*.cpp).
#include <zenith/zenith.hpp>

#include <cstddef>
#include <vector>

namespace zenith_test {

template <class T>
zenith::array<T> values(zenith::shape s, double lo, double hi) {
  std::vector<T> v(s.numel());
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = T(lo + (hi - lo) * double((i * 7919) % 1009) / 1008.0);
  return zenith::array<T>(s, v);
}

// Whether on_device lives on a device and holds on_host's values within tol (relative and
// absolute): a GPU's sin, exp and tanh are not the CPU's to the last bit.
template <class T>
bool matches_host(zenith::array<T> const& on_device, zenith::array<T> const& on_host, double tol) {
  return on_device.device() != zenith::cpu && on_device.shape() == on_host.shape() &&
         zenith::allclose(on_device.to(zenith::cpu), on_host, tol, tol);
}

}  // namespace zenith_test
