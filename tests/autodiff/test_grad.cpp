// grad and value_and_grad of array functions against central finite differences in double:
// elementwise chains, broadcasting, reductions, views, matmul; argnums; errors.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

namespace {

using fd::random_array;

using fd::numeric_grad;

using fd::check_close;

template <class F>
void check_unary(F const& f, zn::array<double> const& x) {
  zn::array<double> g = zn::grad(f)(x);
  check_close(g, numeric_grad(f, 0, x));
}

}  // namespace

TEST_CASE("grad of elementwise chains matches finite differences", "[grad]") {
  auto x = random_array({7}, 1, 0.2, 2.0);
  check_unary([](auto const& x) { return zn::sum(zn::sin(x) * x); }, x);
  check_unary([](auto const& x) { return zn::sum(zn::exp(-x * x) + zn::log(x) / (x + 1.0)); }, x);
  check_unary([](auto const& x) { return zn::sum(zn::tanh(zn::sqrt(x)) * zn::sigmoid(2.0 * x)); },
              x);
  check_unary([](auto const& x) { return zn::sum(zn::pow(x, 2.5) - zn::pow(1.5, x)); }, x);
  check_unary(
      [](auto const& x) {
        return zn::sum(zn::where(x > 1.0, zn::square(x), 3.0 * x) + zn::abs(x));
      },
      x);
  check_unary([](auto const& x) { return zn::sum(zn::maximum(x, 1.0) * zn::gelu(x)); }, x);
  // x read in several places: the contributions add up.
  check_unary([](auto const& x) { return zn::sum(x * x * x + zn::cos(x) * x); }, x);
}

TEST_CASE("grad through broadcasting, reductions and views", "[grad]") {
  auto a = random_array({3, 1}, 2), b = random_array({4}, 3);
  auto f = [](auto const& a, auto const& b) { return zn::sum(zn::square(a * b + b)); };
  zn::array<double> ga = zn::grad(f)(a, b);
  zn::array<double> gb = zn::grad(f, zn::argnums<1>)(a, b);
  check_close(ga, numeric_grad(f, 0, a, b));
  check_close(gb, numeric_grad(f, 1, a, b));

  auto m = random_array({3, 5}, 4);
  check_unary([](auto const& m) { return zn::sum(zn::square(zn::mean(m, 1))); }, m);
  check_unary([](auto const& m) { return zn::mean(zn::exp(zn::sum(m, 0, true) * m)); }, m);
  check_unary([](auto const& m) { return zn::sum(zn::max(m, 1, true) * zn::min(m, 0, true)); }, m);
  check_unary([](auto const& m) { return zn::sum(zn::transpose(m) * zn::arange<double>(3.0)); }, m);
  check_unary(
      [](auto const& m) {
        return zn::sum(zn::sin(zn::reshape(m, {5, 3})) *
                       zn::expand_dims(zn::arange<double>(3.0), 0));
      },
      m);
  check_unary(
      [](auto const& m) {
        return zn::sum(zn::square(zn::broadcast_to(zn::sum(m, 0), {2, 5})));
      },
      m);
}

TEST_CASE("grad through matmul", "[grad]") {
  auto w = random_array({3, 2}, 5), x = random_array({4, 3}, 6), v = random_array({3}, 7);
  auto loss = [](auto const& w, auto const& x) {
    return zn::mean(zn::square(zn::tanh(zn::matmul(x, w))));
  };
  auto [value, grads] = zn::value_and_grad(loss, zn::argnums<0, 1>)(w, x);
  CHECK(value.item() == Approx(zn::eval(loss(w, x)).item()).epsilon(1e-15));
  check_close(std::get<0>(grads), numeric_grad(loss, 0, w, x));
  check_close(std::get<1>(grads), numeric_grad(loss, 1, w, x));
  auto mv = [](auto const& w, auto const& v) { return zn::sum(zn::sin(zn::matmul(v, w))); };
  check_close(zn::grad(mv)(w, v), numeric_grad(mv, 0, w, v));
  check_close(zn::grad(mv, zn::argnums<1>)(w, v), numeric_grad(mv, 1, w, v));
  auto vm = [](auto const& x, auto const& v) { return zn::sum(zn::exp(zn::matmul(x, v))); };
  check_close(zn::grad(vm)(x, v), numeric_grad(vm, 0, x, v));
  check_close(zn::grad(vm, zn::argnums<1>)(x, v), numeric_grad(vm, 1, x, v));
}

TEST_CASE("grad: arguments, result types and errors", "[grad]") {
  auto x = random_array({5}, 8);
  // The same array as two arguments: each gets its own gradient.
  auto f = [](auto const& a, auto const& b) { return zn::sum(a * 2.0 + b * b); };
  auto [ga, gb] = zn::grad(f, zn::argnums<0, 1>)(x, x);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(ga(i) == 2.0);
    CHECK(gb(i) == Approx(2 * x(i)));
  }
  // An argument the result does not read has a zero gradient; non-differentiable arguments
  // pass through untouched.
  auto g = [](auto const& a, auto const&, int k) { return zn::sum(a) * double(k); };
  zn::array<double> gy = zn::grad(g, zn::argnums<1>)(x, x, 3);
  CHECK(gy.shape() == x.shape());
  CHECK(zn::eval(zn::sum(zn::abs(gy))).item() == 0.0);
  // float in, float out.
  zn::array<float> xf({3}, {1, 2, 3});
  zn::array<float> gf = zn::grad([](auto const& a) { return zn::sum(a * a); })(xf);
  CHECK(gf(2) == 6.f);
  // Errors: a non-scalar result; an in-place write inside the function.
  CHECK_THROWS_WITH(
      zn::grad([](auto const& a) { return a * 2.0; })(x),
      Catch::Contains("grad") && Catch::Contains("scalar") && Catch::Contains("(5,)"));
  auto writes_in_place = [](zn::array<double> const& a) {
    zn::array<double> h = zn::sin(a);
    zn::assign(h, h * 2.0);
    return zn::sum(h);
  };
  CHECK_THROWS_WITH(zn::grad(writes_in_place)(x),
                    Catch::Contains("grad") && Catch::Contains("assign"));
  // Outside grad the same function runs.
  CHECK_NOTHROW(zn::eval(writes_in_place(x)));
}

TEST_CASE("the gradient of an elementwise chain is one fused pass", "[grad]") {
  auto x = random_array({100003}, 9, 0.5, 1.5);
  auto f = [](auto const& x) {
    return zn::sum(zn::exp(-x) * zn::sin(x) + zn::sqrt(x) * zn::tanh(x * 2.0) - zn::log(x));
  };
  zn::array<double> warm = zn::grad(f)(x);  // the thread pool and allocator cache warm up
  auto before = zn::cpu_memory_stats().allocations;
  zn::array<double> g = zn::grad(f)(x);
  // The value and one gradient buffer (x's several reads accumulate into it in place, in the
  // same pass that computes the value): nothing per op, no temporary of x's size per
  // intermediate.
  CHECK(zn::cpu_memory_stats().allocations - before <= 2);
  for (std::size_t i : {std::size_t(0), std::size_t(77777)}) {
    double v = x(i);
    double want = -std::exp(-v) * std::sin(v) + std::exp(-v) * std::cos(v) +
                  0.5 / std::sqrt(v) * std::tanh(2 * v) +
                  std::sqrt(v) * 2 * (1 - std::tanh(2 * v) * std::tanh(2 * v)) - 1 / v;
    CHECK(g(i) == Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("grad evaluates each barrier once", "[grad]") {
  auto w = random_array({16, 8}, 10), x = random_array({32, 16}, 11);
  auto loss = [](auto const& w, auto const& x) {
    return zn::mean(zn::square(zn::tanh(zn::matmul(x, w))));
  };
  zn::array<double> warm = zn::grad(loss)(w, x);
  auto before = zn::cpu_memory_stats().allocations;
  zn::array<double> gw = zn::grad(loss)(w, x);
  // Forward: the product, tanh of it (kept: square's rule and tanh's own read it; 256 elements,
  // under reuse_node's limit) and the mean. Backward: the cotangent of the product (one fused
  // pass through square and tanh, reading tanh kept forward), and x^T ct. The product is not
  // evaluated again for the rules that read it, and the unrequested gradient of x is never
  // evaluated.
  CHECK(zn::cpu_memory_stats().allocations - before == 5);
  check_close(gw, numeric_grad(loss, 0, w, x));
}

TEST_CASE("grad of max reuses the forward result", "[grad]") {
  auto m = random_array({200, 50}, 12);
  auto f = [](auto const& m) { return zn::sum(zn::max(m, 1)); };
  zn::array<double> warm = zn::grad(f)(m);
  auto before = zn::cpu_memory_stats().allocations;
  zn::array<double> g = zn::grad(f)(m);
  // Forward: the max and the sum. Backward: the tie counts and the gradient. The max is read
  // from the forward pass, not computed a second time.
  CHECK(zn::cpu_memory_stats().allocations - before == 4);
  check_close(g, numeric_grad(f, 0, m));
}
