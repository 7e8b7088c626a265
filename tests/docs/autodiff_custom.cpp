// The examples of docs/autodiff.md, "Custom rules and checkpointing", compiled and run by ctest
// as doc.autodiff_custom. Each `// [doc:NAME]` ... `// [/doc:NAME]` region appears verbatim in
// the page (doc.snippets checks that), and every region asserts its results.
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

#include "check.hpp"

void custom_rule() {
  // [doc:ad-custom-vjp]
  // softplus(x) = log(1 + e^x), computed the stable way, with its derivative given directly:
  // d/dx = sigmoid(x), which reads only x (kept as the residual).
  auto softplus = zn::custom_vjp(
      [](auto const& x) { return zn::maximum(x, 0.0) + zn::log1p(zn::exp(-zn::abs(x))); },  // f
      [](zn::array<double> const& x) {  // fwd: {output, residuals}
        zn::array<double> y = zn::maximum(x, 0.0) + zn::log1p(zn::exp(-zn::abs(x)));
        return std::pair{y, x};
      },
      [](zn::array<double> const& x, zn::array<double> const& ct) {  // bwd(residuals, ct)
        return std::make_tuple(zn::sigmoid(x) * ct);                 // one cotangent per argument
      });
  zn::array<double> x({4}, {-50, -1, 2, 50});
  zn::array<double> y = softplus(x);  // no trace: just f
  zn::array<double> g = zn::grad([&](auto const& v) { return zn::sum(softplus(v)); })(x);
  // g = sigmoid(x) = {1.9e-22, 0.269, 0.881, 1}
  // [/doc:ad-custom-vjp]
  for (std::size_t i = 0; i < 4; ++i) {
    double xi = x.data()[i];
    CHECK(std::abs(y.data()[i] - std::log1p(std::exp(xi))) <= 1e-14 * std::max(1.0, xi));
    CHECK(std::abs(g.data()[i] - 1 / (1 + std::exp(-xi))) <= 1e-15);
  }
  // Under jvp there is no forward-mode rule: an error, never zeros.
  std::string msg;
  try {
    zn::jvp([&](zn::array<double> const& v) { return softplus(v); }, std::make_tuple(x),
            std::make_tuple(x));
  } catch (zn::value_error const& e) {
    msg = e.what();
  }
  CHECK(msg.find("no forward-mode rule") != std::string::npos);
}

void remat() {
  std::vector<zn::array<double>> ws;
  for (int k = 0; k < 8; ++k) ws.push_back(zn::full<double>({4, 4}, 0.35 - 0.04 * k));
  zn::array<double> x({2, 4}, {1, 2, 3, 4, -1, 0, 1, 2});

  // [doc:ad-checkpoint]
  // One block whose intermediates are recomputed during the backward pass instead of kept. The
  // weights it closes over are captured by value (array handles): f is called again later.
  auto block_loss = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& x) {
    auto block = zn::checkpoint([w0 = ws[0], w1 = ws[1]](zn::array<double> const& h) {
      zn::array<double> z = zn::tanh(zn::matmul(h, w0));
      return zn::tanh(zn::matmul(z, w1));
    });
    return zn::sum(zn::square(block(x)));
  };

  // A stack of layers in 4 segments: only the 3 boundary activations (and the last segment's
  // intermediates) are kept through the forward pass.
  struct layer {
    zn::array<double> w;
    auto operator()(zn::array<double> const& h) const { return zn::tanh(zn::matmul(h, w)); }
  };
  auto deep_loss = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& x) {
    std::vector<layer> layers;
    for (auto const& w : ws) layers.push_back(layer{w});
    zn::array<double> h = zn::checkpoint_sequential(layers, 4)(x);
    return zn::sum(zn::square(h));
  };
  std::vector<zn::array<double>> g1 = zn::grad(block_loss)(ws, x);
  std::vector<zn::array<double>> g2 = zn::grad(deep_loss)(ws, x);
  // [/doc:ad-checkpoint]

  // The same gradients as the plain loops, bit for bit.
  auto plain = [](std::vector<zn::array<double>> const& w, zn::array<double> const& in,
                  std::size_t n) {
    zn::array<double> h = in;
    for (std::size_t k = 0; k < n; ++k) h = zn::tanh(zn::matmul(h, w[k]));
    return zn::sum(zn::square(h));
  };
  auto r1 = zn::grad([&](auto const& w, auto const& in) { return plain(w, in, 2); })(ws, x);
  auto r2 = zn::grad([&](auto const& w, auto const& in) { return plain(w, in, 8); })(ws, x);
  for (std::size_t k = 0; k < 8; ++k) {
    CHECK(zn::allclose(g1[k], r1[k], 0, 0));
    CHECK(zn::allclose(g2[k], r2[k], 0, 0));
  }
  CHECK(zn::eval(zn::sum(zn::abs(g2[0]))).item() > 0);
}

int main() {
  custom_rule();
  remat();
  std::puts("doc.autodiff_custom: ok");
}
