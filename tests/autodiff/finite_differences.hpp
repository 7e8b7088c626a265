#pragma once
// Shared by the autodiff tests: random inputs, and derivatives by central finite differences in
// double, the independent reference every rule is checked against.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <tuple>
#include <utility>
#include <zenith/zenith.hpp>

namespace zn = zenith;

namespace fd {

inline zn::array<double> random_array(zn::shape s, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  auto a = zn::array<double>::empty(s);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = d(gen);
  return a;
}

// d f / d args[which], by central differences on each element (f returns a scalar expression).
template <class F, class... Args>
zn::array<double> numeric_grad(F const& f, std::size_t which, Args const&... args) {
  std::array<zn::array<double>, sizeof...(Args)> xs{zn::copy_from(args.data(), args.shape())...};
  auto value = [&] {
    return [&]<std::size_t... K>(std::index_sequence<K...>) { return zn::eval(f(xs[K]...)).item(); }
    (std::index_sequence_for<Args...>{});
  };
  zn::array<double>& x = xs[which];
  auto g = zn::zeros<double>(x.shape());
  for (std::size_t i = 0; i < x.size(); ++i) {
    double v = x.data()[i], h = 1e-6 * std::max(1.0, std::abs(v));
    x.data()[i] = v + h;
    double up = value();
    x.data()[i] = v - h;
    double down = value();
    x.data()[i] = v;
    g.data()[i] = (up - down) / (2 * h);
  }
  return g;
}

// got == want elementwise, to tol relative (absolute below 1).
inline void check_close(zn::array<double> const& got, zn::array<double> const& want,
                        double tol = 1e-6) {
  REQUIRE(got.shape() == want.shape());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": derivative " << got.data()[i] << ", finite difference "
                    << want.data()[i]);
    CHECK(std::abs(got.data()[i] - want.data()[i]) <=
          tol * std::max(1.0, std::abs(want.data()[i])));
  }
}

// The gradient with respect to every argument (one grad call), each against finite differences.
template <class F, class... Args>
void check_grads(F const& f, Args const&... args) {
  auto grads = [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto g = zn::grad(f, zn::argnums<K...>)(args...);
    if constexpr (sizeof...(K) == 1)
      return std::make_tuple(g);
    else
      return g;
  }
  (std::index_sequence_for<Args...>{});
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (check_close(std::get<K>(grads), numeric_grad(f, K, args...)), ...);
  }
  (std::index_sequence_for<Args...>{});
}

// Arrays allocated by one gradient, after a first call has warmed the allocator up.
template <class F, class... Args>
std::size_t grad_allocations(F const& f, Args const&... args) {
  zn::array<double> warm = zn::grad(f)(args...);
  auto before = zn::cpu_memory_stats().allocations;
  zn::array<double> g = zn::grad(f)(args...);
  return zn::cpu_memory_stats().allocations - before;
}

}  // namespace fd
