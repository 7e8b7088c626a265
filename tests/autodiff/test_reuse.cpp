// A costly value read by several loops (reuse_node, autodiff/reuse.hpp): a cotangent several
// operands' rules read, or a transcendental of the forward pass that memoize keeps. Evaluated
// once where it fits in cache, recomputed by each reader above that. Both ways must give the
// gradient the analytic formula and finite differences give, on both loop paths.
#include <cmath>
#include <type_traits>

#include "finite_differences.hpp"

using fd::check_grads;
using fd::random_array;

namespace {

// Both evaluation policies: a size stored in a buffer and one recomputed by every reader.
constexpr std::size_t stored_n = 300;
constexpr std::size_t recomputed_n = (zn::reuse_node<zn::array<double>>::max_stored_bytes / 8) + 5;

// The largest relative difference (absolute below 1): one assertion per array, not per element.
template <class T>
double max_error(zn::array<T> const& got, zn::array<double> const& want) {
  REQUIRE(got.shape() == want.shape());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got.data()[i]) - want.data()[i]) /
                                std::max(1.0, std::abs(want.data()[i])));
  return worst;
}

zn::array<double> analytic(zn::array<double> const& x, double (*f)(double)) {
  auto r = zn::array<double>::empty(x.shape());
  for (std::size_t i = 0; i < x.size(); ++i) r.data()[i] = f(x.data()[i]);
  return r;
}

}  // namespace

TEST_CASE("reuse_node stores small values once and recomputes large ones", "[autodiff][reuse]") {
  for (std::size_t n : {std::size_t(1), stored_n, recomputed_n}) {
    INFO("n = " << n);
    auto x = random_array({n}, 7);
    zn::reuse_node node(zn::exp(x) * 2.0);
    bool const stored = n * sizeof(double) <= decltype(node)::max_stored_bytes;
    auto want = analytic(x, [](double v) { return 2 * std::exp(v); });
    for (bool simd : {true, false}) {
      INFO("simd " << simd);
      zn::set_simd_enabled(simd);
      // Two readers: the first evaluates (when stored), the second reads the same buffer.
      zn::array<double> a = node + 0.0;
      zn::array<double> b = node * 1.0;
      zn::set_simd_enabled(true);
      CHECK(node.s->cache.has_value() == stored);
      CHECK(max_error(a, want) <= 1e-14);
      CHECK(max_error(b, want) <= 1e-14);
    }
    if (stored) {
      // Readers after the first never evaluate again: a changed input shows up nowhere.
      x.data()[0] += 1;
      zn::array<double> c = node + 0.0;
      CHECK(c.data()[0] == Approx(want.data()[0]).epsilon(1e-14));
    }
  }
}

TEST_CASE("gradients through a shared costly cotangent, stored and recomputed",
          "[autodiff][reuse]") {
  // At x * y (two operands take the cotangent) the cotangent carries exp(x * y).
  auto f = [](auto const& x, auto const& y) { return zn::sum(zn::exp(x * y)); };
  // At x * x (one array read twice) the same, the two reads summed into one gradient.
  auto g = [](auto const& x) { return zn::sum(zn::exp(x * x) * 0.5); };
  for (std::size_t n : {std::size_t(1), stored_n, recomputed_n}) {
    INFO("n = " << n);
    auto x = random_array({n}, 11), y = random_array({n}, 12);
    for (bool simd : {true, false}) {
      INFO("simd " << simd);
      zn::set_simd_enabled(simd);
      auto [gx, gy] = zn::grad(f, zn::argnums<0, 1>)(x, y);
      zn::array<double> gg = zn::grad(g)(x);
      zn::set_simd_enabled(true);
      auto want_x = zn::array<double>::empty(x.shape());
      auto want_y = zn::array<double>::empty(x.shape());
      auto want_g = zn::array<double>::empty(x.shape());
      for (std::size_t i = 0; i < n; ++i) {
        double xi = x.data()[i], yi = y.data()[i];
        want_x.data()[i] = yi * std::exp(xi * yi);
        want_y.data()[i] = xi * std::exp(xi * yi);
        want_g.data()[i] = xi * std::exp(xi * xi);
      }
      CHECK(max_error(gx, want_x) <= 1e-13);
      CHECK(max_error(gy, want_y) <= 1e-13);
      CHECK(max_error(gg, want_g) <= 1e-13);
    }
  }
  // Against finite differences, with broadcasting (the shared cotangent has the broadcast
  // shape, each operand sums it down to its own) and a rank-0 operand.
  check_grads(f, random_array({3, 1}, 21), random_array({1, 4}, 22));
  check_grads([](auto const& x, auto const& s) { return zn::sum(zn::sin(x * s) / (x + s + 3.0)); },
              random_array({5}, 23), random_array({}, 24));
  check_grads(g, random_array({2, 3}, 25));
}

TEST_CASE("shared costly cotangents in float", "[autodiff][reuse]") {
  auto f = [](auto const& x, auto const& y) { return zn::sum(zn::tanh(x * y)); };
  for (std::size_t n : {stored_n, 2 * recomputed_n}) {
    INFO("n = " << n);
    auto xd = random_array({n}, 31), yd = random_array({n}, 32);
    auto x = zn::array<float>::empty(xd.shape());
    auto y = zn::array<float>::empty(xd.shape());
    for (std::size_t i = 0; i < n; ++i) {
      x.data()[i] = float(xd.data()[i]);
      y.data()[i] = float(yd.data()[i]);
    }
    auto [gx, gy] = zn::grad(f, zn::argnums<0, 1>)(x, y);
    static_assert(std::is_same_v<decltype(gx), zn::array<float>>);
    auto want_x = zn::array<double>::empty(xd.shape());
    auto want_y = zn::array<double>::empty(xd.shape());
    for (std::size_t i = 0; i < n; ++i) {
      double xi = x.data()[i], yi = y.data()[i], t = std::tanh(xi * yi);
      want_x.data()[i] = yi * (1 - t * t);
      want_y.data()[i] = xi * (1 - t * t);
    }
    CHECK(max_error(gx, want_x) <= 1e-6);
    CHECK(max_error(gy, want_y) <= 1e-6);
  }
}

TEST_CASE("a cotangent several operands take is shared, not copied", "[autodiff][reuse]") {
  // shared_ref: copies hold the same tree; evaluating one gives the tree's values.
  auto x = random_array({5}, 41), y = random_array({5}, 42);
  zn::shared_ref r(x * y + 1.0);
  auto copy = r;
  CHECK(copy.p.get() == r.p.get());
  zn::array<double> v = copy * 2.0;
  for (std::size_t i = 0; i < 5; ++i) CHECK(v.data()[i] == 2 * (x.data()[i] * y.data()[i] + 1));
  // Cheap cotangents at nodes with two operands (x * y, x + y, their product), against the
  // analytic gradient and finite differences.
  auto f = [](auto const& a, auto const& b) { return zn::sum((a * b) * (a + b) - a / (b + 3.0)); };
  auto [ga, gb] = zn::grad(f, zn::argnums<0, 1>)(x, y);
  for (std::size_t i = 0; i < 5; ++i) {
    double a = x.data()[i], b = y.data()[i];
    CHECK(ga.data()[i] == Approx(2 * a * b + b * b - 1 / (b + 3)).epsilon(1e-13));
    CHECK(gb.data()[i] == Approx(a * a + 2 * a * b + a / ((b + 3) * (b + 3))).epsilon(1e-13));
  }
  check_grads(f, random_array({3, 1}, 43), random_array({1, 4}, 44));
}

TEST_CASE("memoize keeps costly elementwise nodes below the root", "[autodiff][reuse]") {
  using A = zn::array<double>;
  using zn::autodiff::memoized_t;
  auto x = random_array({4}, 51), y = random_array({4}, 52);
  // Below the root a costly node (exp) is kept; a cheap one (mul) and the root are not.
  using Kept = memoized_t<decltype(x * zn::exp(y))>;
  static_assert(
      std::is_same_v<Kept,
                     zn::map_node<zn::ops::mul, A, zn::reuse_node<zn::map_node<zn::ops::exp, A>>>>);
  static_assert(std::is_same_v<memoized_t<decltype(zn::exp(x * y))>, decltype(zn::exp(x * y))>);
  // A costly node only the value reads is not kept (log's rule reads its operand, a sum's
  // nothing); its operand is, when the log's rule reads it.
  using LogExp = decltype(zn::log(zn::exp(x)) + x);
  static_assert(
      std::is_same_v<
          memoized_t<LogExp>,
          zn::map_node<zn::ops::add,
                       zn::map_node<zn::ops::log, zn::reuse_node<zn::map_node<zn::ops::exp, A>>>,
                       A>>);
  using SumLog = decltype(zn::sum(zn::log(x)));
  static_assert(std::is_same_v<memoized_t<SumLog>, zn::memo_node<SumLog>>);
  static_assert(
      std::is_same_v<memoized_t<decltype(x * zn::log(y))>,
                     zn::map_node<zn::ops::mul, A, zn::reuse_node<zn::map_node<zn::ops::log, A>>>>);
  // A reduction's child is kept too (the sum and exp's rule both read it); integers are not.
  static_assert(zn::autodiff::kept_v<decltype(zn::exp(x))>);
  static_assert(!zn::autodiff::kept_v<decltype(x * y)>);
  static_assert(!zn::autodiff::kept_v<decltype(zn::abs(zn::array<int>()))>);

  for (std::size_t n : {std::size_t(1), stored_n, recomputed_n}) {
    INFO("n = " << n);
    auto a = random_array({n}, 53), b = random_array({n}, 54);
    auto m = zn::autodiff::memoize(a * zn::exp(b));
    auto const& kept = zn::get<1>(m.children);
    bool const stored = n * sizeof(double) <= std::remove_cvref_t<decltype(kept)>::max_stored_bytes;
    zn::array<double> v = m;
    CHECK(kept.s->cache.has_value() == stored);
    auto want = zn::array<double>::empty({n});
    for (std::size_t i = 0; i < n; ++i) want.data()[i] = a.data()[i] * std::exp(b.data()[i]);
    CHECK(max_error(v, want) <= 1e-14);
  }
}

TEST_CASE("gradients and tangents through kept forward nodes", "[autodiff][reuse]") {
  // exp(y) is read by the value, by mul's partial for x, and by exp's own partial; log(x * x + 1)
  // by the value and by nothing else (log's partial reads its operand, not itself).
  auto f = [](auto const& x, auto const& y) {
    return zn::sum(x * zn::exp(y) + zn::log(x * x + 1.0) * zn::tanh(y));
  };
  for (std::size_t n : {std::size_t(1), stored_n, recomputed_n}) {
    INFO("n = " << n);
    auto x = random_array({n}, 61), y = random_array({n}, 62);
    auto tx = random_array({n}, 63), ty = random_array({n}, 64);
    auto want_x = zn::array<double>::empty({n}), want_y = zn::array<double>::empty({n});
    double want_value = 0, want_tangent = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double xi = x.data()[i], yi = y.data()[i], t = std::tanh(yi);
      double l = std::log(xi * xi + 1);
      want_value += xi * std::exp(yi) + l * t;
      want_x.data()[i] = std::exp(yi) + 2 * xi / (xi * xi + 1) * t;
      want_y.data()[i] = xi * std::exp(yi) + l * (1 - t * t);
      want_tangent += want_x.data()[i] * tx.data()[i] + want_y.data()[i] * ty.data()[i];
    }
    for (bool simd : {true, false}) {
      INFO("simd " << simd);
      zn::set_simd_enabled(simd);
      auto [value, g] = zn::value_and_grad(f, zn::argnums<0, 1>)(x, y);
      auto [out, tangent] = zn::jvp(f, std::make_tuple(x, y), std::make_tuple(tx, ty));
      zn::set_simd_enabled(true);
      double scale = std::max(1.0, std::abs(want_value));
      CHECK(std::abs(value.item() - want_value) <= 1e-12 * scale);
      CHECK(max_error(std::get<0>(g), want_x) <= 1e-13);
      CHECK(max_error(std::get<1>(g), want_y) <= 1e-13);
      CHECK(std::abs(out.item() - want_value) <= 1e-12 * scale);
      CHECK(std::abs(tangent.item() - want_tangent) <=
            1e-12 * std::max(1.0, std::abs(want_tangent)));
    }
  }
  // Broadcast operands and a rank-0 one (the kept node has the broadcast shape or rank 0), a
  // kept node under a non-total reduction, and the same function through the tape (each
  // materialization memoizes its own expression).
  check_grads(f, random_array({3, 1}, 65), random_array({1, 4}, 66));
  check_grads(f, random_array({5}, 67), random_array({}, 68));
  check_grads(
      [](auto const& x) {
        return zn::sum(zn::log(zn::sum(zn::exp(x), {1})) * zn::cos(zn::sum(x * x, {1})));
      },
      random_array({2, 3}, 69));
  check_grads(
      [](zn::array<double> const& x) {
        zn::array<double> h = x;
        for (int k = 0; k < 3; ++k) h = h * zn::exp(zn::sin(h)) + 0.5;
        return zn::sum(h * zn::exp(h));
      },
      random_array({6}, 70));
}
