// jit (transforms/jit.hpp): a function recorded once per argument shapes and replayed after.
// Every replay is checked against calling the function itself on the same arguments, with new
// values at new addresses each call (and once in place), for forward functions and gradients
// over every kind of loop the recording keeps: fused loops, reductions over axes and over
// everything, the gradients' group pass, matmul, softmax, logsumexp, slices, concat, the tape.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <zenith/zenith.hpp>

#include "finite_differences.hpp"

namespace {

using fd::random_array;
using A = zn::array<double>;

// Bitwise equality of two trees of arrays: a replay runs the very loops a call runs.
template <class Tree>
void check_same(Tree const& got, Tree const& want) {
  std::vector<A> g, w;
  zn::for_each_leaf(got, [&](auto const& a) { g.push_back(zn::eval(zn::cast<double>(a))); });
  zn::for_each_leaf(want, [&](auto const& a) { w.push_back(zn::eval(zn::cast<double>(a))); });
  REQUIRE(g.size() == w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("result array " << i);
    REQUIRE(g[i].shape() == w[i].shape());
    CHECK(std::memcmp(g[i].data(), w[i].data(), g[i].size() * sizeof(double)) == 0);
  }
}

// Calls jit(f) `calls` times on arguments made by args(seed), each against f itself; the first
// call records, the others replay.
template <class F, class MakeArgs>
void check_replays(F f, MakeArgs args, int calls = 4) {
  auto jf = zn::jit(f);
  for (int k = 0; k < calls; ++k) {
    INFO("call " << k);
    auto in = args(100u + unsigned(k));
    auto want = std::apply(f, in);
    auto got = std::apply(jf, in);
    check_same(got, zn::detail::jit_result(want));
  }
  CHECK(jf.recordings() == 1);
  CHECK(jf.replayable_recordings() == 1);
}

auto vec(std::size_t n, unsigned seed) { return random_array({n}, seed); }

}  // namespace

TEST_CASE("jit: forward functions replay what a call computes", "[jit]") {
  check_replays([](A const& x, A const& y) { return zn::exp(x) * y + zn::sum(x); },
                [](unsigned s) { return std::make_tuple(vec(37, s), vec(37, s + 7)); });
  check_replays(
      [](A const& x) { return zn::sum(x, 1) + zn::reshape(zn::max(x, 0, true), {5}) * 2.0; },
      [](unsigned s) {
        return std::make_tuple(random_array({5, 5}, s));
      });
  check_replays([](A const& a, A const& b) { return zn::softmax(zn::matmul(a, b), 1); },
                [](unsigned s) {
                  return std::make_tuple(random_array({6, 4}, s), random_array({4, 3}, s + 1));
                });
  check_replays([](A const& a, A const& b) { return zn::layer_norm(a * b, 0) * b; },
                [](unsigned s) {
                  return std::make_tuple(random_array({6, 4}, s), random_array({4}, s + 1));
                });
  check_replays([](A const& x) { return zn::logsumexp(x, 0); },
                [](unsigned s) {
                  return std::make_tuple(random_array({9, 2}, s));
                });
  check_replays(
      [](A const& x) {
        return zn::concatenate(std::make_tuple(zn::transpose(x), zn::transpose(x) * 2.0), 0);
      },
      [](unsigned s) {
        return std::make_tuple(random_array({3, 4}, s));
      });
  // A large array: the loops run on the thread pool.
  check_replays(
      [](A const& x) { return std::make_pair(zn::eval(zn::tanh(x)), zn::eval(zn::sum(x))); },
      [](unsigned s) { return std::make_tuple(vec(300000, s)); }, 3);
}

TEST_CASE("jit: gradients replay what a call computes", "[jit]") {
  // FastAD's functions: a sum, log_sum_exp, a log-density with a sum below its root, sum(A B).
  check_replays(zn::value_and_grad([](A const& x) { return zn::sum(x); }),
                [](unsigned s) { return std::make_tuple(vec(1, s)); });
  check_replays(zn::value_and_grad([](A const& x) { return zn::log(zn::sum(zn::exp(x))); }),
                [](unsigned s) { return std::make_tuple(vec(300, s)); });
  auto normal = [](A const& x) {
    return -0.5 * zn::sum(zn::square(x + 0.56)) / (1.37 * 1.37) - double(x.size()) * 0.3;
  };
  check_replays(zn::value_and_grad(normal), [](unsigned s) { return std::make_tuple(vec(64, s)); });
  check_replays(zn::value_and_grad([](A const& a, A const& b) { return zn::sum(zn::matmul(a, b)); },
                                   zn::argnums<0, 1>),
                [](unsigned s) {
                  return std::make_tuple(random_array({7, 7}, s), random_array({7, 7}, s + 1));
                });
  // Data captured by the function and data passed without a derivative.
  A data = random_array({20, 3}, 5);
  check_replays(zn::value_and_grad(
                    [&data](A const& w, A const& y) {
                      return zn::sum(zn::square(zn::matmul(data, w) - y)) + zn::sum(w * w);
                    },
                    zn::argnums<0>),
                [](unsigned s) { return std::make_tuple(vec(3, s), vec(20, s + 3)); });
  // Broadcasting, slices and max (ties split) in the reverse pass.
  check_replays(
      zn::value_and_grad(
          [](A const& a, A const& b) {
            return zn::mean(zn::max(a * b, 1)) + zn::sum(zn::slice(a, {{0, 3}, {1, 4, 2}}));
          },
          zn::argnums<0, 1>),
      [](unsigned s) {
        return std::make_tuple(random_array({3, 4}, s), random_array({1, 4}, s + 1));
      });
}

TEST_CASE("jit: gradients through the tape (a runtime loop)", "[jit]") {
  auto mlp = [](std::vector<A> const& ws, A const& x) {
    A h = x;
    for (auto const& w : ws) h = zn::tanh(zn::matmul(h, w));
    return zn::sum(h * h);
  };
  check_replays(zn::value_and_grad(mlp), [](unsigned s) {
    return std::make_tuple(std::vector<A>{random_array({4, 5}, s), random_array({5, 2}, s + 1)},
                           random_array({3, 4}, s + 2));
  });
  // A gradient the tape's pass returns as a view of the buffer holding it (the cotangent of a
  // matrix-vector product's vector, reshaped from a column): still the recording's own buffer.
  auto matvec = [](A const& w, A const& x, A const& y) {
    A h = zn::matmul(x, w);
    return zn::mean(zn::square(h - y));
  };
  check_replays(zn::value_and_grad(matvec), [](unsigned s) {
    return std::make_tuple(random_array({3}, s), random_array({4, 3}, s + 1),
                           random_array({4}, s + 2));
  });
  // The same layers under checkpoint: recomputed in the backward pass, which is recorded too.
  struct layer {
    A w;
    auto operator()(A const& h) const { return zn::tanh(zn::matmul(h, w)); }
  };
  auto deep = [](std::vector<A> const& ws, A const& x) {
    std::vector<layer> layers;
    for (auto const& w : ws) layers.push_back(layer{w});
    return zn::sum(zn::square(zn::checkpoint_sequential(layers, 2)(x)));
  };
  check_replays(zn::value_and_grad(deep), [](unsigned s) {
    std::vector<A> ws;
    for (unsigned k = 0; k < 4; ++k) ws.push_back(random_array({3, 3}, s + k));
    return std::make_tuple(ws, random_array({2, 3}, s + 9));
  });
}

TEST_CASE("jit: a result the caller keeps is not overwritten", "[jit]") {
  auto f = zn::jit(zn::value_and_grad([](A const& x) { return zn::sum(zn::sin(x)); }));
  A x1 = vec(16, 1), x2 = vec(16, 2);
  auto [v1, g1] = f(x1);
  A keep_v = zn::eval(v1 * 1.0), keep_g = zn::eval(g1 * 1.0);
  auto [v2, g2] = f(x2);
  auto [v3, g3] = f(x2);
  CHECK(zn::allclose(v1, keep_v, 0, 0));
  CHECK(zn::allclose(g1, keep_g, 0, 0));
  CHECK(zn::allclose(g2, zn::cos(x2), 1e-15, 0));
  CHECK(zn::allclose(g3, g2, 0, 0));
  CHECK(v2.item() == Approx(zn::eval(zn::sum(zn::sin(x2))).item()).epsilon(1e-15));
}

TEST_CASE("jit: an argument changed in place is read again", "[jit]") {
  auto f = zn::jit([](A const& x) { return zn::sum(x * x); });
  A x = vec(10, 3);
  double first = f(x).item();
  CHECK(first == Approx(zn::eval(zn::sum(x * x)).item()).epsilon(1e-15));
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = double(i);
  CHECK(f(x).item() == 285.0);
}

TEST_CASE("jit: one recording per argument shapes", "[jit]") {
  auto f = zn::jit([](A const& x) { return zn::sum(zn::exp(x)); });
  for (std::size_t n : {3u, 5u, 3u, 5u, 8u}) {
    A x = vec(n, unsigned(n));
    CHECK(f(x).item() == Approx(zn::eval(zn::sum(zn::exp(x))).item()).epsilon(1e-15));
  }
  CHECK(f.recordings() == 3);
  // Copies share the recordings.
  auto g = f;
  A x = vec(5, 9);
  CHECK(g(x).item() == Approx(zn::eval(zn::sum(zn::exp(x))).item()).epsilon(1e-15));
  CHECK(g.recordings() == 3);
}

TEST_CASE("jit: the same array twice, and work a replay cannot repeat", "[jit]") {
  // Overlapping arguments: not replayed, still right.
  auto f = zn::jit([](A const& x, A const& y) { return zn::sum(x * y); });
  for (unsigned s = 0; s < 3; ++s) {
    A x = vec(6, s);
    CHECK(f(x, x).item() == Approx(zn::eval(zn::sum(x * x)).item()).epsilon(1e-15));
  }
  // custom_vjp's f outside a gradient may run loops of its own: called on every call.
  auto twice =
      zn::custom_vjp([](auto const& v) { return v * 2.0; },
                     [](A const& v) {
                       return std::pair{zn::eval(v * 2.0), v};
                     },
                     [](A const&, A const& ct) { return std::make_tuple(zn::eval(ct * 2.0)); });
  auto g = zn::jit([&](A const& v) { return zn::sum(twice(v) * v); });
  for (unsigned s = 0; s < 3; ++s) {
    A v = vec(5, s);
    CHECK(g(v).item() == Approx(2.0 * zn::eval(zn::sum(v * v)).item()).epsilon(1e-14));
  }
  CHECK(g.recordings() == 1);
  CHECK(g.replayable_recordings() == 0);
  // prod's derivative picks a rule by the values (a zero or none).
  auto p = zn::jit(zn::grad([](A const& v) { return zn::prod(v); }));
  A no_zero({3}, {1.0, 2.0, 3.0}), one_zero({3}, {1.0, 0.0, 3.0});
  CHECK(zn::allclose(p(no_zero), A({3}, {6.0, 3.0, 2.0}), 0, 0));
  CHECK(zn::allclose(p(one_zero), A({3}, {0.0, 3.0, 0.0}), 0, 0));
}

TEST_CASE("jit: an array written on the host inside the function is not replayed", "[jit]") {
  // y gets its values outside any loop the recording keeps: replaying would read them stale.
  auto f = zn::jit([](A const& x) {
    A y = A::empty(x.shape());
    for (std::size_t i = 0; i < x.size(); ++i) y.data()[i] = 2.0 * x.data()[i];
    return zn::sum(y * x);
  });
  for (unsigned s = 0; s < 3; ++s) {
    A x = vec(7, s);
    CHECK(f(x).item() == Approx(2.0 * zn::eval(zn::sum(x * x)).item()).epsilon(1e-14));
  }
  CHECK(f.replayable_recordings() == 0);
}

namespace {

// u_t = s_t + phi u_{t-1}: a recurrence in plain loops on the arrays' memory, with its reverse
// scan as the rule. Under a gradient a recording replays fwd and bwd by calling them again.
void ar1(double const* s, double phi, double* u, std::size_t n) {
  for (std::size_t t = 0; t < n; ++t) u[t] = s[t] + (t ? phi * u[t - 1] : 0.0);
}
auto const recurrence = zn::custom_vjp(
    [](A const& s, A const& phi) {
      A u = A::empty(s.shape());
      ar1(s.data(), phi.item(), u.data(), s.size());
      return u;
    },
    [](A const& s, A const& phi) {
      A u = A::empty(s.shape());
      ar1(s.data(), phi.item(), u.data(), s.size());
      return std::pair{u, std::tuple{phi, u}};
    },
    [](std::tuple<A, A> const& res, A const& ct) {
      auto const& [phi, u] = res;
      std::size_t n = u.size();
      A ds = A::empty(u.shape());
      double p = phi.item(), dphi = 0, carry = 0;
      for (std::size_t t = n; t-- > 0;) {
        carry = ct.data()[t] + p * carry;  // d/du_t, everything after t included
        ds.data()[t] = carry;
        if (t) dphi += carry * u.data()[t - 1];
      }
      return std::make_tuple(ds, A({}, {dphi}));
    });

}  // namespace

TEST_CASE("jit: a custom_vjp rule with loops of its own is replayed by calling it", "[jit]") {
  auto loss = [](A const& s, A const& phi, A const& w) {
    return zn::sum(zn::square(recurrence(s * 1.0, phi)) * w) + zn::sum(zn::exp(s));
  };
  check_replays(zn::value_and_grad(loss, zn::argnums<0, 1, 2>), [](unsigned seed) {
    return std::make_tuple(vec(9, seed), A({}, {0.1 * double(seed % 5) - 0.2}), vec(9, seed + 1));
  });
  // The gradient itself, against the one without jit, and a result kept across calls.
  auto g = zn::jit(zn::grad(loss, zn::argnums<1>));
  A s1 = vec(6, 1), w = vec(6, 2), phi({}, {0.3});
  A g1 = g(s1, phi, w);
  A keep = zn::eval(g1 * 1.0);
  A s2 = vec(6, 3);
  A g2 = g(s2, phi, w);
  CHECK(zn::allclose(g1, keep, 0, 0));
  CHECK(zn::allclose(g2, zn::grad(loss, zn::argnums<1>)(s2, phi, w), 0, 0));
  CHECK(g.replayable_recordings() == 1);
}

TEST_CASE("jit: a custom_vjp rule's outputs are written into the recording's buffers", "[jit]") {
  // bwd returns an expression for one argument (written by a fused loop) and an array for the
  // other (copied); fwd's output is an array; the rule also broadcasts a rank-0 argument.
  auto const scale = zn::custom_vjp([](A const& x, A const& k) { return zn::eval(x * k); },
                                    [](A const& x, A const& k) {
                                      return std::pair{zn::eval(x * k), std::tuple{x, k}};
                                    },
                                    [](std::tuple<A, A> const& r, A const& ct) {
                                      auto const& [x, k] = r;
                                      return std::make_tuple(ct * k, zn::eval(zn::sum(ct * x)));
                                    });
  auto loss = [&](A const& x, A const& k) { return zn::sum(zn::sin(scale(x, k)) * x); };
  check_replays(zn::value_and_grad(loss, zn::argnums<0, 1>), [](unsigned seed) {
    return std::make_tuple(vec(13, seed), random_array({}, seed + 3));
  });
  // Against the same function without the rule.
  auto plain = [](A const& x, A const& k) { return zn::sum(zn::sin(x * k) * x); };
  auto jg = zn::jit(zn::grad(loss, zn::argnums<0, 1>));
  for (unsigned seed = 1; seed < 4; ++seed) {
    A x = vec(13, seed), k = random_array({}, seed + 3);
    auto [gx, gk] = jg(x, k);
    auto [wx, wk] = zn::grad(plain, zn::argnums<0, 1>)(x, k);
    CHECK(zn::allclose(gx, wx, 1e-12, 1e-12));
    CHECK(zn::allclose(gk, wk, 1e-12, 1e-12));
  }
}

TEST_CASE("jit: many ops in one gradient, broadcast shapes, float and rank 0", "[jit]") {
  // Transcendentals, where, maximum (ties), log_softmax, logsumexp, max and mean over axes,
  // views, a batched and broadcast matmul, concatenate and stack, reshape: one recording.
  auto f = [](A const& a, A const& b, A const& c, A const& m) {
    auto t1 = zn::sum(zn::where(a > b, zn::sin(a) * b, zn::cos(c) / (1.0 + zn::exp(-a))));
    auto t2 = zn::mean(zn::log_softmax(a * c, 1)) + zn::sum(zn::maximum(a, 0.25));
    auto t3 = zn::sum(zn::logsumexp(a, 0)) + zn::sum(zn::max(a * 2.0, 1)) +
              zn::sum(zn::mean(a, 0, true) * zn::expand_dims(zn::squeeze(b, 0), 0));
    auto t4 = zn::sum(zn::transpose(a) * zn::sqrt(zn::abs(zn::transpose(a)) + 1.0)) +
              zn::sum(zn::slice(a, {{2, 0, -1}, {0, 4, 3}}));
    auto t5 = zn::sum(zn::tanh(zn::matmul(m, zn::reshape(a, {4, 3})))) +
              zn::sum(zn::stack(std::make_tuple(b, b * 3.0), 0) *
                      zn::reshape(zn::concatenate(std::make_tuple(b, b), 0), {2, 1, 4}));
    return t1 + t2 + t3 + t4 + t5;
  };
  check_replays(zn::value_and_grad(f, zn::argnums<0, 1, 2, 3>), [](unsigned s) {
    return std::make_tuple(random_array({3, 4}, s), random_array({1, 4}, s + 1),
                           random_array({3, 1}, s + 2), random_array({2, 5, 4}, s + 3));
  });
  // float32, and a rank-0 argument broadcast against a vector.
  using F = zn::array<float>;
  auto g = [](F const& x, F const& k) { return zn::sum(zn::sigmoid(x * k) + zn::square(k)); };
  check_replays(zn::value_and_grad(g, zn::argnums<0, 1>), [](unsigned s) {
    return std::make_tuple(zn::eval(zn::cast<float>(vec(33, s))),
                           zn::eval(zn::cast<float>(random_array({}, s + 1))));
  });
}
