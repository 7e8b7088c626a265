#pragma once
// Functions whose derivatives the device tests take on device arrays and compare with the CPU's:
// written once for the stand-in device's tests (device_autodiff.cpp) and the real GPU's
// (gpu_autodiff.cpp).
#include <zenith/zenith.hpp>

#include <tuple>
#include <utility>
#include <vector>

namespace zenith_test::device_cases {

namespace zn = zenith;

// A reduction along an axis: for vjp and jvp.
inline constexpr auto row_sums = [](zn::array<float> const& v) {
  return zn::sum(zn::sin(v) * v, 1);
};

// A vector function of a vector: for jacfwd and jacrev.
inline constexpr auto scaled_sines = [](zn::array<double> const& v) {
  return zn::sin(v) * zn::sum(v * v);
};

// A user rule (softplus with its own backward), a checkpointed block and stop_gradient.
inline auto rule_and_checkpoint_loss() {
  auto softplus = zn::custom_vjp(
      [](auto const& x) { return zn::maximum(x, 0.0) + zn::log1p(zn::exp(-zn::abs(x))); },
      [](zn::array<double> const& x) {
        zn::array<double> y = zn::maximum(x, 0.0) + zn::log1p(zn::exp(-zn::abs(x)));
        return std::pair{y, x};
      },
      [](zn::array<double> const& x, zn::array<double> const& ct) {
        return std::make_tuple(zn::sigmoid(x) * ct);
      });
  return [softplus](zn::array<double> const& v, zn::array<double> const& wv) {
    auto block = zn::checkpoint(
        [wv](zn::array<double> const& h) { return zn::array<double>(zn::tanh(h * wv)); });
    zn::array<double> h = block(softplus(v));
    return zn::sum(h * zn::stop_gradient(h)) + zn::sum(zn::prod(v, 1) * 0.5);
  };
}

// The runtime loop: layers applied in a loop, each a tape entry.
inline constexpr auto mlp = [](std::vector<zn::array<double>> const& ws,
                               zn::array<double> const& in) {
  zn::array<double> h = in;
  for (auto const& wk : ws) h = zn::tanh(zn::matmul(h, wk));
  return zn::sum(h * h);
};

// softmax, log_softmax, layer_norm, slices (one with a negative step) and concatenation.
inline constexpr auto normalizing_loss = [](auto const& z, auto const& wv, auto const& t) {
  auto p = zn::log_softmax(z * wv, 1);
  auto q = zn::softmax(z, 0);
  auto parts = zn::concatenate(std::tuple(zn::slice(z, {zn::range{1, 4}, zn::range{}}), q), 0);
  auto back = zn::slice(z, 1, 6, 0, -2);
  auto normed = zn::layer_norm(z * wv, 0, 1e-3) * wv;
  return -zn::mean(t * p) + zn::sum(zn::square(parts)) * 0.1 + zn::sum(zn::sin(back)) +
         zn::sum(zn::tanh(normed) * t);
};

}  // namespace zenith_test::device_cases
