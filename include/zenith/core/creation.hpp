#pragma once
// Creation functions: zeros, ones, full, arange, linspace, eye.
#include <algorithm>
#include <cmath>
#include <string>

#include "array.hpp"

namespace zenith {

// On the CPU, or on device d (filled on the host, then copied there).
template <element T>
array<T> full(shape s, T value, device d = cpu) {
  auto a = array<T>::empty(s);
  detail::fill_values(a.data(), a.size(), value);
  return d == cpu ? a : a.to(d);
}
template <element T>
array<T> zeros(shape s, device d = cpu) {
  return full<T>(s, T(0), d);
}
template <element T>
array<T> ones(shape s, device d = cpu) {
  return full<T>(s, T(1), d);
}

// Values start, start + step, ... below stop (above it for a negative step).
template <element T>
array<T> arange(double start, double stop, double step = 1.0) {
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(stop))
    throw value_error("arange: step must be finite and non-zero and bounds finite (start " +
                      std::to_string(start) + ", stop " + std::to_string(stop) + ", step " +
                      std::to_string(step) + ")");
  double n = std::ceil((stop - start) / step);
  std::size_t count = n > 0 ? std::size_t(n) : 0;
  auto a = array<T>::empty(shape{count});
  for (std::size_t i = 0; i < count; ++i) a.data()[i] = T(compute_t<T>(start + double(i) * step));
  detail::note_host_written(a.data(), a.size());
  return a;
}
template <element T>
array<T> arange(double stop) {
  return arange<T>(0.0, stop, 1.0);
}

// num evenly spaced values from start to stop (inclusive when endpoint).
template <element T>
array<T> linspace(double start, double stop, std::size_t num = 50, bool endpoint = true) {
  auto a = array<T>::empty(shape{num});
  double div = endpoint ? double(num) - 1 : double(num);
  double step = div > 0 ? (stop - start) / div : 0.0;
  for (std::size_t i = 0; i < num; ++i) a.data()[i] = T(compute_t<T>(start + double(i) * step));
  if (endpoint && num > 1) a.data()[num - 1] = T(compute_t<T>(stop));
  detail::note_host_written(a.data(), a.size());
  return a;
}

// The n x n identity (n x m with ones on diagonal k if given), as numpy.eye(n, m, k).
namespace detail {
inline constexpr std::size_t eye_square = std::size_t(-1);  // m not given: m = n
}
template <element T>
array<T> eye(std::size_t n, std::size_t m = detail::eye_square, long long k = 0) {
  if (m == detail::eye_square) m = n;  // (not 0: eye(3, 0) is a 3 x 0 array, as in NumPy)
  auto a = zeros<T>(shape{n, m});
  for (std::size_t i = 0; i < n; ++i) {
    long long j = (long long)i + k;
    if (j >= 0 && j < (long long)m) a.data()[i * m + std::size_t(j)] = T(1);
  }
  detail::note_host_written(a.data(), a.size());
  return a;
}

}  // namespace zenith
