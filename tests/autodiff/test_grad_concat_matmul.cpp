// Reverse rules of concatenate / stack and batched matmul against central finite differences in
// double, with broadcasting, rank 0 and non-contiguous operands; and their allocation counts.
// (The other non-elementwise nodes: test_grad_rules.cpp. Two files, so that they compile in
// parallel.)
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

using fd::check_close;
using fd::check_grads;
using fd::grad_allocations;
using fd::numeric_grad;
using fd::random_array;

TEST_CASE("grad through concatenate and stack", "[grad][rules]") {
  auto a = random_array({2, 3}, 17), b = random_array({2, 4}, 18), c = random_array({3, 2}, 19);
  auto w = random_array({2, 7}, 20);
  // Parts of one type (a std::vector), of several types (a std::tuple), transposed parts.
  check_grads(
      [](auto const& a, auto const& b, auto const& w) {
        return zn::sum(zn::sin(zn::concatenate({a, b}, 1)) * w);
      },
      a, b, w);
  check_grads(
      [](auto const& a, auto const& b, auto const& c) {
        return zn::sum(zn::square(zn::concatenate(std::tuple(zn::exp(a), b, zn::transpose(c)), -1) *
                                  zn::arange<double>(10.0)));
      },
      a, b, c);
  // The same array twice; stack along a middle axis; stack of rank-0 parts.
  check_grads(
      [](auto const& a) { return zn::sum(zn::cos(zn::concatenate(std::tuple(a, a * 2.0), 0))); },
      a);
  check_grads(
      [](auto const& a, auto const& c) {
        return zn::sum(zn::tanh(zn::stack(std::tuple(a, zn::transpose(c)), 1)) *
                       zn::reshape(zn::arange<double>(4.0), {2, 2, 1}));
      },
      a, c);
  check_grads(
      [](auto const& a, auto const& b) {
        return zn::sum(zn::stack(std::tuple(zn::sum(a), zn::max(b), zn::prod(a))) *
                       zn::arange<double>(1.0, 4.0));
      },
      a, b);
}

TEST_CASE("grad through batched matmul", "[grad][rules]") {
  auto loss = [](auto const& a, auto const& b) { return zn::sum(zn::sin(zn::matmul(a, b))); };
  // Batched by shared, shared by batched, batch dimensions broadcast both ways.
  check_grads(loss, random_array({2, 3, 4}, 21), random_array({4, 5}, 22));
  check_grads(loss, random_array({3, 4}, 23), random_array({2, 4, 5}, 24));
  check_grads(loss, random_array({2, 1, 3, 4}, 25), random_array({5, 4, 2}, 26));
  check_grads(loss, random_array({1, 3, 3, 2}, 27), random_array({2, 1, 2, 2}, 28));
  // Vectors on either side, and both (a rank-0 product).
  check_grads(loss, random_array({4}, 29), random_array({2, 4, 5}, 30));
  check_grads(loss, random_array({2, 3, 4}, 31), random_array({4}, 32));
  check_grads(loss, random_array({4}, 33), random_array({4}, 34));
  // Transposed (non-contiguous) batch operands.
  check_grads(
      [](auto const& a, auto const& b) {
        return zn::sum(zn::sin(zn::matmul(zn::transpose(a, {0, 2, 1}), zn::transpose(b))));
      },
      random_array({2, 4, 3}, 35), random_array({5, 4}, 36));
  check_grads(
      [](auto const& a, auto const& b) {
        return zn::sum(zn::tanh(zn::matmul(zn::transpose(a, {1, 0, 2}), b)));
      },
      random_array({3, 2, 4}, 37), random_array({2, 4, 2}, 38));
  // A batched matmul of a shared weight: the value, the product, the product's cotangent and one
  // GEMM for dW over all batches (nothing summed afterwards).
  auto x = random_array({8, 16, 32}, 39), wt = random_array({32, 8}, 40);
  auto lw = [](auto const& w, auto const& x) { return zn::sum(zn::square(zn::matmul(x, w))); };
  CHECK(grad_allocations(lw, wt, x) == 4);
  check_close(zn::grad(lw)(wt, x), numeric_grad(lw, 0, wt, x));
}

TEST_CASE("grad of a sum of a matmul: row and column sums, no GEMM", "[grad][rules]") {
  // d/dA sum(A B) = 1 B^T (every row: the row sums of B), d/dB = A^T 1 (every column: the
  // column sums of A). The cotangent is a broadcast, which the matmul kernel takes as one GEMV.
  auto a = random_array({6, 4}, 51), b = random_array({4, 5}, 52);
  auto f = [](auto const& x, auto const& y) { return zn::sum(zn::matmul(x, y)); };
  auto [v, g] = zn::value_and_grad(f, zn::argnums<0, 1>)(a, b);
  auto const& ga = std::get<0>(g);
  auto const& gb = std::get<1>(g);
  double want = 0;
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t k = 0; k < 4; ++k) {
      double rs = 0;
      for (std::size_t j = 0; j < 5; ++j) rs += b.data()[k * 5 + j];
      want += a.data()[i * 4 + k] * rs;
      CHECK(ga.data()[i * 4 + k] == Approx(rs).epsilon(1e-14));
    }
  CHECK(v.item() == Approx(want).epsilon(1e-14));
  for (std::size_t k = 0; k < 4; ++k)
    for (std::size_t j = 0; j < 5; ++j) {
      double cs = 0;
      for (std::size_t i = 0; i < 6; ++i) cs += a.data()[i * 4 + k];
      CHECK(gb.data()[k * 5 + j] == Approx(cs).epsilon(1e-14));
    }
  // mean, batched, and against finite differences.
  check_grads([](auto const& x, auto const& y) { return zn::mean(zn::matmul(x, y)); },
              random_array({2, 3, 4}, 53), random_array({4, 5}, 54));
  check_grads([](auto const& x, auto const& y) { return 3.0 * zn::sum(zn::matmul(x, y)); },
              random_array({3, 4}, 55), random_array({2, 4, 5}, 56));
}
