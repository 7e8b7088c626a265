// Cotangents built from constants alone (autodiff/uniform.hpp): their one value against the
// evaluator's loop over the same expression, the reverse pass handing them on folded, and
// gradients of losses that start with such chains against finite differences.
#include <catch2/catch.hpp>
#include <cmath>
#include <type_traits>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

using fd::check_grads;
using fd::random_array;

namespace {
using zn::autodiff::uniform;
using zn::autodiff::uniform_v;

zn::scalar_node<double> c(double v) { return zn::scalar_node<double>(v); }

// Every element of e's evaluation equals uniform<E>::value(e).
template <class E>
void check_uniform(E const& e) {
  static_assert(uniform_v<E>);
  zn::array<double> want = zn::eval(zn::cast<double>(e));
  double v = double(uniform<E>::value(e));
  INFO("shape " << e.shape().str() << ", folded " << v);
  for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(want.data()[i] == v);
}
}  // namespace

TEST_CASE("a cotangent of constants alone has one value, the one its loop computes",
          "[grad][uniform]") {
  auto b = zn::broadcast_to(c(1.5), {3, 4});
  check_uniform(c(-2.0));
  check_uniform(b);
  check_uniform(-(b * 3.0) / 8.0);
  check_uniform(zn::cast<float>(b * 0.1));
  check_uniform(zn::transpose(zn::reshape(b, {2, 6})));
  check_uniform(zn::slice(zn::expand_dims(b, 0), 2, 1, 4));
  // Sums of n copies are v * n (exact here: a power of two); means and maxima keep v.
  check_uniform(zn::sum_to(b * 0.5, {4}));
  check_uniform(zn::sum_to(b, {3, 1}));
  check_uniform(zn::sum(b, 0) + zn::mean(b, -1, true) * zn::max(b));
  check_uniform(zn::min(zn::sum(b * 0.25)) - 1.0);
  // Nothing summed: 0.
  auto e = zn::broadcast_to(c(2.0), {0, 3});
  CHECK(double(uniform<decltype(zn::sum(e))>::value(zn::sum(e))) == 0.0);
  CHECK(double(uniform<decltype(zn::sum(e, 0))>::value(zn::sum(e, 0))) == 0.0);
}

TEST_CASE("only constants fold", "[grad][uniform]") {
  auto x = random_array({3}, 1);
  static_assert(!uniform_v<decltype(x * 2.0)>);
  static_assert(!uniform_v<decltype(zn::broadcast_to(c(1.0), {3}) * x)>);
  static_assert(!uniform_v<decltype(zn::exp(x))>);
  // Zeros around a slice's cotangent: not one value.
  static_assert(
      !uniform_v<zn::pad_node<zn::view_node<zn::views::broadcast_to, zn::scalar_node<double>>>>);
  // prod and logsumexp of a constant are not among the folded reductions.
  static_assert(!uniform_v<decltype(zn::prod(zn::broadcast_to(c(2.0), {3})))>);
  SUCCEED();
}

TEST_CASE("the reverse pass hands a constants-only cotangent on as one broadcast value",
          "[grad][uniform]") {
  auto x = random_array({4, 5}, 2);
  // Reached through an elementwise op whose partial is a constant (neg's -1), after a mean's 1/n
  // and a sum's broadcast: the leaf gets one value broadcast to its shape, not the chain.
  auto seed = zn::broadcast_to(c(1.0), {});
  auto out = -zn::mean(zn::sum(x, -1)) * 2.0;
  int leaves = 0;
  auto sink = [&](auto const& leaf, auto const& ct) {
    using G = std::remove_cvref_t<decltype(ct)>;
    static_assert(
        std::is_same_v<G, zn::view_node<zn::views::broadcast_to, zn::scalar_node<double>>>,
        "a folded cotangent");
    REQUIRE(leaf.storage() == x.storage());
    REQUIRE(ct.shape() == x.shape());
    zn::array<double> g = zn::eval(ct);
    for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(g.data()[i] == -2.0 / 4.0);
    ++leaves;
  };
  zn::autodiff::backward(out, seed, sink);
  CHECK(leaves == 1);
}

TEST_CASE("gradients of losses that start with constant chains", "[grad][uniform]") {
  auto x = random_array({3, 5}, 3), w = random_array({5}, 4);
  check_grads([](auto const& x) { return -zn::mean(zn::sum(x * x, -1)) * 0.5; }, x);
  check_grads([&](auto const& x) { return zn::sum(zn::broadcast_to(x, {2, 3, 5}) * w) / 7.0; }, x);
  check_grads([](auto const& x) { return zn::mean(zn::mean(zn::exp(x), 0)) - 3.0; }, x);
  check_grads([](auto const& x) { return zn::max(zn::sum(x, 1)) * -1.5; }, x);
  // A constant's own cotangent is dropped, whatever chain reaches it.
  check_grads([](auto const& x) { return zn::sum(x) * 2.0 + zn::sum(zn::sin(x)) / 3.0; }, x);
}
