// checkpoint and checkpoint_sequential: the same gradients as without (the un-checkpointed
// gradient is the reference, with finite differences once), less memory kept through the
// forward pass and a lower peak (allocator statistics), nesting, vjp, and custom_vjp inside.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

namespace {

using fd::check_close;
using fd::random_array;
using A = zn::array<double>;

std::vector<A> random_weights(std::size_t layers, std::size_t width, unsigned seed) {
  std::vector<A> ws;
  for (std::size_t k = 0; k < layers; ++k)
    ws.push_back(random_array({width, width}, seed + unsigned(k), -0.6, 0.6));
  return ws;
}

// The reference: the runtime loop over layers, every intermediate on the tape.
auto plain_mlp = [](std::vector<A> const& ws, A const& x) {
  A h = x;
  for (auto const& w : ws) h = zn::tanh(zn::matmul(h, w));
  return zn::sum(h * h);
};

// Exactly equal, or within 1e-12 relative.
void check_same(A const& got, A const& want) {
  REQUIRE(got.shape() == want.shape());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(got.data()[i] - want.data()[i]) <=
          1e-12 * std::max(1e-300, std::abs(want.data()[i])));
  }
}
void check_same(std::vector<A> const& got, std::vector<A> const& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < got.size(); ++k) check_same(got[k], want[k]);
}

using layer_fn = std::function<A(A const&)>;

std::vector<layer_fn> layers_of(std::vector<A> const& ws) {
  std::vector<layer_fn> ls;
  for (auto const& w : ws)
    ls.push_back([w](A const& h) { return zn::eval(zn::tanh(zn::matmul(h, w))); });
  return ls;
}

}  // namespace

TEST_CASE("checkpoint: the same gradients in a runtime loop", "[checkpoint]") {
  auto ws = random_weights(4, 5, 1);
  auto x = random_array({3, 5}, 9);
  // Each layer checkpointed, the weight passed as an argument.
  auto by_argument = [](std::vector<A> const& w, A const& in) {
    auto layer =
        zn::checkpoint([](A const& h, A const& wk) { return zn::tanh(zn::matmul(h, wk)); });
    A h = in;
    for (auto const& wk : w) h = layer(h, wk);
    return zn::sum(h * h);
  };
  // Two layers per checkpoint, the weights captured (by value: handles, traced).
  auto by_closure = [](std::vector<A> const& w, A const& in) {
    A h = in;
    for (std::size_t k = 0; k + 1 < w.size(); k += 2) {
      h = zn::checkpoint([w0 = w[k], w1 = w[k + 1]](A const& v) {
        A z = zn::tanh(zn::matmul(v, w0));
        return zn::tanh(zn::matmul(z, w1));
      })(h);
    }
    return zn::sum(h * h);
  };
  auto [v0, g0] = zn::value_and_grad(plain_mlp, zn::argnums<0, 1>)(ws, x);
  auto [v1, g1] = zn::value_and_grad(by_argument, zn::argnums<0, 1>)(ws, x);
  auto [v2, g2] = zn::value_and_grad(by_closure, zn::argnums<0, 1>)(ws, x);
  CHECK(v1.item() == v0.item());
  CHECK(v2.item() == v0.item());
  check_same(std::get<0>(g1), std::get<0>(g0));
  check_same(std::get<1>(g1), std::get<1>(g0));
  check_same(std::get<0>(g2), std::get<0>(g0));
  check_same(std::get<1>(g2), std::get<1>(g0));
  // And the reference itself against finite differences.
  check_close(std::get<1>(g0),
              fd::numeric_grad([&](A const& v) { return plain_mlp(ws, v); }, 0, x));
}

TEST_CASE("checkpoint_sequential: the same gradients for any number of segments", "[checkpoint]") {
  auto ws = random_weights(5, 4, 20);
  auto x = random_array({6, 4}, 29);
  auto g0 = zn::grad(plain_mlp)(ws, x);
  A gx0 = zn::grad(plain_mlp, zn::argnums<1>)(ws, x);
  for (std::size_t segments : {1, 2, 3, 5, 8}) {
    INFO("segments " << segments);
    auto loss = [segments](std::vector<A> const& w, A const& in) {
      auto net = zn::checkpoint_sequential(layers_of(w), segments);
      A h = net(in);
      return zn::sum(h * h);
    };
    auto [g, gx] = zn::grad(loss, zn::argnums<0, 1>)(ws, x);
    check_same(g, g0);
    check_same(gx, gx0);
  }
  // Outside a trace it is the plain composition.
  A y = zn::checkpoint_sequential(layers_of(ws), 2)(x);
  A h = x;
  for (auto const& w : ws) h = zn::tanh(zn::matmul(h, w));
  CHECK(zn::allclose(y, h, 0, 0));
  CHECK_THROWS_AS(zn::checkpoint_sequential(layers_of(ws), 0), zn::value_error);
}

TEST_CASE("checkpoint_sequential keeps less and peaks lower", "[checkpoint][memory]") {
  // Tall activations, small weights: activation memory dominates (each is 64 KiB, 16 of them).
  std::size_t const depth = 16, width = 16, batch = 512;
  auto ws = random_weights(depth, width, 40);
  auto x = random_array({batch, width}, 99);
  auto loss_with = [](std::size_t segments) {
    return [segments](std::vector<A> const& w, A const& in) {
      A h = segments ? zn::checkpoint_sequential(layers_of(w), segments)(in) : [&] {
        A v = in;
        for (auto const& wk : w) v = zn::tanh(zn::matmul(v, wk));
        return v;
      }();
      return zn::mean(zn::square(h));
    };
  };
  // Memory kept through the forward pass: what a vjp holds for its pullback.
  auto kept = [&](std::size_t segments) {
    std::size_t before = zn::cpu_memory_stats().bytes_in_use;
    auto [y, pullback] = zn::vjp(loss_with(segments), ws, x);
    return zn::cpu_memory_stats().bytes_in_use - before;
  };
  // Peak during a whole gradient step, above what was in use before it.
  auto peak = [&](std::size_t segments, std::vector<A>& g) {
    std::size_t before = zn::cpu_memory_stats().bytes_in_use;
    zn::reset_peak_memory();
    g = zn::grad(loss_with(segments))(ws, x);
    return zn::cpu_memory_stats().peak_bytes - before;
  };
  std::size_t const activation = batch * width * sizeof(double);
  std::size_t kept_plain = kept(0), kept_ckpt = kept(4);
  INFO("kept: plain " << kept_plain << " B, 4 segments " << kept_ckpt << " B");
  CHECK(kept_plain >= depth * activation);  // every layer's output (and more)
  CHECK(kept_ckpt <= kept_plain / 2);       // 3 boundaries and the last 4 layers
  std::vector<A> g_plain, g_ckpt;
  std::size_t peak_plain = peak(0, g_plain), peak_ckpt = peak(4, g_ckpt);
  INFO("peak: plain " << peak_plain << " B, 4 segments " << peak_ckpt << " B");
  CHECK(peak_ckpt * 10 <= peak_plain * 6);  // at least 40% lower
  check_same(g_ckpt, g_plain);
  // Nothing left behind: every recorded and recomputed intermediate was freed.
  std::size_t before = zn::cpu_memory_stats().bytes_in_use;
  g_ckpt = zn::grad(loss_with(4))(ws, x);
  CHECK(zn::cpu_memory_stats().bytes_in_use == before);
}

TEST_CASE("checkpoint inside checkpoint", "[checkpoint]") {
  auto ws = random_weights(4, 3, 50);
  auto x = random_array({2, 3}, 59);
  auto nested = [](std::vector<A> const& w, A const& in) {
    auto pair_of_layers = [](A const& a, A const& b) {
      return zn::checkpoint([a, b](A const& h) {
        auto inner =
            zn::checkpoint([](A const& v, A const& wk) { return zn::tanh(zn::matmul(v, wk)); });
        A z = inner(h, a);
        return inner(z, b);
      });
    };
    A h = zn::checkpoint([w, pair_of_layers](A const& v) {
      A u = pair_of_layers(w[0], w[1])(v);
      return pair_of_layers(w[2], w[3])(u);
    })(in);
    return zn::sum(h * h);
  };
  auto [g, gx] = zn::grad(nested, zn::argnums<0, 1>)(ws, x);
  auto [g0, gx0] = zn::grad(plain_mlp, zn::argnums<0, 1>)(ws, x);
  check_same(g, g0);
  check_same(gx, gx0);
}

TEST_CASE("checkpoint under vjp: the pullback runs twice alike", "[checkpoint]") {
  auto ws = random_weights(3, 4, 60);
  auto x = random_array({5, 4}, 69);
  auto f = [](std::vector<A> const& w, A const& in) {
    return zn::checkpoint_sequential(layers_of(w), 3)(in) * 2.0;
  };
  auto f0 = [](std::vector<A> const& w, A const& in) {
    A h = in;
    for (auto const& wk : w) h = zn::tanh(zn::matmul(h, wk));
    return h * 2.0;
  };
  auto ct = random_array({5, 4}, 70);
  auto [y, pullback] = zn::vjp(f, ws, x);
  auto [y0, pullback0] = zn::vjp(f0, ws, x);
  CHECK(zn::allclose(y, y0, 0, 0));
  auto [gw1, gx1] = pullback(ct);
  auto [gw2, gx2] = pullback(ct);
  auto [gw0, gx0] = pullback0(ct);
  check_same(gw1, gw0);
  check_same(gx1, gx0);
  check_same(gw2, gw1);
  check_same(gx2, gx1);
}

TEST_CASE("checkpoint with a tree argument, under jvp, and around custom_vjp", "[checkpoint]") {
  auto ws = random_weights(2, 3, 80);
  auto x = random_array({4, 3}, 89);
  auto block = zn::checkpoint([](std::vector<A> const& w, A const& h) {
    A z = zn::tanh(zn::matmul(h, w[0]));
    return zn::tanh(zn::matmul(z, w[1]));
  });
  auto loss = [&](std::vector<A> const& w, A const& in) {
    A h = block(w, in);
    return zn::sum(h * h);
  };
  auto [g, gx] = zn::grad(loss, zn::argnums<0, 1>)(ws, x);
  auto [g0, gx0] = zn::grad(plain_mlp, zn::argnums<0, 1>)(ws, x);
  check_same(g, g0);
  check_same(gx, gx0);

  // jvp: checkpoint is transparent.
  auto t = random_array({4, 3}, 90);
  auto [y1, ty1] =
      zn::jvp([&](A const& v) { return block(ws, v); }, std::make_tuple(x), std::make_tuple(t));
  auto [y2, ty2] = zn::jvp(
      [&](A const& v) { return zn::tanh(zn::matmul(zn::tanh(zn::matmul(v, ws[0])), ws[1])); },
      std::make_tuple(x), std::make_tuple(t));
  CHECK(zn::allclose(y1, y2, 1e-14, 0));
  CHECK(zn::allclose(ty1, ty2, 1e-13, 1e-15));

  // A custom rule inside a checkpointed function is recomputed with it.
  auto scaled_tanh = zn::custom_vjp(
      [](A const& v) { return zn::tanh(v); },
      [](A const& v) {
        A y = zn::tanh(v);
        return std::pair{y, y};
      },
      [](A const& y, A const& ct) { return std::make_tuple((1.0 - y * y) * ct * 3.0); });
  auto with_rule = [&](A const& in) {
    A h = zn::checkpoint([&](A const& v) { return scaled_tanh(zn::matmul(v, ws[0])); })(in);
    return zn::sum(h);
  };
  auto reference = [&](A const& in) { return zn::sum(zn::tanh(zn::matmul(in, ws[0]))); };
  A gr = zn::grad(with_rule)(x);
  A gr0 = zn::grad(reference)(x);
  check_close(gr, zn::eval(3.0 * gr0), 1e-13);
}
