// make_jaxpr and the IR it prints: the text against jaxprs that JAX 0.10.2 printed for the same
// functions (tests/data/jaxpr_reference.txt, made by tests/data/jaxpr_reference.py), and the
// graph's data (dtypes, shapes, attributes, constants, literals) read directly.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>
#include <zenith/zenith.hpp>

namespace {

namespace zn = zenith;

// The reference file's cases: "== name" lines, each followed by a jaxpr.
std::map<std::string, std::string> const& reference() {
  static std::map<std::string, std::string> cases = [] {
    std::ifstream in(ZENITH_TEST_DATA_DIR "/jaxpr_reference.txt");
    REQUIRE(in.good());
    std::map<std::string, std::string> m;
    std::string line, name;
    while (std::getline(in, line)) {
      if (line.rfind("== ", 0) == 0) {
        name = line.substr(3);
        continue;
      }
      std::string& text = m[name];
      text += (text.empty() ? "" : "\n") + line;
    }
    return m;
  }();
  return cases;
}

std::string jax(std::string const& name) {
  auto it = reference().find(name);
  REQUIRE(it != reference().end());
  return it->second;
}

zn::array<float> ones(zn::shape s) { return zn::ones<float>(s); }

}  // namespace

TEST_CASE("make_jaxpr prints what JAX prints for the same function", "[make_jaxpr]") {
  auto x43 = ones({4, 3}), w32 = ones({3, 2}), v3 = ones({3});
  CHECK(zn::make_jaxpr([](auto const& x, auto const& w) { return zn::tanh(zn::matmul(x, w)); })(x43,
                                                                                                w32)
            .str() == jax("tanh_matmul"));
  CHECK(zn::make_jaxpr([](auto const& v) { return zn::sum(zn::exp(v) * v); })(v3).str() ==
        jax("sum_exp"));
  CHECK(zn::make_jaxpr([](auto const& v) { return zn::sin(v); })(v3).str() == jax("sin"));
  CHECK(zn::make_jaxpr([](auto const& v) { return zn::sin(v) * 2.f; })(v3).str() ==
        jax("sin_times_2"));
  CHECK(
      zn::make_jaxpr([](auto const& x) {
        return zn::slice(zn::reshape(zn::transpose(x), {2, 6}), {zn::range{0, 1}, zn::range{1, 4}});
      })(x43)
          .str() == jax("views"));
  CHECK(zn::make_jaxpr([](auto const& x) {
          return std::make_tuple(zn::cast<std::int32_t>(x), zn::max(x, 1),
                                 zn::concatenate({x, x}, 0), zn::maximum(x, 0.5f), zn::sqrt(x),
                                 zn::expand_dims(x, 0), zn::sum(x, 0, true));
        })(x43)
            .str() == jax("tuple"));
  zn::array<float> b3 = ones({3});
  CHECK(zn::make_jaxpr([&](auto const& v) { return v * b3; })(v3).str() == jax("constant"));
  CHECK(zn::make_jaxpr([](auto const& v) { return zn::sum(zn::log1p(v * v)) / 3.0; })(
            zn::ones<double>({3}))
            .str() == jax("float64"));
}

TEST_CASE("make_jaxpr records what the function materializes", "[make_jaxpr]") {
  auto layer = [](zn::array<float> const& x, zn::array<float> const& w) {
    zn::array<float> h = zn::tanh(zn::matmul(x, w));  // materialized: recorded as it runs
    return zn::sum(h * h);
  };
  zn::array<float> x({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), w = ones({3, 2});
  auto j = zn::make_jaxpr(layer)(x, w);
  CHECK(j.str() == jax("runtime_layer"));
  // The function ran on the real values: the graph's data describes them.
  zn::ir::graph const& g = j.graph();
  REQUIRE(g.inputs().size() == 2);
  REQUIRE(g.equations().size() == 4);
  CHECK(std::string(g.equations()[0].op) == "dot_general");
  CHECK(g.at(g.equations()[0].output).shape == zn::shape{4, 2});
  CHECK(g.equations()[0].attrs.get<std::vector<std::int64_t>>("lhs_contracting") ==
        std::vector<std::int64_t>{1});
  CHECK(g.equations()[3].attrs.get<std::vector<std::int64_t>>("axes") ==
        std::vector<std::int64_t>{0, 1});
  CHECK(g.at(g.outputs()[0]).dtype == zn::dtype::float32);
  CHECK_THROWS_AS(g.equations()[3].attrs.get<double>("axes"), zn::value_error);
}

TEST_CASE("make_jaxpr: constants are kept, literals carry their value, trees are inputs",
          "[make_jaxpr]") {
  zn::array<double> c({2}, {3.0, 4.0});
  std::vector<zn::array<double>> params{zn::ones<double>({2}), zn::ones<double>({2})};
  auto f = [&](std::vector<zn::array<double>> const& p, double scale) {
    return (p[0] * c + p[1]) * scale;  // a number argument passes through as a literal
  };
  auto j = zn::make_jaxpr(f)(params, 0.5);
  zn::ir::graph const& g = j.graph();
  CHECK(g.inputs().size() == 2);
  REQUIRE(g.constants().size() == 1);
  zn::ir::value const& k = g.at(g.constants()[0]);
  c = zn::zeros<double>({2});  // rebinding c: the graph keeps the values it read
  CHECK(static_cast<double const*>(k.ptr)[1] == 4.0);
  zn::ir::equation const& last = g.equations().back();
  CHECK(std::string(last.op) == "mul");
  CHECK(g.at(last.inputs[1]).kind == zn::ir::value_kind::literal);
  CHECK(g.at(last.inputs[1]).literal == 0.5);
  CHECK(j.str() ==
        "{ lambda a:f64[2]; b:f64[2] c:f64[2]. let\n"
        "    d:f64[2] = mul b a\n"
        "    e:f64[2] = add d c\n"
        "    f:f64[2] = mul e 0.5:f64[]\n"
        "  in (f,) }");
}

TEST_CASE("make_jaxpr: broadcasting, where, clip, negative steps and matmul batches",
          "[make_jaxpr]") {
  auto x = ones({2, 3});
  auto bias = zn::make_jaxpr([](auto const& x, auto const& b) { return x + b; })(x, ones({3}));
  CHECK(bias.str() ==
        "{ lambda ; a:f32[2,3] b:f32[3]. let\n"
        "    c:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,)] b\n"
        "    d:f32[2,3] = add a c\n"
        "  in (d,) }");
  auto sel = zn::make_jaxpr(
      [](auto const& x) { return zn::where(x > 0.f, x, 2.f * x) + zn::clip(x, -1.f, 1.f); })(x);
  CHECK(sel.str() ==
        "{ lambda ; a:f32[2,3]. let\n"
        "    b:bool[2,3] = gt a 0.0:f32[]\n"
        "    c:f32[2,3] = mul 2.0:f32[] a\n"
        "    d:f32[2,3] = select_n b c a\n"
        "    e:f32[2,3] = clamp -1.0:f32[] a 1.0:f32[]\n"
        "    f:f32[2,3] = add d e\n"
        "  in (f,) }");
  auto rev = zn::make_jaxpr([](auto const& v) {
    return zn::slice(v, {zn::range{3, 0, -2}});
  })(ones({5}));
  CHECK(rev.str() ==
        "{ lambda ; a:f32[5]. let\n"
        "    b:f32[5] = rev[dimensions=(0,)] a\n"
        "    c:f32[2] = slice[limit_indices=(4,) start_indices=(1,) strides=(2,)] b\n"
        "  in (c,) }");
  auto batched = zn::make_jaxpr([](auto const& a, auto const& b) { return zn::matmul(a, b); })(
      ones({5, 2, 3}), ones({3, 4}));
  CHECK(batched.str() ==
        "{ lambda ; a:f32[5,2,3] b:f32[3,4]. let\n"
        "    c:f32[5,3,4] = broadcast_in_dim[broadcast_dimensions=(1, 2)] b\n"
        "    d:f32[5,2,4] = dot_general[\n"
        "      dimension_numbers=(([2], [1]), ([0], [0]))\n"
        "      preferred_element_type=float32\n"
        "    ] a c\n"
        "  in (d,) }");
  auto bf = zn::make_jaxpr([](auto const& v) { return zn::cast<zn::bfloat16>(v); })(ones({2}));
  CHECK(bf.str() ==
        "{ lambda ; a:f32[2]. let\n"
        "    b:bf16[2] = convert_element_type[new_dtype=bfloat16 weak_type=False] a\n"
        "  in (b,) }");
}

TEST_CASE("make_jaxpr: errors", "[make_jaxpr]") {
  zn::array<float> empty;
  CHECK_THROWS_WITH(zn::make_jaxpr([](auto const& v) { return v * 2.f; })(empty),
                    Catch::Contains("make_jaxpr") && Catch::Contains("no storage"));
  zn::ir::graph g;
  CHECK_THROWS_AS(g.add_equation("neg", {7}, zn::dtype::float32, {}), zn::value_error);
}

TEST_CASE("ir attributes: each kind of value reads back as itself, another kind is an error",
          "[make_jaxpr]") {
  using zn::ir::attr_value;
  zn::ir::attributes a{{"axis", 2},
                       {"epsilon", 1e-5},
                       {"keepdims", true},
                       {"axes", std::vector<std::int64_t>{0, 2}},
                       {"new_dtype", zn::dtype::bfloat16},
                       {"strides", "None"}};
  CHECK(a.get<std::int64_t>("axis") == 2);
  CHECK(a.get<double>("epsilon") == 1e-5);
  CHECK(a.get<bool>("keepdims"));
  CHECK(a.get<std::vector<std::int64_t>>("axes") == std::vector<std::int64_t>{0, 2});
  CHECK(a.get<zn::dtype>("new_dtype") == zn::dtype::bfloat16);
  CHECK(a.get<std::string>("strides") == "None");
  CHECK(a.find("axis")->which() == attr_value::kind::integer);
  CHECK(a.find("keepdims")->holds<bool>());
  CHECK_FALSE(a.find("keepdims")->holds<std::int64_t>());
  CHECK(a.find("missing") == nullptr);
  CHECK_THROWS_WITH(a.get<double>("axis"), Catch::Contains("axis") && Catch::Contains("kind"));
  CHECK_THROWS_AS(a.get<std::int64_t>("missing"), zn::value_error);
  a.set("axis", std::int64_t(-1));  // replaces, never duplicates
  CHECK(a.get<std::int64_t>("axis") == -1);
  CHECK(std::distance(a.begin(), a.end()) == 6);
}

TEST_CASE("make_jaxpr of a function that calls grad: the backward pass is in the graph",
          "[make_jaxpr][grad]") {
  // A runtime loop under grad, inside make_jaxpr: the gradient's equations (forward and
  // backward) are recorded, so running the graph on other inputs gives the gradient there.
  auto loss = [](zn::array<double> const& w, zn::array<double> const& x) {
    zn::array<double> h = zn::tanh(zn::matmul(x, w));
    h = zn::sin(h) * h;
    return zn::sum(h * h);
  };
  auto df = [&](zn::array<double> const& w, zn::array<double> const& x) {
    return zn::grad(loss)(w, x);
  };
  auto at = [](zn::shape s, double k) {
    auto a = zn::array<double>::empty(s);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = std::sin(k * double(i + 1));
    return a;
  };
  zn::array<double> w = at({3, 2}, 0.7), x = at({4, 3}, 1.3);
  auto j = zn::make_jaxpr(df)(w, x);
  std::string text = j.str();
  CHECK(text.find("dot_general") != std::string::npos);
  CHECK(text.find("transpose") != std::string::npos);  // the matmul's backward
  zn::array<double> w2 = at({3, 2}, 0.4), x2 = at({4, 3}, 2.1);
  auto out = zn::ir::run(j.graph(), {w2, x2});
  REQUIRE(out.size() == 1);
  CHECK(zn::allclose(out[0].as<double>(), df(w2, x2), 1e-12, 1e-14));
}
