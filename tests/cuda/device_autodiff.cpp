// Autodiff over device arrays, without a GPU: grad, value_and_grad, vjp and jvp of functions of
// arrays on the stand-in device (emulated_gpu.hpp) give the CPU's values, the static passes run
// as generated kernels (a runtime loop's recorded IR runs on the host, copied there and back).
#include "device_autodiff_cases.hpp"
#include "emulated_gpu.hpp"

using namespace emulated;
namespace cases = zenith_test::device_cases;

TEST_CASE("gradients of functions of device arrays are computed on the device",
          "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto a = values<double>({300}, -2, 2), b = values<double>({300}, -1, 3),
       c = values<double>({300}, 0.5, 1.5);
  auto da = a.to(gpu0), db = b.to(gpu0), dc = c.to(gpu0);

  // The gradient benchmark: a total reduction of an elementwise chain.
  auto f = [](auto const& x, auto const& y, auto const& z) {
    return zn::sum(x * zn::sin(y) + zn::exp(-z * z));
  };
  auto [v, g] = zn::value_and_grad(f, zn::argnums<0, 1, 2>)(da, db, dc);
  auto [cv, cg] = zn::value_and_grad(f, zn::argnums<0, 1, 2>)(a, b, c);
  check_close(v, cv, 1e-12);
  check_close(std::get<0>(g), std::get<0>(cg), 1e-12);
  check_close(std::get<1>(g), std::get<1>(cg), 1e-12);
  check_close(std::get<2>(g), std::get<2>(cg), 1e-12);

  // Broadcasting (the bias's cotangent is a sum over rows), a mean, a max with ties.
  auto x = values<double>({12, 5}, -1, 1), w = values<double>({12, 5}, -2, 2);
  auto bias = values<double>({5}, -0.5, 0.5);
  auto loss = [](auto const& w_, auto const& bias_, auto const& x_) {
    return zn::mean(zn::square(zn::tanh(x_ * w_ + bias_))) + zn::max(zn::round(x_ * w_));
  };
  auto dg = zn::grad(loss, zn::argnums<0, 1>)(w.to(gpu0), bias.to(gpu0), x.to(gpu0));
  auto hg = zn::grad(loss, zn::argnums<0, 1>)(w, bias, x);
  check_close(std::get<0>(dg), std::get<0>(hg), 1e-12);
  check_close(std::get<1>(dg), std::get<1>(hg), 1e-12);

  // A runtime loop: each materialization is a tape entry, pulled on the device.
  auto mlp = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& in) {
    zn::array<double> h = in;
    for (auto const& wk : ws) h = zn::tanh(h * wk + 0.1);
    return zn::sum(h * h);
  };
  std::vector<zn::array<double>> ws{values<double>({12, 5}, -1, 1), values<double>({5}, 0.5, 1)};
  std::vector<zn::array<double>> dws{ws[0].to(gpu0), ws[1].to(gpu0)};
  auto gd = zn::grad(mlp)(dws, x.to(gpu0));
  auto gh = zn::grad(mlp)(ws, x);
  REQUIRE(gd.size() == 2);
  check_close(gd[0], gh[0], 1e-12);
  check_close(gd[1], gh[1], 1e-12);

  // An argument the result does not read: zeros, on its device.
  auto unused = zn::grad([](auto const&, auto const& q) { return zn::sum(q * 2.0); },
                         zn::argnums<0, 1>)(da, db);
  check_close(std::get<0>(unused), zn::zeros<double>({300}), 0);
  check_close(std::get<1>(unused), zn::full<double>({300}, 2.0), 0);
}

TEST_CASE("vjp and jvp of functions of device arrays", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<float>({6, 9}, -1, 1), t = values<float>({6, 9}, 0.5, 2);
  auto ct = values<float>({6}, -1, 1);
  auto f = cases::row_sums;
  auto [y, pullback] = zn::vjp(f, x.to(gpu0));
  auto [hy, hpullback] = zn::vjp(f, x);
  check_close(y, hy, 4e-6);
  check_close(std::get<0>(pullback(ct.to(gpu0))), std::get<0>(hpullback(ct)), 4e-6);
  auto [jy, jt] = zn::jvp(f, std::make_tuple(x.to(gpu0)), std::make_tuple(t.to(gpu0)));
  auto [hjy, hjt] = zn::jvp(f, std::make_tuple(x), std::make_tuple(t));
  check_close(jy, hjy, 4e-6);
  check_close(jt, hjt, 4e-6);
}

TEST_CASE("Jacobians of functions of device arrays", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<double>({4}, -1, 2);
  auto f = cases::scaled_sines;
  zn::array<double> jf = zn::jacfwd(f)(x.to(gpu0));
  zn::array<double> jr = zn::jacrev(f)(x.to(gpu0));
  zn::array<double> want = zn::jacfwd(f)(x);
  check_close(jf, want, 1e-12);
  check_close(jr, want, 1e-12);
}

TEST_CASE("user rules, rematerialization and products on device arrays", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<double>({3, 17}, -3, 3), w = values<double>({17}, -1, 1);
  auto loss = cases::rule_and_checkpoint_loss();
  auto dg = zn::grad(loss, zn::argnums<0, 1>)(x.to(gpu0), w.to(gpu0));
  auto hg = zn::grad(loss, zn::argnums<0, 1>)(x, w);
  check_close(std::get<0>(dg), std::get<0>(hg), 1e-12);
  check_close(std::get<1>(dg), std::get<1>(hg), 1e-12);
}

TEST_CASE("gradients through matmul on device arrays", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto loss = [](auto const& w, auto const& x) {
    return zn::mean(zn::square(zn::tanh(zn::matmul(x, w))));
  };
  auto w = values<double>({6, 4}, -1, 1), x = values<double>({2, 5, 6}, -2, 2);
  auto dg = zn::grad(loss, zn::argnums<0, 1>)(w.to(gpu0), x.to(gpu0));
  auto hg = zn::grad(loss, zn::argnums<0, 1>)(w, x);
  check_close(std::get<0>(dg), std::get<0>(hg), 1e-12);
  check_close(std::get<1>(dg), std::get<1>(hg), 1e-12);

  // The runtime loop: layers applied in a loop, each a tape entry.
  auto mlp = cases::mlp;
  std::vector<zn::array<double>> ws{values<double>({6, 8}, -1, 1), values<double>({8, 3}, -1, 1)};
  std::vector<zn::array<double>> dws{ws[0].to(gpu0), ws[1].to(gpu0)};
  auto x2 = values<double>({5, 6}, -1, 1);
  auto gd = zn::grad(mlp)(dws, x2.to(gpu0));
  auto gh = zn::grad(mlp)(ws, x2);
  check_close(gd[0], gh[0], 1e-12);
  check_close(gd[1], gh[1], 1e-12);
}

TEST_CASE("gradients through softmax, layer_norm, slices and concatenation on device arrays",
          "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto logits = values<double>({5, 7}, -3, 3), labels = values<double>({5, 7}, 0, 1);
  auto w = values<double>({7}, -1, 1);
  auto loss = cases::normalizing_loss;
  auto dg = zn::grad(loss, zn::argnums<0, 1>)(logits.to(gpu0), w.to(gpu0), labels.to(gpu0));
  auto hg = zn::grad(loss, zn::argnums<0, 1>)(logits, w, labels);
  check_close(std::get<0>(dg), std::get<0>(hg), 1e-12);
  check_close(std::get<1>(dg), std::get<1>(hg), 1e-12);
}

TEST_CASE("gradients through conv2d on device arrays", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto model = [](std::vector<zn::array<double>> const& ws, zn::array<double> const& in) {
    zn::array<double> h = in;
    for (auto const& w : ws) h = zn::tanh(zn::conv2d(h, w, {{1, 1}, {1, 1}, {1, 1}}));
    return zn::mean(zn::square(h));
  };
  std::vector<zn::array<double>> ws{values<double>({3, 2, 3, 3}, -1, 1),
                                    values<double>({2, 3, 3, 3}, -1, 1)};
  std::vector<zn::array<double>> dws{ws[0].to(gpu0), ws[1].to(gpu0)};
  auto in = values<double>({2, 2, 6, 5}, -1, 1);
  auto gd = zn::grad(model, zn::argnums<0, 1>)(dws, in.to(gpu0));
  auto gh = zn::grad(model, zn::argnums<0, 1>)(ws, in);
  check_close(std::get<0>(gd)[0], std::get<0>(gh)[0], 1e-12);
  check_close(std::get<0>(gd)[1], std::get<0>(gh)[1], 1e-12);
  check_close(std::get<1>(gd), std::get<1>(gh), 1e-12);
  // The static path (a convolution in the returned expression) runs every part through the
  // convolution runner: forward, input and filter gradients. (A runtime loop's recorded IR runs
  // on the host for now.)
  host_conv::calls.clear();
  auto once = [](zn::array<double> const& w, zn::array<double> const& x) {
    return zn::mean(zn::square(zn::tanh(zn::conv2d(x, w, {{1, 1}, {1, 1}, {1, 1}}))));
  };
  auto od = zn::grad(once, zn::argnums<0, 1>)(dws[0], in.to(gpu0));
  auto oh = zn::grad(once, zn::argnums<0, 1>)(ws[0], in);
  check_close(std::get<0>(od), std::get<0>(oh), 1e-12);
  check_close(std::get<1>(od), std::get<1>(oh), 1e-12);
  bool parts[3] = {};
  for (auto const& c : host_conv::calls) parts[int(c.part)] = true;
  CHECK((parts[0] && parts[1] && parts[2]));
}
