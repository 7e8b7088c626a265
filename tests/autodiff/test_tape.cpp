// The tape (intermediates materialized inside a differentiated function), argument trees and
// vjp: gradients against central finite differences in double, and against the static pass.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

namespace {

using fd::random_array;

// A deep copy of a tree (the arrays are handles; finite differences perturb the copy).
template <class Tree>
Tree deep_copy(Tree const& t) {
  Tree c = t;
  zn::for_each_leaf(c, [](auto& a) { a = zn::copy_from(a.data(), a.shape()); });
  return c;
}

// d f / d tree by central differences on every element of every leaf, as a list of arrays in
// the tree's leaf order. f(tree) returns a scalar expression or array.
template <class F, class Tree>
std::vector<zn::array<double>> numeric_tree_grad(F const& f, Tree const& tree) {
  Tree x = deep_copy(tree);
  std::vector<zn::array<double>> out;
  zn::for_each_leaf(x, [&](zn::array<double>& a) {
    auto g = zn::zeros<double>(a.shape());
    for (std::size_t i = 0; i < a.size(); ++i) {
      double v = a.data()[i], h = 1e-6 * std::max(1.0, std::abs(v));
      a.data()[i] = v + h;
      double up = zn::eval(f(x)).item();
      a.data()[i] = v - h;
      double down = zn::eval(f(x)).item();
      a.data()[i] = v;
      g.data()[i] = (up - down) / (2 * h);
    }
    out.push_back(g);
  });
  return out;
}

using fd::check_close;

// Every leaf of a gradient tree against finite differences of f at tree.
template <class F, class Tree>
void check_tree_grad(F const& f, Tree const& tree, Tree const& grads) {
  auto want = numeric_tree_grad(f, tree);
  std::size_t k = 0;
  zn::for_each_leaf(grads, [&](zn::array<double> const& g) {
    REQUIRE(k < want.size());
    check_close(g, want[k++]);
  });
  CHECK(k == want.size());
}

// The runtime loop over layers: plain arrays, a std::vector of weights.
auto mlp = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& x) {
  zn::array<double> h = x;
  for (auto const& w : ws) h = zn::tanh(zn::matmul(h, w));
  return zn::sum(h * h);
};

}  // namespace

namespace user {
struct params {
  zn::array<double> w1, b1, w2;
  int hidden = 4;  // not listed: copied along
};
ZENITH_FIELDS(params, w1, b1, w2)

struct with_method {
  zn::array<double> a;
  std::vector<zn::array<double>> bs;
  auto fields() { return std::tie(a, bs); }
};
}  // namespace user

TEST_CASE("grad of a runtime loop over layers records a tape", "[tape]") {
  std::vector<zn::array<double>> ws{random_array({3, 5}, 1), random_array({5, 4}, 2),
                                    random_array({4, 2}, 3)};
  auto x = random_array({6, 3}, 4);
  std::vector<zn::array<double>> g = zn::grad(mlp)(ws, x);
  REQUIRE(g.size() == 3);
  check_tree_grad([&](auto const& w) { return mlp(w, x); }, ws, g);
  // x's gradient too, through every layer.
  zn::array<double> gx = zn::grad(mlp, zn::argnums<1>)(ws, x);
  check_close(gx, numeric_tree_grad([&](auto const& v) { return mlp(ws, v); }, x)[0]);
}

TEST_CASE("the tape and the static pass give the same gradients", "[tape]") {
  auto w1 = random_array({4, 6}, 5), w2 = random_array({6, 3}, 6), x = random_array({8, 4}, 7);
  auto b = random_array({6}, 8);
  auto fused = [](auto const& w1, auto const& b, auto const& w2, auto const& x) {
    return zn::mean(zn::square(zn::matmul(zn::sigmoid(zn::matmul(x, w1) + b), w2)));
  };
  auto stepwise = [](zn::array<double> const& w1, zn::array<double> const& b,
                     zn::array<double> const& w2, zn::array<double> const& x) {
    zn::array<double> z = zn::matmul(x, w1);
    zn::array<double> h = zn::sigmoid(z + b);
    zn::array<double> y = zn::matmul(h, w2);
    return zn::mean(zn::square(y));
  };
  auto [v1, g1] = zn::value_and_grad(fused, zn::argnums<0, 1, 2, 3>)(w1, b, w2, x);
  auto [v2, g2] = zn::value_and_grad(stepwise, zn::argnums<0, 1, 2, 3>)(w1, b, w2, x);
  CHECK(v1.item() == v2.item());
  auto same = [](zn::array<double> const& p, zn::array<double> const& q) {
    REQUIRE(p.shape() == q.shape());
    for (std::size_t i = 0; i < p.size(); ++i)
      CHECK(p.data()[i] == Approx(q.data()[i]).epsilon(1e-13));
  };
  same(std::get<0>(g1), std::get<0>(g2));
  same(std::get<1>(g1), std::get<1>(g2));
  same(std::get<2>(g1), std::get<2>(g2));
  same(std::get<3>(g1), std::get<3>(g2));
  check_close(std::get<1>(g2),
              numeric_tree_grad([&](auto const& v) { return stepwise(w1, v, w2, x); }, b)[0]);
}

TEST_CASE("the tape: reductions, reused intermediates, masks and mixed types", "[tape]") {
  auto x = random_array({5, 4}, 9, 0.1, 1.0);
  auto f = [](zn::array<double> const& x) {
    zn::array<double> s = zn::sum(x, 1);              // a reduction, recorded
    zn::array<double> n = x / zn::expand_dims(s, 1);  // reads the recorded s and x
    zn::array<bool> big = n > 0.25;                   // a mask: evaluated, not recorded
    zn::array<double> r = zn::where(big, n * n, zn::exp(n));
    r = r + n;  // rebinding reads the old r
    return zn::sum(r * zn::expand_dims(s, 1) + zn::log(n)) + zn::max(r);  // s read again
  };
  zn::array<double> g = zn::grad(f)(x);
  check_close(g, numeric_tree_grad(f, x)[0]);
  // An intermediate of another element type: its cotangent is converted both ways.
  auto h = [](zn::array<double> const& x) {
    zn::array<float> lowp = x * x;
    return zn::sum(zn::cast<double>(lowp) * x);
  };
  zn::array<double> gh = zn::grad(h)(x);
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(gh.data()[i] == Approx(3 * x.data()[i] * x.data()[i]).epsilon(1e-6));
  // 16-bit intermediates, and a bfloat16 argument: the trace's runtime registers what it does
  // with arrays of those types when it first records one. d/dx sum(x^2 * 2) = 4x, computed in
  // float and stored as bfloat16 (8 bits of mantissa).
  auto k = [](zn::array<zn::bfloat16> const& v) {
    zn::array<zn::float16> sq = zn::cast<zn::float16>(v) * zn::cast<zn::float16>(v);
    zn::array<zn::bfloat16> twice = zn::cast<zn::bfloat16>(sq) * zn::bfloat16(2.0f);
    return zn::sum(zn::cast<float>(twice));
  };
  zn::array<zn::bfloat16> xb = zn::cast<zn::bfloat16>(x);
  zn::array<zn::bfloat16> gk = zn::grad(k)(xb);
  for (std::size_t i = 0; i < x.size(); ++i) {
    float xi = float(xb.data()[i]);
    CHECK(float(gk.data()[i]) == Approx(4 * xi).epsilon(2e-2));
  }
}

TEST_CASE("argument trees: gradients come back in the same structure", "[tape][tree]") {
  auto a = random_array({3}, 10), b = random_array({3}, 11), c = random_array({2, 3}, 12);

  SECTION("std::tuple, std::array and std::map") {
    auto f = [](auto const& t) {
      auto const& [p, arr, m] = t;
      return zn::sum(zn::sin(p) * arr[0] + arr[1] * m.at("k")) + zn::sum(m.at("z"));
    };
    std::tuple<zn::array<double>, std::array<zn::array<double>, 2>,
               std::map<std::string, zn::array<double>>>
        t{a, {b, a}, {{"k", b}, {"z", c}}};
    auto g = zn::grad(f)(t);
    static_assert(std::is_same_v<decltype(g), decltype(t)>);
    REQUIRE(std::get<2>(g).count("k") == 1);
    REQUIRE(std::get<2>(g).count("z") == 1);
    CHECK(std::get<2>(g).at("z").shape() == c.shape());
    check_tree_grad(f, t, g);
  }
  SECTION("ZENITH_FIELDS structs and fields() members, nested in containers") {
    user::params p{random_array({3, 4}, 13), random_array({4}, 14), random_array({4, 1}, 15), 7};
    auto f = [](user::params const& p, zn::array<double> const& x) {
      zn::array<double> h = zn::tanh(zn::matmul(x, p.w1) + p.b1);
      return zn::sum(zn::matmul(h, p.w2));
    };
    auto x = random_array({5, 3}, 16);
    user::params g = zn::grad(f)(p, x);
    CHECK(g.hidden == 7);
    check_tree_grad([&](auto const& q) { return f(q, x); }, p, g);

    std::vector<user::with_method> v{{a, {b, c}}, {b, {}}};
    auto h = [](std::vector<user::with_method> const& v) {
      auto s = zn::sum(v[0].a * v[1].a);
      zn::array<double> acc = s;
      for (auto const& bi : v[0].bs) acc = acc + zn::sum(zn::square(bi));
      return acc;
    };
    auto gv = zn::grad(h)(v);
    REQUIRE(gv.size() == 2);
    CHECK(gv[0].bs.size() == 2);
    CHECK(gv[1].bs.empty());
    check_tree_grad(h, v, gv);
  }
}

TEST_CASE("the tape frees what it recorded", "[tape]") {
  std::vector<zn::array<double>> ws{random_array({16, 16}, 17), random_array({16, 16}, 18)};
  auto x = random_array({32, 16}, 19);
  { auto warm = zn::grad(mlp)(ws, x); }
  auto before = zn::cpu_memory_stats().bytes_in_use;
  {
    auto g = zn::grad(mlp)(ws, x);
    CHECK(zn::cpu_memory_stats().bytes_in_use - before == 2 * 16 * 16 * sizeof(double));
  }
  CHECK(zn::cpu_memory_stats().bytes_in_use == before);
}

TEST_CASE("vjp: the pullback returns a tuple of cotangents", "[tape][vjp]") {
  auto x = random_array({4}, 20), y = random_array({4}, 21);
  auto f = [](zn::array<double> const& x, zn::array<double> const& y) {
    zn::array<double> h = zn::sin(x) * y;
    return h * x + y;  // not a scalar: vjp takes any output shape
  };
  auto [out, pullback] = zn::vjp(f, x, y);
  CHECK(zn::allclose(out, zn::sin(x) * y * x + y, 0, 0));
  auto ct = random_array({4}, 22);
  auto [gx, gy] = pullback(ct);
  // <ct, J e_i> by finite differences.
  auto dot_ct = [&](auto const& a, auto const& b) { return zn::sum(f(a, b) * ct); };
  check_close(gx, numeric_tree_grad([&](auto const& v) { return dot_ct(v, y); }, x)[0]);
  check_close(gy, numeric_tree_grad([&](auto const& v) { return dot_ct(x, v); }, y)[0]);
  // Called again (the tape is kept), with another cotangent: linear in ct.
  auto [gx2, gy2] = pullback(ct * 2.0);
  CHECK(zn::allclose(gx2, gx * 2.0, 1e-14, 0));
  CHECK(zn::allclose(gy2, gy * 2.0, 1e-14, 0));
  // One argument still gives a tuple.
  auto [o1, pb1] = zn::vjp([](auto const& v) { return zn::exp(v); }, x);
  auto cts = pb1(zn::ones<double>({4}));
  static_assert(std::tuple_size_v<decltype(cts)> == 1);
  CHECK(zn::allclose(std::get<0>(cts), zn::exp(x), 1e-15, 0));
  // A cotangent of the wrong shape.
  CHECK_THROWS_AS(pullback(zn::ones<double>({3})), zn::shape_error);
  CHECK_THROWS_WITH(pullback(zn::ones<double>({3})),
                    Catch::Contains("vjp") && Catch::Contains("(3,)") && Catch::Contains("(4,)"));
}
