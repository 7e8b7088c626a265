#pragma once
// Shared by the tests of ops that normalize slices along one axis (softmax, layer_norm): random
// inputs, a walk over the slices of row-major data for the double-precision references, and the
// comparison with them.
#include <catch2/catch.hpp>
#include <cstddef>
#include <random>
#include <vector>
#include <zenith/zenith.hpp>

namespace along_axis {

namespace zn = zenith;

template <class T>
zn::array<T> random_array(zn::shape s, unsigned seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(s.numel());
  for (auto& x : v) x = T(d(rng));
  return zn::array<T>(s, v);
}

template <class T>
std::vector<double> values(zn::array<T> const& a) {
  std::vector<double> v(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) v[i] = double(a.data()[i]);
  return v;
}

// Calls f(n, at) once per slice along axis of row-major data of shape s, where at(i) is the
// flat index of the slice's element i (0 <= i < n).
template <class F>
void for_each_slice(zn::shape const& s, std::size_t axis, F&& f) {
  std::size_t outer = 1, n = s[axis], inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= s[i];
  for (std::size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t j = 0; j < inner; ++j)
      f(n, [&](std::size_t i) { return o * n * inner + i * inner + j; });
}

template <class T>
void check_against_ref(zn::array<T> const& got, std::vector<double> const& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    REQUIRE(double(got.data()[i]) == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

}  // namespace along_axis
