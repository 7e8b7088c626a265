// The examples of docs/autodiff.md, compiled and run by ctest as doc.autodiff.
// Each `// [doc:NAME]` ... `// [/doc:NAME]` region appears verbatim in the page (doc.snippets
// checks that), and every region asserts its results, so the page cannot rot.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

#include "check.hpp"

void grad_basics() {
  // [doc:ad-grad]
  auto loss = [](auto const& w, auto const& x) {
    return zn::mean(zn::square(zn::tanh(zn::matmul(x, w))));
  };
  zn::array<double> w({3, 2}, {0.1, -0.2, 0.3, 0.4, -0.5, 0.6});
  zn::array<double> x({4, 3}, {1, 0, 2, -1, 3, 1, 0.5, 0.5, 0.5, 2, -2, 1});

  zn::array<double> gw = zn::grad(loss)(w, x);  // with respect to argument 0: shaped like w
  auto [value, grads] = zn::value_and_grad(loss, zn::argnums<0, 1>)(w, x);
  auto const& [dw, dx] = grads;  // several argnums: a std::tuple
  // [/doc:ad-grad]
  CHECK(gw.shape() == w.shape() && dx.shape() == x.shape());
  CHECK(zn::allclose(gw, dw, 0, 0));
  CHECK(std::abs(value.item() - zn::eval(loss(w, x)).item()) < 1e-15);
  // One entry against a central difference.
  zn::array<double> w2 = zn::copy_from(w.data(), w.shape());
  double h = 1e-6;
  w2(1, 0) = w(1, 0) + h;
  double up = zn::eval(loss(w2, x)).item();
  w2(1, 0) = w(1, 0) - h;
  double down = zn::eval(loss(w2, x)).item();
  CHECK(std::abs(gw(1, 0) - (up - down) / (2 * h)) < 1e-8);
}

void runtime_loop() {
  // [doc:ad-tape]
  // A runtime loop over layers: plain arrays, intermediates materialized as usual.
  auto mlp = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& x) {
    zn::array<double> h = x;
    for (auto const& w : ws) h = zn::tanh(zn::matmul(h, w));  // recorded as IR
    return zn::sum(h * h);
  };
  std::vector<zn::array<double>> ws{zn::full<double>({3, 4}, 0.1), zn::full<double>({4, 2}, -0.2)};
  zn::array<double> x({2, 3}, {1, 2, 3, -1, 0, 1});
  std::vector<zn::array<double>> g = zn::grad(mlp)(ws, x);  // the same structure as ws
  // [/doc:ad-tape]
  CHECK(g.size() == 2 && g[0].shape() == ws[0].shape() && g[1].shape() == ws[1].shape());
  // The same network as one expression goes through the static pass alone: same gradients.
  auto fused = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& x) {
    auto h = zn::tanh(zn::matmul(zn::tanh(zn::matmul(x, ws[0])), ws[1]));
    return zn::sum(h * h);
  };
  std::vector<zn::array<double>> g2 = zn::grad(fused)(ws, x);
  CHECK(zn::allclose(g[0], g2[0], 1e-13, 1e-15) && zn::allclose(g[1], g2[1], 1e-13, 1e-15));
}

// [doc:ad-fields]
struct mlp_params {
  zn::array<double> w1, b1, w2;
  int hidden = 4;  // not listed: copied along untouched
};
ZENITH_FIELDS(mlp_params, w1, b1, w2)
// [/doc:ad-fields]

void trees() {
  // [doc:ad-trees]
  auto loss = [](mlp_params const& p, zn::array<double> const& x) {
    zn::array<double> h = zn::tanh(zn::matmul(x, p.w1) + p.b1);
    return zn::mean(zn::square(zn::matmul(h, p.w2)));
  };
  mlp_params p{zn::full<double>({3, 4}, 0.1), zn::zeros<double>({4}),
               zn::full<double>({4, 1}, 0.5)};
  zn::array<double> x({2, 3}, {1, 2, 3, -1, 0, 1});
  mlp_params g = zn::grad(loss)(p, x);  // g.w1, g.b1, g.w2: gradients; g.hidden == 4
  // [/doc:ad-trees]
  CHECK(g.hidden == 4 && g.w1.shape() == p.w1.shape() && g.b1.shape() == p.b1.shape());
  // b1 against a central difference.
  double h = 1e-6;
  mlp_params q = p;
  q.b1 = zn::copy_from(p.b1.data(), p.b1.shape());
  q.b1(2) = h;
  double up = zn::eval(loss(q, x)).item();
  q.b1(2) = -h;
  double down = zn::eval(loss(q, x)).item();
  CHECK(std::abs(g.b1(2) - (up - down) / (2 * h)) < 1e-8);
}

void pullback() {
  // [doc:ad-vjp]
  zn::array<double> x({3}, {0.5, 1.0, 2.0});
  auto f = [](zn::array<double> const& x) { return zn::exp(x) * x; };  // any output shape
  auto [y, pullback] = zn::vjp(f, x);
  zn::array<double> ct({3}, {1, 0, 1});
  auto [gx] = pullback(ct);  // always a std::tuple: one cotangent per argument
  // [/doc:ad-vjp]
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(std::abs(y(i) - std::exp(x(i)) * x(i)) < 1e-15);
    CHECK(std::abs(gx(i) - ct(i) * std::exp(x(i)) * (1 + x(i))) < 1e-14);
  }
}

void fixed_jacobian() {
  // [doc:ad-jacfwd]
  // Written once, generic over the number type; jacfwd calls it with derivative numbers.
  auto polar = [](auto const& q) {
    using T = typename std::remove_cvref_t<decltype(q)>::value_type;
    return zn::tensor<T, 2>{q(0) * zn::cos(q(1)), q(0) * zn::sin(q(1))};
  };
  zn::tensor<double, 2> q{2.0, 0.5};
  zn::tensor<double, 2, 2> J = zn::jacfwd(polar)(q);  // J(i, j) = d out_i / d q_j
  // [/doc:ad-jacfwd]
  CHECK(std::abs(J(0, 0) - std::cos(0.5)) < 1e-15 && std::abs(J(0, 1) + 2 * std::sin(0.5)) < 1e-15);
  CHECK(std::abs(J(1, 0) - std::sin(0.5)) < 1e-15 && std::abs(J(1, 1) - 2 * std::cos(0.5)) < 1e-15);
}

void stop_gradient() {
  // [doc:ad-stop-gradient]
  zn::array<double> x({3}, {0.5, 1.0, 2.0});
  // The second factor is a constant to the derivative: d/dx = x * x, not 3 x * x.
  auto f = [](auto const& x) { return zn::sum(x * zn::stop_gradient(x * x)); };
  zn::array<double> g = zn::grad(f)(x);  // {0.25, 1, 4}
  // [/doc:ad-stop-gradient]
  for (std::size_t i = 0; i < 3; ++i) CHECK(g(i) == x(i) * x(i));
}

void errors() {
  // [doc:ad-errors]
  zn::array<double> x({3}, {1, 2, 3});
  auto not_scalar = [](auto const& x) { return x * 2.0; };
  auto in_place = [](zn::array<double> const& x) {
    zn::array<double> h = zn::sin(x);
    zn::assign(h, h * 2.0);  // writes into h's buffer: a gradient cannot follow that
    return zn::sum(h);
  };
  std::string e1, e2;
  try {
    zn::grad(not_scalar)(x);
  } catch (zn::value_error const& e) {
    e1 = e.what();
  }
  try {
    zn::grad(in_place)(x);
  } catch (zn::value_error const& e) {
    e2 = e.what();
  }
  // e1: "grad: the function must return a scalar (size 1), got shape (3,)"
  // e2: "grad: assign() writes into an array in place, which a gradient cannot follow; ..."
  // [/doc:ad-errors]
  CHECK(e1 == "grad: the function must return a scalar (size 1), got shape (3,)");
  CHECK(e2.rfind("grad: assign() writes into an array in place", 0) == 0);
}

void reverse_fixed() {
  // [doc:ad-jacrev]
  // Written once, generic over the number type: jacfwd passes duals, jacrev rvars.
  auto energy = [](auto const& q) { return zn::sum(q * q) * 0.5 + zn::sin(q(0) * q(1)); };
  zn::tensor<double, 3> q{0.1, 0.2, 0.3};
  zn::tensor<double, 3> g = zn::jacrev(energy)(q);   // scalar output: the gradient
  zn::tensor<double, 3> gf = zn::jacfwd(energy)(q);  // the same values, forward mode
  zn::tensor<double, 3> gg = zn::grad(energy)(q);    // grad on tensors: reverse mode too
  // [/doc:ad-jacrev]
  double c = std::cos(0.1 * 0.2);
  CHECK(std::abs(g(0) - (0.1 + 0.2 * c)) < 1e-15 && std::abs(g(1) - (0.2 + 0.1 * c)) < 1e-15);
  CHECK(std::abs(g(2) - 0.3) < 1e-15);
  for (std::size_t i = 0; i < 3; ++i) CHECK(std::abs(g(i) - gf(i)) < 1e-15 && gg(i) == g(i));
}

void staged_fixed() {
  // [doc:ad-staged]
  // Whole-tensor ops only: under jit the arguments are staged, not numbers.
  auto log_density = [](auto const& x, auto const& mu) {
    return -0.5 * zn::sum(zn::square(x - mu)) - 0.5 * std::log(2 * M_PI) * 4;
  };
  auto vg = zn::jit(zn::value_and_grad(log_density, zn::argnums<0, 1>));
  zn::tensor<double, 4> x{0.5, -1.0, 2.0, 0.25};
  zn::tensor<double> mu(0.5);
  auto [value, grads] = vg(x, mu);  // the gradient generated from the expression type
  auto [gx, gmu] = grads;           // gx = mu - x, gmu = sum(x - mu)
  // [/doc:ad-staged]
  for (std::size_t i = 0; i < 4; ++i) CHECK(gx(i) == 0.5 - x(i));
  CHECK(std::abs(double(gmu) - (1.75 - 2.0)) < 1e-15);
  auto [v2, g2] = zn::value_and_grad(log_density, zn::argnums<0, 1>)(x, mu);  // unstaged
  CHECK(std::abs(double(value) - double(v2)) < 1e-15 && std::get<0>(g2)(2) == gx(2));
}

void jit_replay() {
  // [doc:ad-jit]
  auto loss = [](auto const& w, auto const& x, auto const& y) {
    return zn::mean(zn::square(zn::matmul(x, w) - y));
  };
  auto step = zn::jit(zn::value_and_grad(loss));  // w.r.t. w
  zn::array<double> w = zn::zeros<double>({3});
  zn::array<double> x({4, 3}, {1, 0, 2, -1, 3, 1, 0.5, 0.5, 0.5, 2, -2, 1});
  zn::array<double> y({4}, {1, 2, 3, 4});
  for (int i = 0; i < 100; ++i) {
    auto [value, gw] = step(w, x, y);  // call 1 records; calls 2.. replay
    w = w - 0.05 * gw;
  }
  // [/doc:ad-jit]
  auto [v, g] = zn::value_and_grad(loss)(w, x, y);
  auto [vj, gj] = step(w, x, y);
  CHECK(v.item() == vj.item() && zn::allclose(g, gj, 0, 0));
  CHECK(step.recordings() == 1 && step.replayable_recordings() == 1);
  CHECK(v.item() < zn::eval(loss(zn::zeros<double>({3}), x, y)).item());
}

void jaxpr_ir() {
  // [doc:ad-jaxpr]
  auto layer = [](zn::array<float> const& x, zn::array<float> const& w) {
    zn::array<float> h = zn::tanh(zn::matmul(x, w));  // materialized: recorded as it runs
    return zn::sum(h * h);
  };
  zn::array<float> x = zn::ones<float>({4, 3}), w = zn::ones<float>({3, 2});
  zn::jaxpr j = zn::make_jaxpr(layer)(x, w);
  std::string text = j.str();  // or std::cout << j
  // { lambda ; a:f32[4,3] b:f32[3,2]. let
  //     c:f32[4,2] = dot_general[
  //       dimension_numbers=(([1], [0]), ([], []))
  //       preferred_element_type=float32
  //     ] a b
  //     d:f32[4,2] = tanh c
  //     e:f32[4,2] = mul d d
  //     f:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] e
  //   in (f,) }
  zn::ir::graph const& g = j.graph();  // the same program as data
  CHECK(g.equations().size() == 4 && g.equations()[1].op == "tanh");
  // [/doc:ad-jaxpr]
  CHECK(text.find("d:f32[4,2] = tanh c") != std::string::npos);
  CHECK(text.find("f:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] e") != std::string::npos);
}

int main() {
  grad_basics();
  runtime_loop();
  trees();
  pullback();
  fixed_jacobian();
  reverse_fixed();
  staged_fixed();
  stop_gradient();
  errors();
  jit_replay();
  jaxpr_ir();
  std::puts("doc.autodiff: ok");
}
