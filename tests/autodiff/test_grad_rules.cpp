// Reverse rules of the non-elementwise nodes against central finite differences in double:
// slice, softmax / log_softmax, layer_norm, prod, logsumexp, var / std, and the reverse pass's own
// nodes, with broadcasting, rank 0 and non-contiguous operands; and their allocation counts.
// (concatenate / stack and batched matmul: test_grad_concat_matmul.cpp.)
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

using fd::check_close;
using fd::check_grads;
using fd::grad_allocations;
using fd::numeric_grad;
using fd::random_array;

TEST_CASE("grad through slice", "[grad][rules]") {
  using zn::range;
  auto x = random_array({5, 6}, 1);
  // Steps, a negative step, a transposed operand, and x read by two slices and whole.
  check_grads(
      [](auto const& x) {
        return zn::sum(zn::sin(zn::slice(x, {range{1, 4}, range{5, 0, -2}})));
      },
      x);
  check_grads(
      [](auto const& x) {
        return zn::sum(zn::square(zn::slice(zn::transpose(x), {range{0, 6, 3}, range{1, -1}})));
      },
      x);
  check_grads(
      [](auto const& x) {
        return zn::sum(zn::slice(x, 1, 0, 3) * zn::exp(zn::slice(x, 1, 3, 6))) + zn::sum(x * x);
      },
      x);
  // A slice of an expression, and of a slice; an empty slice adds nothing.
  check_grads(
      [](auto const& x) {
        return zn::sum(zn::slice(zn::slice(zn::tanh(x) * x, 0, 1, 5), {range{}, range{4, 1, -1}}));
      },
      x);
  check_grads([](auto const& x) { return zn::sum(zn::slice(x, 0, 2, 2)) + zn::sum(x * x); }, x);
  // The gradient of a slice is written once, straight into the gradient buffer: the value and
  // the gradient.
  auto big = random_array({300, 200}, 2);
  auto f = [](auto const& x) { return zn::sum(zn::slice(x, {range{10, 290, 3}, range{5, 195}})); };
  CHECK(grad_allocations(f, big) == 2);
  zn::array<double> g = zn::grad(f)(big);
  CHECK(g(10, 5) == 1.0);
  CHECK(g(11, 5) == 0.0);
  CHECK(g(13, 194) == 1.0);
  CHECK(g(13, 195) == 0.0);
}

TEST_CASE("grad through softmax and log_softmax", "[grad][rules]") {
  auto x = random_array({3, 4}, 3, -2, 2), w = random_array({3, 4}, 4);
  auto sm = [](auto const& x, auto const& w) { return zn::sum(zn::softmax(x) * w); };
  auto sm0 = [](auto const& x, auto const& w) {
    return zn::sum(zn::square(zn::softmax(x, 0) - w));
  };
  auto lsm = [](auto const& x, auto const& w) { return zn::sum(zn::log_softmax(x, 1) * w); };
  check_grads(sm, x, w);
  check_grads(sm0, x, w);
  check_grads(lsm, x, w);
  // A transposed input, and a matmul inside (a barrier below the barrier).
  check_grads(
      [](auto const& x, auto const& w) {
        return zn::sum(zn::log_softmax(zn::transpose(x), 0) * zn::transpose(w));
      },
      x, w);
  auto v = random_array({4, 2}, 5);
  check_grads(
      [](auto const& x, auto const& v) {
        return zn::sum(zn::softmax(zn::matmul(x, v)) * zn::arange<double>(2.0));
      },
      x, v);
  // Large inputs stay finite and exact (the rules read the stable forward output).
  auto large = random_array({2, 5}, 6, 700, 720);
  check_grads(lsm, large, random_array({2, 5}, 7));
  check_grads(sm, large, random_array({2, 5}, 8));
  // softmax is computed once: the value, its weighted sum, its cotangent (w, evaluated once
  // for the rule: autodiff/backward.hpp), sum(ct * y) and the gradient.
  auto bx = random_array({64, 100}, 9), bw = random_array({64, 100}, 10);
  CHECK(grad_allocations(sm, bx, bw) == 5);
}

TEST_CASE("grad through layer_norm", "[grad][rules]") {
  auto x = random_array({3, 5}, 21, -2, 2), w = random_array({3, 5}, 22);
  auto gamma = random_array({5}, 23), beta = random_array({5}, 24);
  check_grads([](auto const& x, auto const& w) { return zn::sum(zn::layer_norm(x) * w); }, x, w);
  // Along the first axis, with a larger eps; the scale and shift differentiated too.
  check_grads([](auto const& x, auto const& g,
                 auto const& b) { return zn::sum(zn::square(zn::layer_norm(x, 0, 0.1) * g + b)); },
              x, gamma, beta);
  // A transposed input, and a matmul inside (a barrier below the barrier).
  check_grads(
      [](auto const& x, auto const& w) {
        return zn::sum(zn::tanh(zn::layer_norm(zn::transpose(x), 0)) * zn::transpose(w));
      },
      x, w);
  auto v = random_array({5, 4}, 25);
  check_grads([](auto const& x,
                 auto const& v) { return zn::sum(zn::sin(zn::layer_norm(zn::matmul(x, v)))); },
              x, v);
  // Slices with a large mean (the rule centres x before squaring, as the forward pass does).
  auto far = random_array({2, 6}, 26, 500, 501);
  check_grads([](auto const& x, auto const& w) { return zn::sum(zn::layer_norm(x) * w); }, far,
              random_array({2, 6}, 27));
  // The tape: a normalized array materialized inside the function gives the same gradient.
  auto taped = [](zn::array<double> const& x, zn::array<double> const& w) {
    zn::array<double> h = zn::layer_norm(x * 2.0);
    return zn::sum(zn::exp(h) * w);
  };
  auto fused = [](auto const& x, auto const& w) {
    return zn::sum(zn::exp(zn::layer_norm(x * 2.0)) * w);
  };
  zn::array<double> gt = zn::grad(taped)(x, w), gs = zn::grad(fused)(x, w);
  check_close(gt, gs);
  check_close(gs, numeric_grad(fused, 0, x, w));
}

TEST_CASE("grad through prod, logsumexp, var and std", "[grad][rules]") {
  auto x = random_array({3, 4}, 11, 0.5, 1.5), w = random_array({3}, 12);
  check_grads([](auto const& x, auto const& w) { return zn::sum(zn::prod(x, 1) * w); }, x, w);
  check_grads([](auto const& x) { return zn::prod(x * 1.1); }, x);  // rank-0 result
  check_grads([](auto const& x) { return zn::sum(zn::sin(zn::prod(zn::transpose(x), 1, true))); },
              x);
  auto r0 = random_array({}, 13);
  check_grads([](auto const& s) { return zn::prod(s) * zn::logsumexp(s * 3.0); }, r0);

  // Zeros: row 0 has none, row 1 exactly one, row 2 two.
  zn::array<double> z({3, 3}, {2, 3, 4, 5, 0, 7, 0, 6, 0});
  auto f = [](auto const& z) { return zn::sum(zn::prod(z, 1) * zn::arange<double>(1.0, 4.0)); };
  zn::array<double> gz = zn::grad(f)(z);
  check_close(gz, numeric_grad(f, 0, z));
  CHECK(gz(0, 0) == 12.0);
  CHECK(gz(1, 1) == 2 * 35.0);  // the product of the others
  CHECK(gz(1, 0) == 0.0);
  for (int j = 0; j < 3; ++j) CHECK(gz(2, j) == 0.0);

  auto y = random_array({3, 4}, 14, -3, 3), v = random_array({4}, 15);
  check_grads([](auto const& y, auto const& v) { return zn::sum(zn::logsumexp(y, 0) * v); }, y, v);
  check_grads([](auto const& y) { return zn::logsumexp(y); }, y);
  check_grads([](auto const& y) { return zn::sum(zn::exp(zn::logsumexp(y, 1, true) - y)); }, y);
  // Stable for large inputs: exp(x - lse), never exp(x) / sum(exp(x)).
  auto big = random_array({2, 3}, 16, 800, 810);
  check_grads([](auto const& y) { return zn::sum(zn::logsumexp(y, 1) * zn::arange<double>(2.0)); },
              big);
  zn::array<double> gb = zn::grad([](auto const& y) { return zn::logsumexp(y); })(big);
  CHECK(zn::eval(zn::sum(gb)).item() == Approx(1.0).epsilon(1e-12));

  check_grads([](auto const& y, auto const& v) { return zn::sum(zn::var(y, 0) * v); }, y, v);
  check_grads([](auto const& y) { return zn::sum(zn::std(y, 1, true, 1) * y); }, y);
  check_grads([](auto const& y) { return zn::std(zn::transpose(y)) + zn::var(y); }, y);
}

TEST_CASE("the reverse pass's own nodes differentiate", "[grad][rules]") {
  // What a backward pass builds (so that it can be differentiated again): sum_to, pad (the
  // adjoint of slice), fold_to (of a batched matmul operand) and shared (a cotangent read twice).
  auto x = random_array({3, 4}, 41), y = random_array({2, 3, 2}, 42);
  check_grads(
      [](auto const& x) {
        return zn::sum(zn::sin(zn::sum_to(x * x, zn::shape{1, 4})) * 3.0);
      },
      x);
  check_grads(
      [](auto const& x) {
        zn::views::slice v =
            zn::slice(zn::zeros<double>({5, 6}), {zn::range{1, 4}, zn::range{5, 0, -2}}).view;
        return zn::sum(zn::exp(zn::pad_node(zn::sin(x) * x, zn::shape{5, 6}, v)));
      },
      random_array({3, 3}, 43));
  check_grads(
      [](auto const& y) {
        return zn::sum(zn::cos(zn::fold_to_node(y * 2.0, zn::shape{3, 1}, zn::shape{3})));
      },
      y);
  check_grads(
      [](auto const& x) {
        zn::shared_node s(zn::tanh(x));
        return zn::sum(s * s + zn::softmax(s));
      },
      x);
  // A pad materialized under the trace (as a second-order pass materializes a slice's adjoint)
  // is recorded as IR, and differentiated by the IR's rule for pad: a slice of its cotangent.
  check_grads(
      [](auto const& x) {
        using A = std::remove_cvref_t<decltype(x)>;
        zn::views::slice v =
            zn::slice(zn::zeros<double>({5, 6}), {zn::range{1, 4}, zn::range{5, 0, -2}}).view;
        A p = zn::pad_node(zn::sin(x) * x, zn::shape{5, 6}, v);
        return zn::sum(zn::exp(p) * zn::arange<double>(6.0));
      },
      random_array({3, 3}, 44));
}
