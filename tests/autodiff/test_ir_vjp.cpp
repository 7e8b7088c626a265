// Reverse and forward mode on the IR (autodiff/ir_vjp.hpp, ir_jvp.hpp): a function's graph from
// make_jaxpr, its backward (tangent) equations appended by ir::append_vjp (append_jvp), the
// whole run by ir::run, against central finite differences in double.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>
#include <zenith/zenith.hpp>

namespace {

namespace zn = zenith;

std::mt19937 rng(7);

zn::array<double> random_array(zn::shape s, double lo = -1.5, double hi = 1.5) {
  std::uniform_real_distribution<double> u(lo, hi);
  auto a = zn::array<double>::empty(s);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = u(rng);
  return a;
}

// sum(f(args) * w) for a fixed random w: a scalar whose gradient is the vjp of f with w.
template <class F, class... A>
void vjp_case(std::string const& what, F f, A const&... args) {
  INFO(what);
  zn::jaxpr j = zn::make_jaxpr(f)(args...);
  zn::ir::graph g = j.graph();
  REQUIRE(g.outputs().size() == 1);
  zn::ir::value_id y = g.outputs()[0];
  zn::array<double> w = random_array(g.at(y).shape);
  zn::ir::value_id ct = g.add_input(zn::dtype::float64, g.at(y).shape);
  std::vector<zn::ir::value_id> wrt(g.inputs().begin(), g.inputs().end() - 1);
  auto grads = zn::ir::append_vjp(g, {y}, {ct}, wrt);
  for (auto const& v : grads) {
    REQUIRE(v);
    g.add_output(*v);
  }
  INFO(zn::jaxpr(g).str());
  std::vector<zn::any_array> out = zn::ir::run(g, {zn::any_array(args)..., zn::any_array(w)});
  // Central differences of sum(f(args) * w), argument by argument, element by element.
  std::vector<zn::array<double>> xs{zn::eval(args * 1.0)...};
  std::size_t k = 0;
  auto check_arg = [&](std::size_t arg) {
    zn::array<double> got = out[1 + arg].as<double>();
    REQUIRE(got.shape() == xs[arg].shape());
    for (std::size_t i = 0; i < got.size(); ++i) {
      double v = xs[arg].data()[i], h = 1e-6;
      auto eval_at = [&](double x) {
        xs[arg].data()[i] = x;
        double r = [&]<std::size_t... I>(std::index_sequence<I...>) {
          return zn::eval(zn::sum(f(xs[I]...) * w)).item();
        }
        (std::index_sequence_for<A...>{});
        xs[arg].data()[i] = v;
        return r;
      };
      double fd = (eval_at(v + h) - eval_at(v - h)) / (2 * h);
      INFO("argument " << arg << ", element " << i << ": vjp " << got.data()[i] << ", fd " << fd);
      CHECK(std::abs(got.data()[i] - fd) <= 1e-6 * (1 + std::abs(fd)));
    }
  };
  for (; k < sizeof...(A); ++k) check_arg(k);
}

// f's tangent along random directions t (one per argument) against the central difference
// (f(x + h t) - f(x - h t)) / 2h, element by element.
template <class F, class... A>
void jvp_case(std::string const& what, F f, A const&... args) {
  INFO(what);
  zn::jaxpr j = zn::make_jaxpr(f)(args...);
  zn::ir::graph g = j.graph();
  std::vector<zn::ir::value_id> primals(g.inputs().begin(), g.inputs().end()), tangents;
  std::vector<zn::array<double>> dirs{random_array(args.shape())...};
  for (auto const& d : dirs) tangents.push_back(g.add_input(zn::dtype::float64, d.shape()));
  auto ts = zn::ir::append_jvp(g, primals, tangents, g.outputs());
  REQUIRE(ts.size() == 1);
  REQUIRE(ts[0]);
  g.add_output(*ts[0]);
  INFO(zn::jaxpr(g).str());
  std::vector<zn::any_array> in{zn::any_array(args)...};
  for (auto const& d : dirs) in.push_back(d);
  zn::array<double> got = zn::ir::run(g, in).back().as<double>();
  double const h = 1e-6;
  auto at = [&](double s) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return zn::eval(f(zn::eval(args + s * dirs[I])...));
    }
    (std::index_sequence_for<A...>{});
  };
  zn::array<double> up = at(h), down = at(-h);
  REQUIRE(got.shape() == up.shape());
  for (std::size_t i = 0; i < got.size(); ++i) {
    double fd = (up.data()[i] - down.data()[i]) / (2 * h);
    INFO("element " << i << ": jvp " << got.data()[i] << ", fd " << fd);
    CHECK(std::abs(got.data()[i] - fd) <= 1e-6 * (1 + std::abs(fd)));
  }
}

struct check_vjp {
  template <class F, class... A>
  void operator()(std::string const& what, F f, A const&... args) const {
    vjp_case(what, f, args...);
  }
};
struct check_jvp {
  template <class F, class... A>
  void operator()(std::string const& what, F f, A const&... args) const {
    jvp_case(what, f, args...);
  }
};

template <class Check>
void elementwise_cases(Check check) {
  auto a = random_array({3, 4}), b = random_array({3, 4}, 0.5, 2), c = random_array({4});
  check(
      "a chain",
      [](auto const& a, auto const& b) {
        return zn::sin(a) * zn::exp(-b * b) + a / b - zn::tanh(a * 2.0);
      },
      a, b);
  check(
      "broadcast, where, clip, maximum, pow, sqrt, log",
      [](auto const& a, auto const& b, auto const& c) {
        return zn::where(a > 0.0, a * c, zn::clip(a, -0.5, 0.5)) + zn::maximum(a, b * 0.1) +
               zn::pow(b, c + 2.0) + zn::sqrt(b) * zn::log(b + c * c);
      },
      a, b, c);
  check(
      "a value read many times",
      [](auto const& a) {
        auto s = zn::sigmoid(a);
        return s * s + s * a + zn::square(s) * zn::abs(a);
      },
      a);
}

template <class Check>
void barrier_cases(Check check) {
  auto t = random_array({3, 4, 5});
  check(
      "reductions",
      [](auto const& t) {
        return zn::sum(t, 0) * zn::mean(t, 0) + zn::max(t, 0) + zn::logsumexp(t, 0) -
               zn::min(t, {0}, false);
      },
      t);
  check(
      "keepdims and a whole sum",
      [](auto const& t) {
        return t * zn::sum(t, 2, true) - zn::mean(t, {0, 2}, true) + zn::sum(t);
      },
      t);
  check(
      "views",
      [](auto const& t) {
        auto u = zn::transpose(t) * 2.0;
        return zn::reshape(u, {5, 12}) +
               zn::sum(zn::slice(t, {zn::range{}, zn::range{3, 0, -1}, zn::range{0, 5, 2}}));
      },
      t);
  check(
      "slices, concatenate, stack, expand_dims",
      [](auto const& t) {
        auto s = zn::slice(t, {zn::range{1, 3}, zn::range{3, 0, -2}, zn::range{0, 5, 2}});
        return zn::concatenate(std::tuple(s, s * s), 1) + zn::expand_dims(zn::sum(s, 1), 1) +
               zn::sum(zn::stack(std::tuple(s, zn::sin(s)), 0));
      },
      t);
  auto x = random_array({4, 3}), w = random_array({3, 2}), bias = random_array({2});
  check(
      "a dense layer",
      [](auto const& x, auto const& w, auto const& bias) {
        return zn::tanh(zn::matmul(x, w) + bias);
      },
      x, w, bias);
  auto batch = random_array({5, 2, 3}), m = random_array({3, 4}), v = random_array({3});
  check(
      "batched matmul, a shared weight",
      [](auto const& batch, auto const& m) { return zn::matmul(batch, m); }, batch, m);
  check(
      "matrix times vector, vector times matrix",
      [](auto const& m, auto const& v) {
        return zn::matmul(v, m) + zn::sum(zn::matmul(zn::transpose(m), v));
      },
      m, v);
  check(
      "batch times vector, vector dot vector",
      [](auto const& batch, auto const& v) { return zn::matmul(batch, v) * zn::matmul(v, v); },
      batch, v);
  check(
      "softmax and log_softmax",
      [](auto const& t) { return zn::softmax(t, 1) * zn::log_softmax(t * 0.5, -1); }, t);
  check(
      "through float and back",
      [](auto const& x) { return zn::cast<double>(zn::exp(zn::cast<float>(x))) * 0.0 + x * 3.0; },
      x);
}

}  // namespace

TEST_CASE("ir::append_vjp: elementwise rules from the op tags", "[ir_vjp]") {
  elementwise_cases(check_vjp{});
}
TEST_CASE("ir::append_jvp: elementwise rules from the op tags", "[ir_vjp]") {
  elementwise_cases(check_jvp{});
}
TEST_CASE("ir::append_vjp: barriers", "[ir_vjp]") { barrier_cases(check_vjp{}); }
TEST_CASE("ir::append_jvp: barriers", "[ir_vjp]") { barrier_cases(check_jvp{}); }

TEST_CASE("ir::append_vjp: a runtime loop, and an op without a rule", "[ir_vjp]") {
  auto mlp = [](zn::array<double> const& x, zn::array<double> const& w1,
                zn::array<double> const& w2) {
    zn::array<double> h = zn::relu(zn::matmul(x, w1));
    h = zn::tanh(zn::matmul(h, w2));
    return zn::mean(zn::square(h), 1);
  };
  zn::array<double> x = random_array({6, 4}), w1 = random_array({4, 5}), w2 = random_array({5, 3});
  vjp_case("a two-layer model", mlp, x, w1, w2);
  jvp_case("a two-layer model", mlp, x, w1, w2);
  zn::ir::graph g;
  zn::ir::value_id in = g.add_input(zn::dtype::float64, {3});
  zn::ir::value_id y = g.add_equation("no_rule", {in}, zn::dtype::float64, {3});
  zn::ir::value_id ct = g.add_input(zn::dtype::float64, {3});
  CHECK_THROWS_WITH(zn::ir::append_vjp(g, {y}, {ct}, {in}), Catch::Contains("no_rule"));
  CHECK_THROWS_WITH(zn::ir::append_jvp(g, {in}, {ct}, {y}), Catch::Contains("no_rule"));
}

TEST_CASE("ir::append_vjp and append_jvp in float32: the rules keep the graph's dtype",
          "[ir_vjp]") {
  auto f = [](auto const& x) {
    return zn::sum(zn::tanh(x) * zn::exp(-x * x) + zn::where(x > 0.f, x, 2.f * x) +
                   zn::clip(x, -0.5f, 0.5f) / (x * x + 1.f));
  };
  zn::array<float> x({6}, {-1.5f, -0.7f, -0.1f, 0.2f, 0.6f, 1.3f});
  zn::ir::graph g = zn::make_jaxpr(f)(x).graph();
  zn::ir::value_id y = g.outputs()[0], in = g.inputs()[0];
  zn::ir::value_id ct = g.add_input(zn::dtype::float32, {});
  zn::ir::value_id t = g.add_input(zn::dtype::float32, {6});
  auto grads = zn::ir::append_vjp(g, {y}, {ct}, {in});
  auto tangents = zn::ir::append_jvp(g, {in}, {t}, {y});
  REQUIRE(grads[0]);
  REQUIRE(tangents[0]);
  g.add_output(*grads[0]);
  g.add_output(*tangents[0]);
  for (auto const& v : g.values()) CHECK(v.dtype != zn::dtype::float64);
  zn::array<float> dir({6}, {1, -2, 0.5f, 3, -1, 0.25f});
  auto out = zn::ir::run(g, {x, zn::full<float>({}, 1.f), dir});
  zn::array<float> want = zn::grad(f)(x);
  zn::array<float> got = out[1].as<float>();
  float tangent = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(std::abs(got(i) - want(i)) <= 1e-5f * (1 + std::abs(want(i))));
    tangent += want(i) * dir(i);
  }
  CHECK(std::abs(out[2].as<float>().item() - tangent) <= 1e-5f * (1 + std::abs(tangent)));
}
