// The value-and-gradient pass (backend/cpu/fused_group.hpp): a loss that sums everything is
// computed with its gradients in one pass. Checked against plain loops and float64 finite
// differences, on the shapes that make the pass fall back (broadcast operands, transposed views,
// barriers whose rules read the cotangent, the tape), with and without threads and SIMD.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

namespace {

using fd::check_close;
using fd::numeric_grad;
using fd::random_array;

template <class T>
zn::array<T> random_of(zn::shape s, unsigned seed) {
  return zn::eval(zn::cast<T>(random_array(s, seed)));
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// sum(a * sin(b) + exp(-c * c)) and its gradients, in plain loops.
template <class T>
void check_against_loops(std::size_t n) {
  auto a = random_of<T>({n}, 1), b = random_of<T>({n}, 2), c = random_of<T>({n}, 3);
  auto f = [](auto const& a, auto const& b, auto const& c) {
    return zn::sum(a * zn::sin(b) + zn::exp(-c * c));
  };
  auto [value, g] = zn::value_and_grad(f, zn::argnums<0, 1, 2>)(a, b, c);
  // Bitwise the value plain evaluation gives: the same blocks, added in the same tree.
  CHECK(same_bits(value.item(), zn::eval(f(a, b, c)).item()));
  auto const& [ga, gb, gc] = g;
  double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  for (std::size_t i = 0; i < n; ++i) {
    double x = a.data()[i], y = b.data()[i], z = c.data()[i];
    INFO("n " << n << ", element " << i);
    CHECK(std::abs(ga.data()[i] - std::sin(y)) <= tol);
    CHECK(std::abs(gb.data()[i] - x * std::cos(y)) <= tol);
    CHECK(std::abs(gc.data()[i] + 2 * z * std::exp(-z * z)) <= tol);
  }
  // Bitwise the same on one thread: threads only decide who runs which blocks.
  std::size_t threads = zn::get_num_threads();
  zn::set_num_threads(1);
  auto [value1, g1] = zn::value_and_grad(f, zn::argnums<0, 1, 2>)(a, b, c);
  zn::set_num_threads(threads);
  CHECK(same_bits(value1.item(), value.item()));
  auto const& [ga1, gb1, gc1] = g1;
  CHECK(std::memcmp(ga1.data(), ga.data(), n * sizeof(T)) == 0);
  CHECK(std::memcmp(gb1.data(), gb.data(), n * sizeof(T)) == 0);
  CHECK(std::memcmp(gc1.data(), gc.data(), n * sizeof(T)) == 0);
}

}  // namespace

TEST_CASE("value and gradients in one pass match plain loops", "[grad][fused_pass]") {
  // One element; a block; a partial block; enough for the thread pool (many blocks, the last one
  // partial); kept values too large to store (computed once per piece, reuse.hpp), for doubles
  // from 40001 elements and for floats at 100003.
  for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(8192), std::size_t(40001),
                        std::size_t(100003)}) {
    check_against_loops<float>(n);
    check_against_loops<double>(n);
  }
}

TEST_CASE("the fused pass gives the same results with SIMD off", "[grad][fused_pass]") {
  auto x = random_array({3, 9001}, 4, 0.1, 2.0);
  auto f = [](auto const& x) { return zn::mean(zn::log(x) * zn::tanh(x) + zn::sqrt(x)); };
  auto [v1, g1] = zn::value_and_grad(f)(x);
  zn::set_simd_enabled(false);
  auto [v0, g0] = zn::value_and_grad(f)(x);
  double plain0 = zn::eval(f(x)).item();
  zn::set_simd_enabled(true);
  CHECK(same_bits(v0.item(), plain0));
  CHECK(same_bits(v1.item(), zn::eval(f(x)).item()));
  CHECK(std::abs(v1.item() - v0.item()) <= 1e-12 * std::abs(v0.item()));
  check_close(g1, g0, 1e-12);
  for (std::size_t i = 0; i < x.size(); ++i) {
    double t = x.data()[i], th = std::tanh(t);
    double want = (std::tanh(t) / t + std::log(t) * (1 - th * th) + 0.5 / std::sqrt(t)) / 27003.0;
    REQUIRE(std::abs(g1.data()[i] - want) <= 1e-15 + 1e-12 * std::abs(want));
  }
}

TEST_CASE("the fused pass falls back where it cannot join", "[grad][fused_pass]") {
  auto x = random_array({4, 6}, 5, 0.2, 1.5), y = random_array({6, 4}, 6);
  auto b = random_array({6}, 7), w = random_array({6, 6}, 8);
  auto sq = random_array({6, 6}, 9, 0.2, 1.5);
  SECTION("a bias gradient sums over the batch") {
    auto f = [](auto const& x, auto const& b) { return zn::sum(zn::tanh(x + b) * zn::exp(x)); };
    auto [gx, gb] = zn::grad(f, zn::argnums<0, 1>)(x, b);
    check_close(gx, numeric_grad(f, 0, x, b));
    check_close(gb, numeric_grad(f, 1, x, b));
  }
  SECTION("a transposed operand is read non-contiguously") {
    auto f = [](auto const& x, auto const& y) { return zn::sum(zn::exp(zn::transpose(x)) * y); };
    auto [gx, gy] = zn::grad(f, zn::argnums<0, 1>)(x, y);
    check_close(gx, numeric_grad(f, 0, x, y));
    check_close(gy, numeric_grad(f, 1, x, y));
  }
  SECTION("an operand smaller than the pass broadcasts") {
    auto f = [](auto const& x, auto const& b) { return zn::sum(zn::sin(b) * zn::exp(x)); };
    auto [gx, gb] = zn::grad(f, zn::argnums<0, 1>)(x, b);
    check_close(gx, numeric_grad(f, 0, x, b));
    check_close(gb, numeric_grad(f, 1, x, b));
  }
  SECTION("a barrier's rule reads the cotangent") {
    // matmul's rule multiplies its cotangent, exp(s) * ..., by w, outside the pass.
    auto f = [](auto const& s, auto const& w) {
      return zn::sum(zn::exp(s) * zn::matmul(zn::exp(s), w));
    };
    auto [gs, gw] = zn::grad(f, zn::argnums<0, 1>)(sq, w);
    check_close(gs, numeric_grad(f, 0, sq, w));
    check_close(gw, numeric_grad(f, 1, sq, w));
  }
  SECTION("a loss with kept dims, and a mean") {
    auto f = [](auto const& x) { return zn::mean(zn::sigmoid(x) * x, {0, 1}, true); };
    zn::array<double> g = zn::grad(f)(x);
    check_close(g, numeric_grad(f, 0, x));
  }
  SECTION("materialized intermediates on the tape") {
    auto f = [](auto const& x, auto const& w) {
      zn::array<double> h = zn::tanh(zn::matmul(x, w));
      h = zn::exp(h) * h;
      return zn::sum(zn::sin(h) * h);
    };
    auto [gx, gw] = zn::grad(f, zn::argnums<0, 1>)(x, w);
    check_close(gx, numeric_grad(f, 0, x, w));
    check_close(gw, numeric_grad(f, 1, x, w));
  }
}

namespace {
// Stands in for the cotangent store: counts the sums memoize queues, and evaluates them itself.
struct counting_queue {
  int queued = 0;
  template <class Op, class T, class E>
  std::optional<zn::array<T>> queue_total(E const& e, zn::shape const& s) {
    ++queued;
    return zn::eval(zn::reshape(
        zn::detail::make_reduce<Op>(e, zn::detail::all_axes_mask(e.shape().size()), false, "sum"),
        s));
  }
};
template <class E>
int queued_sums(E const& e) {
  counting_queue q;
  auto m = zn::autodiff::memoize(e, q);
  (void)m;
  return q.queued;
}
}  // namespace

TEST_CASE("memoize queues exactly the sums that no rule reads", "[grad][fused_pass]") {
  auto x = random_array({6}, 16), y = random_array({6}, 17), s = random_array({}, 18, 0.5, 2);
  // Numbers around it are constants: their partials are never formed.
  CHECK(queued_sums(-0.5 * zn::sum(zn::square(x - 0.3)) / 1.7 - 2.0) == 1);
  CHECK(queued_sums(zn::mean(x) + zn::sum(zn::exp(y)) * 3.0) == 2);
  // s's partial in sum(x) / s reads the sum; in sum(x) * sum(y) each reads the other; exp and
  // square read their operand; max is not a sum.
  CHECK(queued_sums(zn::sum(x) / zn::square(s)) == 0);
  CHECK(queued_sums(zn::sum(x) * zn::sum(y)) == 0);
  CHECK(queued_sums(zn::exp(zn::sum(x)) + 1.0) == 0);
  CHECK(queued_sums(zn::square(zn::mean(x))) == 0);
  CHECK(queued_sums(zn::max(x) * 2.0) == 0);
  // The outer sum is queued; the mean below it is evaluated first, since the queued sum reads it.
  CHECK(queued_sums(zn::sum(zn::square(x - zn::mean(x))) * 0.5) == 1);
}

TEST_CASE("sums below the root that no rule reads join the gradients' pass", "[grad][fused_pass]") {
  // -0.5 * sum(square(x - mu)) / s2 - c: the sum's cotangent is a constant, so the sum is
  // queued with the gradient and the value computed after the pass. Same value as plain
  // evaluation, bit for bit (the same blocks, added in the same tree), at every size.
  for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(8192), std::size_t(40001)}) {
    INFO("n " << n);
    auto x = random_array({n}, 12);
    auto f = [](auto const& x) {
      return -0.5 * zn::sum(zn::square(x - 0.3)) / 1.7 - 2.0 + zn::mean(zn::exp(x)) * 3.0;
    };
    auto [value, g] = zn::value_and_grad(f)(x);
    CHECK(same_bits(value.item(), zn::eval(f(x)).item()));
    for (std::size_t i = 0; i < n; ++i) {
      double t = x.data()[i], want = -(t - 0.3) / 1.7 + 3.0 * std::exp(t) / double(n);
      REQUIRE(std::abs(g.data()[i] - want) <= 1e-14 * (1 + std::abs(want)));
    }
  }
  auto x = random_array({5, 3}, 13), y = random_array({4}, 14), s = random_array({}, 15, 0.5, 2);
  SECTION("sums of different sizes, one read by a rule, one under another sum") {
    // sum(y) has another size than the gradients of x: evaluated apart. sum(x) / square(s):
    // s's rule reads it. mean(x) under a queued sum: evaluated before that sum is.
    auto f = [](auto const& x, auto const& y, auto const& s) {
      return 2.0 * zn::sum(zn::exp(y)) - zn::sum(x) / zn::square(s) +
             zn::sum(zn::square(x - zn::mean(x))) * 0.5;
    };
    auto [value, g] = zn::value_and_grad(f, zn::argnums<0, 1, 2>)(x, y, s);
    CHECK(std::abs(value.item() - zn::eval(f(x, y, s)).item()) <= 1e-13);
    auto const& [gx, gy, gs] = g;
    check_close(gx, numeric_grad(f, 0, x, y, s));
    check_close(gy, numeric_grad(f, 1, x, y, s));
    check_close(gs, numeric_grad(f, 2, x, y, s));
  }
  SECTION("under vjp, whose pullback runs later, the sums are evaluated first") {
    auto f = [](auto const& x) { return zn::sum(zn::square(x)) * 0.25 + 1.0; };
    auto [out, pullback] = zn::vjp(f, x);
    CHECK(std::abs(out.item() - zn::eval(f(x)).item()) <= 1e-15);
    auto [gx] = pullback(zn::full<double>({}, 2.0));
    check_close(gx, zn::eval(x * 1.0));
  }
}

TEST_CASE("loops of one pass read a large kept value at their own positions",
          "[grad][fused_pass]") {
  // Two loops of one group read the same kept exp(y), too large to store and so computed per
  // piece, through two different slices: each must get its own elements, not the values the
  // other loop computed for the piece.
  std::size_t n = 40000;
  auto y = random_array({n + 1}, 11);
  zn::reuse_node kept(zn::exp(y));
  REQUIRE_FALSE(decltype(kept)::stores(n + 1));
  zn::detail::fused_group group;
  auto [upper, joined1] =
      zn::detail::store_or_evaluate<double>(group, zn::slice(kept, 0, 1, n + 1));
  auto [lower, joined2] = zn::detail::store_or_evaluate<double>(group, zn::slice(kept, 0, 0, n));
  auto [twice, joined3] =
      zn::detail::store_or_evaluate<double>(group, zn::slice(kept, 0, 1, n + 1) * 2.0);
  REQUIRE(joined1);
  REQUIRE(joined2);
  REQUIRE(joined3);
  group.run();
  for (std::size_t i = 0; i < n; ++i) {
    INFO("element " << i);
    double hi = std::exp(y.data()[i + 1]), lo = std::exp(y.data()[i]);
    REQUIRE(std::abs(upper.data()[i] - hi) <= 1e-15 * hi);
    REQUIRE(std::abs(lower.data()[i] - lo) <= 1e-15 * lo);
    REQUIRE(twice.data()[i] == 2 * upper.data()[i]);
  }
}

namespace {
// A sum and a store queued as one loop (queue_total_with_store) against the two queued apart:
// the same bits in both outputs.
template <class T>
void check_total_with_store(std::size_t n) {
  INFO("n " << n << ", " << (sizeof(T) == 4 ? "float" : "double"));
  auto x = random_of<T>({n}, 21), y = random_of<T>({n}, 22);
  auto value_expr = zn::square(x - T(0.3)) * y;
  auto ct_expr = zn::sin(x) * T(-1.5) + y;

  zn::detail::fused_group apart;
  auto value_apart = zn::detail::queue_total<zn::ops::reduce_sum, T>(apart, value_expr, {});
  REQUIRE(value_apart);
  auto [ct_apart, joined] = zn::detail::store_or_evaluate<T>(apart, ct_expr);
  REQUIRE(joined);
  apart.run();

  zn::detail::fused_group together;
  auto value = zn::array<T>::empty({});
  auto joined_ct =
      zn::detail::queue_total_with_store<zn::ops::reduce_sum, T, decltype(value_expr), T>(
          together, value_expr, value, ct_expr);
  REQUIRE(joined_ct);
  REQUIRE(joined_ct->second);
  zn::array<T> ct = joined_ct->first;
  together.run();
  CHECK(same_bits(value.item(), value_apart->item()));
  CHECK(std::memcmp(ct.data(), ct_apart.data(), n * sizeof(T)) == 0);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double d = double(x.data()[i]) - 0.3;
    sum += d * d * double(y.data()[i]);
  }
  CHECK(std::abs(double(value.item()) - sum) <= (sizeof(T) == 4 ? 1e-4 : 1e-12) * (1 + n));
}
}  // namespace

TEST_CASE("a sum and a gradient share one loop, bit for bit as two", "[grad][fused_pass]") {
  // One element; a tail shorter than a batch; a block; a block and one; the largest group that
  // runs in whole blocks (four, over the thread pool).
  for (bool simd : {true, false}) {
    zn::set_simd_enabled(simd);
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(8192), std::size_t(8193),
                          std::size_t(32768)}) {
      check_total_with_store<float>(n);
      check_total_with_store<double>(n);
    }
  }
  zn::set_simd_enabled(true);
  SECTION("a cotangent another size, of another lane width, or in pieces gets its own loop") {
    auto x = random_array({8}, 23);
    auto value = zn::array<double>::empty({});
    zn::detail::fused_group group;
    auto twice = x * 2.0;
    using E = decltype(twice);
    CHECK_FALSE(zn::detail::queue_total_with_store<zn::ops::reduce_sum, double, E, double>(
        group, twice, value, zn::slice(x, 0, 0, 4)));
    CHECK_FALSE(zn::detail::queue_total_with_store<zn::ops::reduce_sum, double, E, float>(
        group, twice, value, zn::cast<float>(x)));
    // A group that runs in pieces keeps one loop per output.
    auto big = random_array({40001}, 25);
    auto big2 = big * 2.0;
    CHECK_FALSE(
        zn::detail::queue_total_with_store<zn::ops::reduce_sum, double, decltype(big2), double>(
            group, big2, value, zn::exp(big)));
    CHECK(group.empty());
    // A transposed operand is not one row: the cotangent is computed on its own, now.
    auto m = random_array({4, 2}, 24);
    auto mt = zn::transpose(m);
    auto r = zn::detail::queue_total_with_store<zn::ops::reduce_sum, double, decltype(mt), double>(
        group, mt, value, zn::exp(mt));
    REQUIRE(r);
    CHECK_FALSE(r->second);
    CHECK(group.empty());
    check_close(r->first, zn::eval(zn::exp(mt)), 0);
    // A leaf read by broadcast (stride 0): the pair has one loop body, for unit strides only.
    auto one = random_array({1}, 26);
    auto shifted = x - one;
    r = zn::detail::queue_total_with_store<zn::ops::reduce_sum, double, decltype(shifted), double>(
        group, shifted, value, zn::exp(shifted));
    REQUIRE(r);
    CHECK_FALSE(r->second);
    CHECK(group.empty());
    check_close(r->first, zn::eval(zn::exp(x - one)), 0);
    // The same in two dimensions: the cotangent is computed over the one row its leaves were
    // coalesced to.
    auto m_shifted = m - one;
    r = zn::detail::queue_total_with_store<zn::ops::reduce_sum, double, decltype(m_shifted),
                                           double>(group, m_shifted, value, zn::exp(m_shifted));
    REQUIRE(r);
    CHECK_FALSE(r->second);
    check_close(r->first, zn::eval(zn::exp(m - one)), 0);
  }
}

TEST_CASE("value_and_grad computes the loss's sum in the loop of a gradient",
          "[grad][fused_pass]") {
  // Which sum is held back for a gradient's loop, found on types as memoize queues sums.
  auto x = random_array({6}, 24);
  using nlp = decltype(-0.5 * zn::sum(zn::square(x - 0.3)) / 1.7 - 2.0);
  using target = zn::autodiff::first_queued_total_t<nlp>;
  static_assert(!std::is_void_v<target>);
  static_assert(std::is_same_v<typename target::op, zn::ops::reduce_sum>);
  static_assert(
      std::is_void_v<zn::autodiff::first_queued_total_t<decltype(zn::sum(x) * zn::sum(x))>>);
  static_assert(std::is_void_v<zn::autodiff::first_queued_total_t<decltype(zn::exp(zn::sum(x)))>>);

  // Gradients that take the held sum, that cannot (a broadcast operand's cotangent reduces; the
  // same array read twice adds to the first), and sums no gradient takes: value bit for bit plain
  // evaluation's, gradients against finite differences.
  for (std::size_t n : {std::size_t(1), std::size_t(9), std::size_t(8193), std::size_t(40001)}) {
    INFO("n " << n);
    auto a = random_array({n}, 25), b = random_array({1}, 26);
    auto f = [](auto const& a, auto const& b) {
      return zn::sum(zn::square(a - b) * a) * 0.5 - zn::mean(zn::exp(a)) + 1.0;
    };
    auto [value, g] = zn::value_and_grad(f, zn::argnums<0, 1>)(a, b);
    CHECK(same_bits(value.item(), zn::eval(f(a, b)).item()));
    auto const& [ga, gb] = g;
    for (std::size_t i = 0; i < n; ++i) {
      double t = a.data()[i], d = t - b.data()[0];
      double want = d * t + 0.5 * d * d - std::exp(t) / double(n);
      REQUIRE(std::abs(ga.data()[i] - want) <= 1e-13 * (1 + std::abs(want)));
    }
    double want_b = 0;
    for (std::size_t i = 0; i < n; ++i) want_b -= (a.data()[i] - b.data()[0]) * a.data()[i];
    CHECK(std::abs(gb.data()[0] - want_b) <= 1e-12 * (1 + std::abs(want_b)));

    auto total = [](auto const& a) { return zn::sum(a); };
    auto [v2, g2] = zn::value_and_grad(total)(a);
    CHECK(same_bits(v2.item(), zn::eval(total(a)).item()));
    for (std::size_t i = 0; i < n; ++i) REQUIRE(g2.data()[i] == 1.0);
  }
}

TEST_CASE("a further cotangent of an array is added to its sum bit for bit", "[grad][fused_pass]") {
  // a read twice: its gradient is w + v whichever cotangent comes first (1 * w is exact, and
  // addition commutes). The second is added in the pass that computes it, into the first's
  // buffer; where it cannot join that pass (a transposed read), computed apart and added.
  auto check = [](auto const& a, auto const& w, auto const& v, auto const& f, auto const& want) {
    zn::array<double> g = zn::grad(f)(a);
    zn::array<double> expected = want(w, v);
    REQUIRE(g.shape() == expected.shape());
    for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(same_bits(g.data()[i], expected.data()[i]));
  };
  for (bool simd : {true, false}) {
    zn::set_simd_enabled(simd);
    for (std::size_t n : {std::size_t(1), std::size_t(9), std::size_t(8193), std::size_t(40001)}) {
      INFO("n " << n << ", simd " << simd);
      auto a = random_array({n}, 31), w = random_array({n}, 32), v = random_array({n}, 33);
      check(
          a, w, v, [&](auto const& a) { return zn::sum(a * w) + zn::sum(zn::exp(v) * a); },
          [](auto const& w, auto const& v) { return w + zn::exp(v); });
      // Three reads, the third in float, of whole numbers (so that every order of the sums
      // is exact): added in turn.
      auto u = zn::eval(zn::floor(w * 8.0)), s = zn::eval(zn::floor(v * 8.0));
      auto sf = zn::eval(zn::cast<float>(s));
      check(
          a, u, s, [&](auto const& a) { return zn::sum(a * u + s * a) - zn::sum(a * sf); },
          [&](auto const& u, auto const& s) { return u + s - zn::cast<double>(sf); });
    }
    auto a = random_array({37, 45}, 34), w = random_array({37, 45}, 35),
         v = random_array({45, 37}, 36);
    check(
        a, w, v, [&](auto const& a) { return zn::sum(a * w) + zn::sum(a * zn::transpose(v)); },
        [](auto const& w, auto const& v) { return w + zn::transpose(v); });
  }
  zn::set_simd_enabled(true);
}

TEST_CASE("every cotangent of the result is computed in one loop", "[grad][fused_pass]") {
  // The result's paths to its leaves are taken together (autodiff/take_paths.hpp): four reads of
  // x, leaves of two sizes, a leaf that is not differentiated, a broadcast leaf whose cotangent
  // sums, and the same pass recorded by an enclosing grad.
  for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(8193), std::size_t(40001)}) {
    INFO("n " << n);
    auto x = random_array({n}, 41, 0.2, 2.0), y = random_array({2 * n + 1}, 42);
    auto f = [](auto const& x, auto const& y) {
      return zn::sum(zn::exp(-x * x) + zn::log(x) / (x + 1.0)) + zn::sum(zn::sin(y) * y);
    };
    auto [value, g] = zn::value_and_grad(f, zn::argnums<0, 1>)(x, y);
    auto const& [gx, gy] = g;
    double want = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double a = x.data()[i];
      want += std::exp(-a * a) + std::log(a) / (a + 1);
      double d = -2 * a * std::exp(-a * a) + 1 / (a * (a + 1)) - std::log(a) / ((a + 1) * (a + 1));
      REQUIRE(std::abs(gx.data()[i] - d) <= 1e-13 * (1 + std::abs(d)));
    }
    for (std::size_t i = 0; i < y.size(); ++i) {
      double b = y.data()[i];
      want += std::sin(b) * b;
      REQUIRE(std::abs(gy.data()[i] - (std::cos(b) * b + std::sin(b))) <= 1e-13);
    }
    CHECK(std::abs(value.item() - want) <= 1e-11 * (1 + std::abs(want)));
    // Only y differentiated: x's four paths take nothing.
    auto gy_only = zn::grad(f, zn::argnums<1>)(x, y);
    REQUIRE(std::memcmp(gy_only.data(), gy.data(), y.size() * sizeof(double)) == 0);
    // Recorded by an enclosing grad: the second derivative of the sum over x.
    auto inner = [](auto const& x) {
      return zn::sum(
          zn::grad([](auto const& x) { return zn::sum(x * x * x + zn::sin(x) * x); })(x));
    };
    auto h = zn::grad(inner)(x);
    for (std::size_t i = 0; i < n; ++i) {
      double a = x.data()[i], d2 = 6 * a + 2 * std::cos(a) - a * std::sin(a);
      REQUIRE(std::abs(h.data()[i] - d2) <= 1e-12 * (1 + std::abs(d2)));
    }
  }
  // A row broadcast: its cotangent sums over the batch, apart from the loop; x's in the loop.
  auto x = random_array({5, 9}, 43), w = random_array({1, 9}, 44);
  auto f = [](auto const& x, auto const& w) { return zn::sum(x * w + zn::sin(w) * x * x); };
  auto [gx, gw] = zn::grad(f, zn::argnums<0, 1>)(x, w);
  check_close(gx, numeric_grad(f, 0, x, w));
  check_close(gw, numeric_grad(f, 1, x, w));
}
