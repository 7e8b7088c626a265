// The IR interpreter (backend/cpu/interpret.hpp): graphs recorded by make_jaxpr, run by
// zn::ir::run on the same inputs, against the typed evaluation of the same functions.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>
#include <zenith/zenith.hpp>

namespace {

namespace zn = zenith;

std::mt19937 rng(20261127);

template <class T>
zn::array<T> random_array(zn::shape s, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> u(lo, hi);
  auto a = zn::array<T>::empty(s);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(u(rng));
  return a;
}

// f's graph run by the interpreter on args, against zn::eval(f(args...)) output by output.
template <class F, class... A>
void check_run(std::string const& what, F f, A const&... args) {
  INFO(what);
  zn::jaxpr j = zn::make_jaxpr(f)(args...);
  INFO(j.str());
  std::vector<zn::any_array> out = zn::ir::run(j.graph(), {zn::any_array(args)...});
  auto want = f(args...);
  auto compare = [&](auto const& w, std::size_t k) {
    using T = zn::value_t<std::remove_cvref_t<decltype(w)>>;
    REQUIRE(k < out.size());
    zn::array<T> got = out[k].as<T>();
    zn::array<T> expect = zn::eval(w);
    REQUIRE(got.shape() == expect.shape());
    double tol = std::is_same_v<T, double> ? 1e-13 : std::is_same_v<T, float> ? 2e-6 : 1e-2;
    for (std::size_t i = 0; i < got.size(); ++i) {
      double a = double(got.data()[i]), b = double(expect.data()[i]);
      INFO("output " << k << ", element " << i << ": run " << a << ", eval " << b);
      if (std::isnan(b))
        REQUIRE(std::isnan(a));
      else
        REQUIRE(std::abs(a - b) <= tol * (1 + std::abs(b)));
    }
  };
  if constexpr (zn::expression<decltype(want)>) {
    REQUIRE(out.size() == 1);
    compare(want, 0);
  } else {
    std::size_t k = 0;
    std::apply([&](auto const&... w) { (compare(w, k++), ...); }, want);
    CHECK(k == out.size());
  }
}

}  // namespace

TEST_CASE("ir::run: elementwise regions, literals, constants, broadcasts", "[interpret]") {
  // 37 * 29 = 1073 elements: one full tile and a partial one.
  auto a = random_array<float>({37, 29}), b = random_array<float>({37, 29}),
       c = random_array<float>({37, 29});
  check_run(
      "a * sin(b) + exp(-c * c)",
      [](auto const& a, auto const& b, auto const& c) { return a * zn::sin(b) + zn::exp(-c * c); },
      a, b, c);
  auto row = random_array<float>({29});
  check_run(
      "a row broadcast, a constant", [&](auto const& a) { return zn::tanh(a + row) * c; }, a);
  auto x = random_array<double>({5003});
  check_run(
      "double, several outputs read after the region",
      [](auto const& x) {
        auto y = zn::exp(x * 0.5) - 1.0;
        return std::make_tuple(y, y * y, zn::sqrt(zn::abs(x)) + y);
      },
      x);
  check_run(
      "where, clip, comparisons, maximum, pow, atan2",
      [](auto const& a, auto const& b) {
        return std::make_tuple(zn::where(a > b, a, b * 2.f), zn::clip(a, -0.5f, 0.5f), a <= b,
                               zn::maximum(a, b), zn::pow(zn::abs(a), b), zn::atan2(a, b));
      },
      a, b);
  auto i = zn::array<std::int32_t>({2, 3}, {1, -2, 3, 4, -5, 6});
  check_run(
      "integers and conversions",
      [](auto const& i) {
        return std::make_tuple(i * 3 + 1, zn::cast<float>(i) / 2.f, zn::abs(i),
                               zn::cast<zn::bfloat16>(zn::cast<float>(i) * 0.1f),
                               zn::cast<double>(zn::cast<zn::float16>(zn::cast<float>(i))));
      },
      i);
  auto h = zn::eval(zn::cast<zn::bfloat16>(random_array<float>({3, 4})));
  check_run(
      "bfloat16 computed in float", [](auto const& h) { return zn::exp(h) * h; }, h);
}

TEST_CASE("ir::run: barriers", "[interpret]") {
  auto x = random_array<float>({4, 3}), w = random_array<float>({3, 2}),
       b = random_array<float>({2});
  check_run(
      "a dense layer",
      [](auto const& x, auto const& w, auto const& b) { return zn::tanh(zn::matmul(x, w) + b); }, x,
      w, b);
  auto batch = random_array<double>({5, 2, 3}), m = random_array<double>({3, 4}),
       v = random_array<double>({3});
  check_run(
      "matmul: batches, vectors",
      [](auto const& batch, auto const& m, auto const& v) {
        return std::make_tuple(zn::matmul(batch, m), zn::matmul(m, zn::ones<double>({4})),
                               zn::matmul(v, m), zn::matmul(batch, v));
      },
      batch, m, v);
  auto t = random_array<double>({3, 4, 5});
  check_run(
      "reductions",
      [](auto const& t) {
        return std::make_tuple(zn::sum(t), zn::mean(t, 1, true), zn::max(t, {0, 2}), zn::min(t, 2),
                               zn::prod(t, 0), zn::logsumexp(t, -1), zn::argmax(t, 1),
                               zn::argmin(t, 0));
      },
      t);
  check_run(
      "views",
      [](auto const& t) {
        return std::make_tuple(zn::transpose(t), zn::reshape(t, {12, 5}),
                               zn::slice(t, {zn::range{}, zn::range{3, 0, -2}}),
                               zn::expand_dims(t, 1), zn::squeeze(zn::expand_dims(t, 0)),
                               zn::concatenate(std::tuple(t, t * 2.0), 2), zn::stack({t, t}, 1),
                               zn::broadcast_to(zn::slice(t, 0, 0, 1), {3, 4, 5}));
      },
      t);
  check_run(
      "softmax, log_softmax, layer_norm",
      [](auto const& t) {
        return std::make_tuple(zn::softmax(t, 1), zn::log_softmax(t),
                               zn::layer_norm(t * 3.0 + 1.0, -1, 1e-3));
      },
      t);
  auto img = random_array<float>({2, 3, 6, 5}), k = random_array<float>({4, 3, 3, 2});
  check_run(
      "conv2d",
      [](auto const& img, auto const& k) {
        return zn::conv2d(img, k, {.stride = {2, 1}, .padding = {1, 0}});
      },
      img, k);
}

TEST_CASE("ir::run: a recorded runtime loop, and errors", "[interpret]") {
  auto mlp = [](zn::array<double> const& x, zn::array<double> const& w1,
                zn::array<double> const& w2) {
    zn::array<double> h = zn::relu(zn::matmul(x, w1));
    h = zn::tanh(zn::matmul(h, w2)) * 0.5;
    return zn::mean(zn::square(h));
  };
  auto x = random_array<double>({8, 6}), w1 = random_array<double>({6, 7}),
       w2 = random_array<double>({7, 3});
  check_run("a two-layer loss", mlp, x, w1, w2);

  zn::jaxpr j = zn::make_jaxpr(mlp)(x, w1, w2);
  // Other inputs of the same shapes: the graph is the function.
  auto x2 = random_array<double>({8, 6});
  auto out = zn::ir::run(j.graph(), {x2, w1, w2});
  CHECK(std::abs(out[0].as<double>().item() - zn::eval(mlp(x2, w1, w2)).item()) < 1e-14);
  CHECK_THROWS_AS(out[0].as<float>(), zn::dtype_error);
  CHECK_THROWS_WITH(zn::ir::run(j.graph(), {x2, w1}), Catch::Contains("2 inputs given"));
  CHECK_THROWS_WITH(zn::ir::run(j.graph(), {x2, w2, w1}),
                    Catch::Contains("input 1") && Catch::Contains("(6, 7)"));
  zn::ir::graph g;
  zn::ir::value_id in = g.add_input(zn::dtype::float32, {3});
  g.add_output(g.add_equation("no_such_op", {in}, zn::dtype::float32, {3}));
  CHECK_THROWS_WITH(zn::ir::run(g, {zn::ones<float>({3})}), Catch::Contains("no_such_op"));
}

TEST_CASE("ir::run: known values are not recomputed, unneeded equations do not run",
          "[interpret]") {
  auto f = [](auto const& x, auto const& w) { return zn::tanh(zn::matmul(x, w)) * 2.0; };
  auto x = random_array<double>({3, 4}), w = random_array<double>({4, 2});
  zn::ir::graph g = zn::make_jaxpr(f)(x, w).graph();
  REQUIRE(std::string(g.equations()[0].op) == "dot_general");
  // The product given as known: the output is computed from it, not from x and w.
  zn::ir::value_id prod = g.equations()[0].output;
  zn::array<double> given = random_array<double>({3, 2});
  auto out = zn::ir::run(g, {x, w}, {{prod, given}});
  CHECK(zn::allclose(out[0].as<double>(), zn::tanh(given) * 2.0, 1e-14, 0));
  CHECK_THROWS_WITH(zn::ir::run(g, {x, w}, {{prod, zn::zeros<double>({2, 3})}}),
                    Catch::Contains("known value"));
  // An equation with no implementation that no output needs is never run.
  zn::ir::value_id in = g.inputs()[0];
  g.add_equation("no_such_op", {in}, zn::dtype::float64, {3, 4});
  out = zn::ir::run(g, {x, w});
  CHECK(zn::allclose(out[0].as<double>(), f(x, w), 1e-14, 0));
}

TEST_CASE("ir: the op tables hold what was registered, first registration kept", "[interpret]") {
  struct table_test;  // a table of its own, whatever else the program registered
  using own = int (*)(table_test*);
  auto& t = zn::ir::detail::table_of<own>();
  own one = [](table_test*) { return 1; }, two = [](table_test*) { return 2; };
  CHECK(t.find("op", zn::dtype::float32) == nullptr);
  t.add("op", zn::dtype::float32, one);
  t.add("op", zn::dtype::float32, two);
  t.add("op", zn::dtype::float64, two);
  REQUIRE(t.find("op", zn::dtype::float32) != nullptr);
  CHECK(t.find("op", zn::dtype::float32)(nullptr) == 1);
  CHECK(t.find("op", zn::dtype::float64)(nullptr) == 2);
  CHECK(t.find("op", zn::dtype::int32) == nullptr);
  CHECK(t.find("other", zn::dtype::float32) == nullptr);
}

TEST_CASE("ir::run: a graph built by hand runs every op of the catalogue", "[interpret]") {
  // No emitter registered these (op, dtype) pairs for this graph: ir::run registers every op.
  zn::ir::graph g;
  zn::ir::value_id x = g.add_input(zn::dtype::int64, {2, 3});
  zn::ir::value_id y = g.add_equation("abs", {x}, zn::dtype::int64, {2, 3});
  zn::ir::value_id m = g.add_equation("reduce_max", {y}, zn::dtype::int64, {2},
                                      {{"axes", std::vector<std::int64_t>{1}}});
  g.add_output(m);
  auto a = zn::array<std::int64_t>({2, 3}, {-7, 2, 3, 4, -5, 1});
  auto out = zn::ir::run(g, {a});
  zn::array<std::int64_t> r = out[0].as<std::int64_t>();
  CHECK(r(0) == 7);
  CHECK(r(1) == 5);

  zn::ir::graph h;
  zn::ir::value_id v = h.add_input(zn::dtype::float64, {2, 3});
  h.add_output(
      h.add_equation("softmax", {v}, zn::dtype::float64, {2, 3}, {{"axis", std::int64_t(1)}}));
  auto z = zn::array<double>({2, 3}, {1, 2, 3, -1, 0, 4});
  zn::array<double> sm = zn::ir::run(h, {z})[0].as<double>();
  for (std::size_t i = 0; i < 2; ++i) {
    double total = 0;
    for (std::size_t j = 0; j < 3; ++j) total += std::exp(z(i, j));
    for (std::size_t j = 0; j < 3; ++j) CHECK(sm(i, j) == Approx(std::exp(z(i, j)) / total));
  }
}
