// Staged gradients of tensor functions (zn::jit of grad / value_and_grad on zenith::tensor,
// transforms/staged_grad.hpp). Every derivative is checked against central finite differences
// of the plain-double function and against the unstaged path (reverse-mode numbers,
// transforms/jacrev.hpp), an independent implementation; values against the function evaluated
// on plain tensors.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <tuple>
#include <type_traits>

#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include "fixed_size_references.hpp"

namespace zn = zenith;
using namespace fixed_size_references;

namespace {

template <std::size_t... N>
zn::tensor<double, N...> random_tensor(unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  zn::tensor<double, N...> t;
  for (std::size_t i = 0; i < t.count; ++i) t[i] = d(gen);
  return t;
}

// f's gradient with respect to argument K by central differences, element by element.
template <std::size_t K, class F, class... Args>
auto numeric_grad(F const& f, Args const&... args) {
  auto xs = std::make_tuple(args...);
  auto& x = std::get<K>(xs);
  auto g = x;
  for (std::size_t i = 0; i < x.count; ++i) {
    double const v = x[i], h = 1e-6 * std::max(1.0, std::abs(v));
    x[i] = v + h;
    double const up = double(std::apply(f, xs));
    x[i] = v - h;
    double const down = double(std::apply(f, xs));
    x[i] = v;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

template <class T>
void check_close(T const& got, T const& want, double tol) {
  for (std::size_t i = 0; i < got.count; ++i) {
    INFO("element " << i << ": " << got[i] << " against " << want[i]);
    CHECK(rel_err(got[i], want[i]) <= tol);
  }
}

// The staged value and gradient of f with respect to every argument, against the plain value,
// finite differences and (Unstaged) the unstaged gradient. Tensors of reverse-mode numbers
// have no where, clip or stop_gradient: finite differences alone check those.
template <bool Unstaged = true, class F, class... Args>
void check_staged(F const& f, Args const&... args) {
  auto const staged = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return zn::jit(zn::value_and_grad(f, zn::argnums<K...>))(args...);
  }
  (std::index_sequence_for<Args...>{});
  auto const unstaged = [&]<std::size_t... K>(std::index_sequence<K...>) {
    if constexpr (Unstaged)
      return zn::value_and_grad(f, zn::argnums<K...>)(args...);
    else
      return staged;
  }
  (std::index_sequence_for<Args...>{});
  double const plain = double(f(args...));
  CHECK(rel_err(double(staged.first), plain) <= 1e-14);
  auto as_tuple = [](auto const& g) {
    if constexpr (sizeof...(Args) == 1)
      return std::make_tuple(g);
    else
      return g;
  };
  auto const gs = as_tuple(staged.second);
  auto const gu = as_tuple(unstaged.second);
  auto check_argument = [&](auto k) {
    constexpr std::size_t K = decltype(k)::value;
    INFO("argument " << K);
    check_close(std::get<K>(gs), numeric_grad<K>(f, args...), 1e-6);
    check_close(std::get<K>(gs), std::get<K>(gu), 1e-12);
  };
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (check_argument(std::integral_constant<std::size_t, K>{}), ...);
  }
  (std::index_sequence_for<Args...>{});
}

}  // namespace

TEST_CASE("staged unary ops agree with finite differences and reverse-mode numbers",
          "[staged][grad]") {
  auto const x = random_tensor<5>(1, 0.2, 1.4);   // inside every op's domain
  auto const w = random_tensor<5>(2, -1.0, 1.0);  // weights: every element matters separately
#define STAGED_UNARY(NAME)                                                    \
  SECTION(#NAME) {                                                            \
    check_staged([&](auto const& t) { return zn::sum(zn::NAME(t) * w); }, x); \
  }
  STAGED_UNARY(sin)
  STAGED_UNARY(cos)
  STAGED_UNARY(tan)
  STAGED_UNARY(exp)
  STAGED_UNARY(log)
  STAGED_UNARY(log1p)
  STAGED_UNARY(expm1)
  STAGED_UNARY(sqrt)
  STAGED_UNARY(rsqrt)
  STAGED_UNARY(square)
  STAGED_UNARY(tanh)
  STAGED_UNARY(sigmoid)
  STAGED_UNARY(erf)
  STAGED_UNARY(gelu_tanh)
  STAGED_UNARY(gelu_erf)
  STAGED_UNARY(reciprocal)
  STAGED_UNARY(abs)
  STAGED_UNARY(relu)
  STAGED_UNARY(floor)
  STAGED_UNARY(sign)
#undef STAGED_UNARY
  SECTION("neg, stop_gradient") {
    // stop_gradient(t) is a constant to the derivative (finite differences would see through it)
    auto const g = zn::jit(
        zn::grad([&](auto const& t) { return zn::sum(-t * w + zn::stop_gradient(t) * t); }))(x);
    for (std::size_t i = 0; i < 5; ++i) CHECK(rel_err(g[i], x[i] - w[i]) <= 1e-15);
  }
}

TEST_CASE("staged binary ops, broadcasting and rank 0", "[staged][grad]") {
  auto const a = random_tensor<3, 1>(3, 0.3, 1.5);
  auto const b = random_tensor<1, 4>(4, 0.3, 1.5);
  auto const s = zn::tensor<double>(0.8);
#define STAGED_BINARY(NAME, EXPR, UNSTAGED)                                                   \
  SECTION(NAME) {                                                                             \
    check_staged<UNSTAGED>([](auto const& x, auto const& y) { return zn::sum(EXPR); }, a, b); \
    check_staged<UNSTAGED>([](auto const& x, auto const& y) { return zn::sum(EXPR); }, a, s); \
    check_staged<UNSTAGED>([](auto const& x, auto const& y) { return zn::sum(EXPR); }, s, b); \
  }
  STAGED_BINARY("add", x + y, true)
  STAGED_BINARY("sub", x - y, true)
  STAGED_BINARY("mul", x * y, true)
  STAGED_BINARY("div", x / y, true)
  STAGED_BINARY("pow", zn::pow(x, y), true)
  STAGED_BINARY("atan2", zn::atan2(x, y), true)
  STAGED_BINARY("maximum", zn::maximum(x, y) * 2.0, true)
  STAGED_BINARY("minimum", zn::minimum(x, y) * 2.0, true)
  STAGED_BINARY("where", zn::where(x > y, x * x, y * 3.0), false)
  STAGED_BINARY("clip", zn::clip(x * 2.0, 0.7, y + 0.5), false)
#undef STAGED_BINARY
  SECTION("a number and a rank-0 result") {
    check_staged([](auto const& x) { return zn::exp(x * 2.0) - 1.0 / x; }, s);
  }
}

TEST_CASE("staged reductions along axes; max / min ties split; prod with zeros", "[staged][grad]") {
  auto const m = random_tensor<3, 4>(5);
  auto const w2 = random_tensor<3>(6);
  auto const w1 = random_tensor<4>(7);
  check_staged([](auto const& x) { return zn::sum(x * x); }, m);
  check_staged([](auto const& x) { return zn::mean(zn::exp(x)); }, m);
  check_staged([](auto const& x) { return zn::prod(x); }, m);
  check_staged([](auto const& x) { return zn::max(x) + zn::min(x); }, m);
  check_staged([&](auto const& x) { return zn::sum(zn::sum<1>(zn::sin(x)) * w2); }, m);
  check_staged([&](auto const& x) { return zn::sum(zn::mean<0>(x * x) * w1); }, m);
  check_staged([&](auto const& x) { return zn::sum(zn::prod<0>(x) * w1); }, m);
  check_staged([&](auto const& x) { return zn::sum(zn::max<1>(x) * w2); }, m);
  check_staged([&](auto const& x) { return zn::sum(zn::min<-2>(x) * w1); }, m);
  check_staged([](auto const& x) { return zn::sum(zn::sum<0, 1>(x)); }, m);

  auto vg = zn::jit(zn::value_and_grad([](auto const& x) { return zn::max(x) * 2.0; }));
  auto [v, g] = vg(zn::tensor<double, 4>{1.0, 3.0, 3.0, 2.0});
  CHECK(double(v) == 6.0);
  CHECK((g(0) == 0.0 && g(1) == 1.0 && g(2) == 1.0 && g(3) == 0.0));  // the two ties share 2
  auto gp = zn::jit(zn::grad([](auto const& x) { return zn::prod(x); }));
  auto p1 = gp(zn::tensor<double, 3>{2.0, 0.0, 3.0});
  CHECK((p1(0) == 0.0 && p1(1) == 6.0 && p1(2) == 0.0));
  auto p2 = gp(zn::tensor<double, 3>{0.0, 5.0, 0.0});
  CHECK((p2(0) == 0.0 && p2(1) == 0.0 && p2(2) == 0.0));
}

TEST_CASE("staged backward loops long enough to stay loops", "[staged][grad]") {
  // From 8 elements a reduction's backward is a loop the compiler vectorizes, not unrolled:
  // gradients written from several of its iterations (a broadcast row, a rank-0 argument, an
  // argument read twice) must add up all the same.
  auto const x = random_tensor<6, 8>(31);
  auto const row = random_tensor<1, 8>(32);
  auto const v = random_tensor<16>(33);
  check_staged([](auto const& a, auto const& b) { return zn::sum(zn::square(a * b)); }, x, row);
  check_staged([](auto const& a, auto const& b) { return zn::sum(zn::sum<1>(a - b) * 0.5); }, x,
               row);
  check_staged([](auto const& a, auto const& k) { return zn::mean(zn::exp(a * k) + a * a); }, v,
               zn::tensor<double>(0.3));
  check_staged([](auto const& a) { return zn::max(a * 2.0) + zn::sum(zn::abs(a)); }, v);
  check_staged([](auto const& a, auto const& b) { return zn::sum(zn::matmul(a, b)); },
               random_tensor<4, 8>(34), random_tensor<8, 4>(35));
}

TEST_CASE("staged matmul, dot, transpose, reshape, cross, norm", "[staged][grad]") {
  auto const a = random_tensor<2, 3>(8);
  auto const b = random_tensor<3, 4>(9);
  auto const v = random_tensor<3>(10);
  auto const u = random_tensor<3>(11);
  auto const w = random_tensor<2, 4>(12);
  check_staged([&](auto const& x, auto const& y) { return zn::sum(zn::matmul(x, y) * w); }, a, b);
  check_staged([](auto const& x, auto const& y) { return zn::sum(zn::tanh(zn::matmul(x, y))); }, a,
               v);
  check_staged([](auto const& x, auto const& y) { return zn::sum(zn::square(zn::matmul(x, y))); },
               v, b);
  check_staged([](auto const& x, auto const& y) { return zn::dot(x, y) * zn::matmul(x, y); }, v, u);
  check_staged([&](auto const& x) { return zn::sum(zn::transpose(x) * zn::transpose(w)); }, w);
  check_staged([&](auto const& x) { return zn::sum(zn::transpose<1, 0>(x) * w); },
               zn::tensor<double, 4, 2>(zn::transpose(w)));
  check_staged([&](auto const& x) { return zn::sum(zn::reshape<4, 2>(x) * zn::reshape<4, 2>(w)); },
               w);
  check_staged([&](auto const& x, auto const& y) { return zn::sum(zn::cross(x, y) * u); }, v, u);
  check_staged(
      [](auto const& x) { return zn::norm(x) + zn::norm(zn::matmul(x, zn::transpose(x))); }, a);
  // A constant matrix times a staged vector, and the matrix's product with itself.
  check_staged([&](auto const& x) { return zn::sum(zn::matmul(a, x) * zn::matmul(a, x)); }, v);
}

TEST_CASE("staged gradients: argnums, extra arguments, reuse, unused and blocked arguments",
          "[staged][grad]") {
  auto const x = random_tensor<4>(13);
  auto const y = random_tensor<4>(14);
  auto f = [](auto const& p, auto const& q, double scale) {
    return zn::sum(p * p * q) * scale + zn::sum(zn::exp(p));
  };
  auto const [v1, g1] = zn::jit(zn::value_and_grad(f, zn::argnums<1>))(x, y, 0.5);
  auto const [v2, g2] = zn::value_and_grad(f, zn::argnums<1>)(x, y, 0.5);
  CHECK(rel_err(double(v1), double(v2)) <= 1e-14);
  check_close(g1, g2, 1e-13);
  auto const gq = zn::jit(zn::grad(f, zn::argnums<0, 1>))(x, y, 0.5);
  check_close(std::get<0>(gq), numeric_grad<0>([&](auto const& p) { return f(p, y, 0.5); }, x),
              1e-6);

  // Read twice, broadcast, under max (ties only), under a piecewise-constant op, or not at all:
  // each gradient is added into zeros, and the untouched ones stay zeros.
  auto h = [](auto const& p, auto const& q, auto const& r, auto const& unused) {
    (void)unused;
    return zn::sum(p * zn::exp(p)) + zn::sum(q * r) + zn::max(zn::floor(r) * 0.0 + p) +
           zn::sum(zn::floor(q) * p);
  };
  auto const r = random_tensor<1, 4>(15);
  auto const q = random_tensor<3, 1>(16);
  auto const [hv, hg] = zn::jit(zn::value_and_grad(h, zn::argnums<0, 1, 2, 3>))(y, q, r, x);
  auto const [uv, ug] = zn::value_and_grad(h, zn::argnums<0, 1, 2, 3>)(y, q, r, x);
  CHECK(rel_err(double(hv), double(uv)) <= 1e-14);
  check_close(std::get<0>(hg), std::get<0>(ug), 1e-13);
  check_close(std::get<1>(hg), std::get<1>(ug), 1e-13);
  check_close(std::get<2>(hg), std::get<2>(ug), 1e-13);
  for (std::size_t i = 0; i < 4; ++i) CHECK(std::get<3>(hg)[i] == 0.0);

  // A function that does not depend on its argument: its value, zero gradients.
  auto const [cv, cg] = zn::jit(zn::value_and_grad([](auto const&) { return 2.5; }))(x);
  CHECK(double(cv) == 2.5);
  for (std::size_t i = 0; i < 4; ++i) CHECK(cg[i] == 0.0);
}

TEST_CASE("staged expressions hold only the function's constants, copied as one block",
          "[staged]") {
  // What keeps a staged gradient's expression in registers (expr/staged.hpp, core/node_tuple.hpp):
  // leaves hold no pointers, and nodes over trivially copyable children are trivially copyable.
  zn::staged_tensor<0, double, 4> x;
  zn::staged_tensor<1, double> s;
  zn::tensor<double, 4> const y{1.0, 2.0, 3.0, 4.0};
  auto e = -0.5 * zn::sum(zn::square((zn::tensor_ref(y) - x) / zn::exp(s / 2.0)));
  STATIC_REQUIRE(std::is_empty_v<decltype(x)>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<decltype(e)>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<decltype(x * 2.0 + s)>);
  // The pointer to y and the constants -0.5 and 2.0; a node's empty base may add padding.
  CHECK(sizeof(e) <= 8 * sizeof(double));
  CHECK(zn::get<0>((x * 2.0).children).slot == 0);
  CHECK(zn::get<1>((x * 2.0).children).value == 2.0);
  STATIC_REQUIRE(std::tuple_size_v<decltype((x * 2.0).children)> == 2);
}

TEST_CASE("which staged gradients are written once per element", "[staged]") {
  using zn::autodiff::staged::assigned_slots;
  zn::staged_tensor<0, double, 4> x;
  zn::staged_tensor<1, double, 4> y;
  zn::staged_tensor<1, double, 1> z;
  CHECK(assigned_slots<decltype(zn::sum(x * y)), 2>() == 0b11);
  CHECK(assigned_slots<decltype(zn::sum(zn::exp(x)) * zn::mean(y)), 2>() == 0b11);
  CHECK(assigned_slots<decltype(zn::sum(x * x)), 1>() == 0);              // read twice
  CHECK(assigned_slots<decltype(zn::max(x) + zn::sum(y)), 2>() == 0b10);  // ties only
  CHECK(assigned_slots<decltype(zn::sum(zn::floor(x) + y)), 2>() == 0b10);
  CHECK(assigned_slots<decltype(zn::sum(x * z)), 2>() == 0b01);  // z is broadcast
  CHECK(assigned_slots<decltype(zn::sum(
                           zn::matmul(zn::transpose(zn::reshape<2, 2>(x)), zn::reshape<2, 2>(y)))),
                       2>() == 0b11);
}

TEST_CASE("jit of a tensor function that is not a gradient calls it", "[staged]") {
  auto f = zn::jit([](auto const& x) { return zn::tensor<double>(zn::sum(x * 2.0)); });
  CHECK(double(f(zn::tensor<double, 3>{1.0, 2.0, 3.0})) == 12.0);
}

TEST_CASE("short staged sums of exp fold in narrower batches", "[staged][grad]") {
  // Below two native batches a sum folds with the widest batch that fits one group, of 4 lanes
  // or more (fold_batch_t: 4 doubles on AVX-512), so its exp is the SIMD one, not a libm call
  // per element; the tail past the last batch goes element by element.
  using zn::autodiff::staged::fold_batch_t;
  STATIC_REQUIRE(std::is_void_v<fold_batch_t<double, 1>>);
  STATIC_REQUIRE(std::is_void_v<fold_batch_t<double, 3>>);
  []<std::size_t... G>(std::index_sequence<G...>) {
    (
        [] {
          using B = fold_batch_t<double, G + 2>;
          using native = zn::autodiff::staged::batch_of<double>;
          if constexpr (G + 2 >= 2 * native::size) {
            STATIC_REQUIRE(std::is_same_v<B, native>);
          } else if constexpr (!std::is_void_v<B>) {
            STATIC_REQUIRE((B::size >= 4 && B::size <= G + 2 && std::has_single_bit(B::size)));
          }
        }(),
        ...);
  }
  (std::make_index_sequence<20>{});

  auto const lse = [](auto const& t) { return zn::log(zn::sum(zn::exp(t))); };
  auto check = [&](auto const& x) {
    auto const [v, g] = zn::jit(zn::value_and_grad(lse))(x);
    double s = 0;
    for (std::size_t i = 0; i < x.count; ++i) s += std::exp(x[i]);
    CHECK(rel_err(double(v), std::log(s)) <= 1e-14);
    for (std::size_t i = 0; i < x.count; ++i) CHECK(rel_err(g[i], std::exp(x[i]) / s) <= 1e-14);
  };
  check(random_tensor<2>(41, -3, 3));
  check(random_tensor<3>(42, -3, 3));
  check(random_tensor<4>(43, -3, 3));
  check(random_tensor<5>(44, -3, 3));
  check(random_tensor<8>(45, -3, 3));
  check(random_tensor<12>(46, -3, 3));
  check(random_tensor<15>(47, -3, 3));
  // A rank-0 argument broadcast into the batches, a division, a square: every node's batch form
  // at each width, against the unstaged gradient.
  check_staged(
      [](auto const& t, auto const& k) { return zn::sum(zn::square(k / zn::exp(t * 0.5))); },
      random_tensor<6>(48), zn::tensor<double>(0.8));
}

TEST_CASE("staged gradients of larger tensors match the unstaged path", "[staged][grad]") {
  // Sizes past the unrolling limit take loops: sums fold in several accumulators.
  auto const x = random_tensor<300>(17);
  auto const mu = zn::tensor<double>(-0.56);
  auto lpdf = [](auto const& t, auto const& m) {
    return -zn::sum(zn::square(t - m)) / (2 * 1.37 * 1.37) - 300 * std::log(1.37);
  };
  auto const [v, g] = zn::jit(zn::value_and_grad(lpdf, zn::argnums<0, 1>))(x, mu);
  double value = 0, gmu = 0;
  for (std::size_t i = 0; i < 300; ++i) {
    double const d = x[i] - mu[0];
    value -= d * d / (2 * 1.37 * 1.37);
    CHECK(rel_err(std::get<0>(g)[i], -d / (1.37 * 1.37)) <= 1e-14);
    gmu += d / (1.37 * 1.37);
  }
  value -= 300 * std::log(1.37);
  CHECK(rel_err(double(v), value) <= 1e-13);
  CHECK(rel_err(std::get<1>(g)[0], gmu) <= 1e-12);
  // Batches: xsimd forms of costly ops, a constant tensor and a broadcast rank-0 argument in
  // the batched forward loop, a tail shorter than a batch (100 = 12 x 8 + 4).
  auto const y = random_tensor<100>(22);
  auto const w = random_tensor<100>(23);
  check_staged(
      [&](auto const& t, auto const& k) {
        return zn::mean(zn::sin(t * k) * zn::exp(-t * t) + t / (1.0 + t * t) * w);
      },
      y, zn::tensor<double>(0.7));
  auto const lse = [](auto const& t) { return zn::log(zn::sum(zn::exp(t))); };
  check_close(zn::jit(zn::grad(lse))(x), zn::grad(lse)(x), 1e-13);
  auto const a = random_tensor<20, 30>(18);
  auto const b = random_tensor<30, 20>(19);
  auto const mp = [](auto const& p, auto const& q) { return zn::sum(zn::matmul(p, q)); };
  auto const gs = zn::jit(zn::grad(mp, zn::argnums<0, 1>))(a, b);
  auto const gu = zn::grad(mp, zn::argnums<0, 1>)(a, b);
  check_close(std::get<0>(gs), std::get<0>(gu), 1e-12);
  check_close(std::get<1>(gs), std::get<1>(gu), 1e-12);
}

namespace {
// Cumulative sum as a user rule: y_t = x_0 + ... + x_t; its reverse is the reverse cumulative
// sum of the cotangent. Tensors in, tensors out.
auto const cumsum = zn::custom_vjp(
    [](auto const& x) {
      auto y = x;
      for (std::size_t t = 1; t < y.count; ++t) y[t] += y[t - 1];
      return y;
    },
    [](auto const& x) {
      auto y = x;
      for (std::size_t t = 1; t < y.count; ++t) y[t] += y[t - 1];
      return std::pair{y, 0};
    },
    [](int, auto const& ct) {
      auto g = ct;
      for (std::size_t t = g.count - 1; t-- > 0;) g[t] += g[t + 1];
      return std::make_tuple(g);
    });
// x * scale as a user rule of two arguments, the second a rank-0 tensor; counts its calls.
int scaled_fwd_calls = 0, scaled_bwd_calls = 0;
auto const scaled = zn::custom_vjp(
    [](auto const& x, auto const& s) { return zn::tensor<double, 4>(x * double(s)); },
    [](auto const& x, auto const& s) {
      ++scaled_fwd_calls;
      return std::pair{zn::tensor<double, 4>(x * double(s)), std::pair{x, double(s)}};
    },
    [](auto const& res, auto const& ct) {
      ++scaled_bwd_calls;
      return std::make_tuple(zn::tensor<double, 4>(ct * res.second),
                             zn::tensor<double>(zn::sum(ct * res.first)));
    });
// x * x with x kept as the residual: a tensor aligned to 64 bytes, in the call's arena; bwd
// records whether it got it at that alignment.
bool square_res_aligned = false;
auto const square8 =
    zn::custom_vjp([](auto const& x) { return zn::tensor<double, 8>(x * x); },
                   [](auto const& x) {
                     return std::pair{zn::tensor<double, 8>(x * x), zn::tensor<double, 8>(x)};
                   },
                   [](auto const& res, auto const& ct) {
                     square_res_aligned = reinterpret_cast<std::uintptr_t>(&res) % 64 == 0;
                     return std::make_tuple(zn::tensor<double, 8>(2.0 * res * ct));
                   });
}  // namespace

TEST_CASE("custom_vjp rules inside staged tensor functions", "[staged][custom_vjp]") {
  auto const x = random_tensor<4>(20);
  auto const w = random_tensor<4>(21);
  auto const s = zn::tensor<double>(1.7);
  // Differentiated through the rule alone, and with the rule's input also read directly.
  auto f = [&](auto const& t) { return zn::sum(zn::exp(cumsum(t * 0.5)) * w) + zn::sum(t * t); };
  auto plain = [&](zn::tensor<double, 4> const& t) {
    zn::tensor<double, 4> c = t * 0.5;
    for (std::size_t i = 1; i < 4; ++i) c[i] += c[i - 1];
    return double(zn::sum(zn::exp(c) * w) + zn::sum(t * t));
  };
  auto const [v, g] = zn::jit(zn::value_and_grad(f))(x);
  CHECK(rel_err(double(v), plain(x)) <= 1e-14);
  check_close(g, numeric_grad<0>(plain, x), 1e-6);
  // Two arguments, both differentiated; the rule's output read twice.
  auto h = [](auto const& t, auto const& k) {
    auto y = scaled(t, k);
    return zn::sum(y * y) + zn::max(y);
  };
  auto hp = [](zn::tensor<double, 4> const& t, zn::tensor<double> const& k) {
    zn::tensor<double, 4> y = t * double(k);
    return double(zn::sum(y * y) + zn::max(y));
  };
  scaled_fwd_calls = scaled_bwd_calls = 0;
  auto const [hv, hg] = zn::jit(zn::value_and_grad(h, zn::argnums<0, 1>))(x, s);
  CHECK((scaled_fwd_calls == 1 && scaled_bwd_calls == 1));  // y's three copies share one call
  CHECK(rel_err(double(hv), hp(x, s)) <= 1e-14);
  check_close(std::get<0>(hg), numeric_grad<0>(hp, x, s), 1e-6);
  check_close(std::get<1>(hg), numeric_grad<1>(hp, x, s), 1e-6);
  // A rule whose residual is over-aligned (tensor<double, 8>: 64 bytes).
  static_assert(alignof(zn::tensor<double, 8>) == 64);
  auto const x8 = random_tensor<8>(22);
  auto const [sv, sg] =
      zn::jit(zn::value_and_grad([](auto const& t) { return zn::sum(square8(t)); }))(x8);
  CHECK(square_res_aligned);
  CHECK(rel_err(double(sv), double(zn::sum(x8 * x8))) <= 1e-14);
  for (std::size_t i = 0; i < 8; ++i) CHECK(rel_err(sg[i], 2 * x8[i]) <= 1e-14);
  // Outside a gradient the rule is its function, on tensors.
  auto const c = cumsum(zn::tensor<double, 3>{1.0, 2.0, 3.0});
  CHECK((c[0] == 1.0 && c[1] == 3.0 && c[2] == 6.0));
}

namespace {
// 2 x as a user rule, generic over the tensor type.
auto const doubled = zn::custom_vjp(
    [](auto const& x) {
      auto y = x;
      for (std::size_t i = 0; i < y.count; ++i) y[i] *= 2;
      return y;
    },
    [](auto const& x) {
      auto y = x;
      for (std::size_t i = 0; i < y.count; ++i) y[i] *= 2;
      return std::pair{y, 0};
    },
    [](int, auto const& ct) {
      auto g = ct;
      for (std::size_t i = 0; i < g.count; ++i) g[i] *= 2;
      return std::make_tuple(g);
    });

// sum(doubled(x) * w) + sum(doubled(x)) staged on tensor<T, N>: value against a plain loop, the
// gradient 2 w + 2 exactly (every product by 2 is exact).
template <class T, std::size_t N>
void check_doubled_sum(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<T> d(-1, 1);
  zn::tensor<T, N> x, w;
  for (std::size_t i = 0; i < N; ++i) x[i] = d(gen), w[i] = d(gen);
  auto f = [&](auto const& t) { return zn::sum(doubled(t) * w) + zn::sum(doubled(t)); };
  auto const [v, g] = zn::jit(zn::value_and_grad(f))(x);
  double want = 0;
  for (std::size_t i = 0; i < N; ++i)
    want += 2.0 * double(x[i]) * double(w[i]) + 2.0 * double(x[i]);
  INFO("N = " << N << (std::is_same_v<T, float> ? " (float)" : " (double)"));
  CHECK(std::abs(double(v) - want) <= (std::is_same_v<T, float> ? 1e-5 : 1e-13) * double(N));
  for (std::size_t i = 0; i < N; ++i) CHECK(g[i] == T(2) * w[i] + T(2));
}
}  // namespace

// A rule's result of up to 8 elements is read element by element (staged_custom.hpp,
// lane_by_lane_up_to), a longer one a batch at a time: both ways, doubles and floats, whole
// batches and tails.
TEST_CASE("user rule results short and long, read into batched sums", "[staged][custom_vjp]") {
  check_doubled_sum<double, 2>(40);
  check_doubled_sum<double, 4>(41);
  check_doubled_sum<double, 6>(42);
  check_doubled_sum<double, 8>(43);
  check_doubled_sum<double, 12>(44);
  check_doubled_sum<double, 16>(45);
  check_doubled_sum<float, 4>(46);
  check_doubled_sum<float, 8>(47);
  check_doubled_sum<float, 9>(48);
  check_doubled_sum<float, 16>(49);
}

TEST_CASE("staged functions read arguments that are not differentiated in place", "[staged]") {
  auto const x = random_tensor<8>(30);
  auto const y = random_tensor<8>(31);
  auto const k = zn::tensor<double>(0.75);
  // y and k arrive as tensor_refs to the caller's tensors: never copied into the expression.
  zn::tensor<double, 8> const* seen = nullptr;
  bool refs = false;
  auto f = [&](auto const& p, auto const& q, auto const& s) {
    if constexpr (zn::staged_expression<std::remove_cvref_t<decltype(p)>>) {
      refs = zn::is_tensor_ref_v<decltype(q)> && zn::is_tensor_ref_v<decltype(s)>;
      seen = &static_cast<zn::tensor<double, 8> const&>(q);
    }
    double const s0 = double(s) + q(0) - q[0];  // element access and rank 0 read as numbers
    zn::tensor<double, 2, 4> const q2 = zn::reshape<2, 4>(q);  // eager: no staged operand
    return zn::sum(zn::square(p - q) * s0) + zn::sum(zn::matmul(q2, zn::reshape<4, 2>(p))) +
           zn::sum(zn::exp(p) * zn::sum(q)) + zn::max(p * zn::transpose(q2)(1, 0));
  };
  auto plain = [&](zn::tensor<double, 8> const& p) { return double(f(p, y, k)); };
  auto const [v, g] = zn::jit(zn::value_and_grad(f))(x, y, k);
  CHECK(refs);
  CHECK(seen == &y);
  CHECK(rel_err(double(v), plain(x)) <= 1e-14);
  auto const [uv, ug] = zn::value_and_grad(f)(x, y, k);  // unstaged: y and k as they are
  CHECK(rel_err(double(uv), plain(x)) <= 1e-14);
  check_close(g, ug, 1e-13);
  check_close(g, numeric_grad<0>(plain, x), 1e-6);

  // A user rule given a reference: fwd sees the caller's tensor.
  auto h = [](auto const& t, auto const& s) { return zn::sum(scaled(t, s) * t); };
  auto const xs = random_tensor<4>(32);
  scaled_fwd_calls = scaled_bwd_calls = 0;
  auto const [hv, hg] = zn::jit(zn::value_and_grad(h))(xs, k);
  CHECK((scaled_fwd_calls == 1 && scaled_bwd_calls == 1));
  CHECK(rel_err(double(hv), 0.75 * double(zn::sum(xs * xs))) <= 1e-14);
  for (std::size_t i = 0; i < 4; ++i) CHECK(rel_err(hg[i], 1.5 * xs[i]) <= 1e-14);

  // zn::ref outside a transform: reads like the tensor in fixed-size and array expressions.
  auto const r = zn::ref(y);
  zn::tensor<double, 8> const twice = r * 2.0 + zn::sum(r);
  double const total = double(zn::sum(y));
  for (std::size_t i = 0; i < 8; ++i) CHECK(twice[i] == 2.0 * y[i] + total);
  zn::array<double> const a = zn::ones<double>({8}) + r;
  for (std::size_t i = 0; i < 8; ++i) CHECK(a.data()[i] == 1.0 + y[i]);
  CHECK(&r.get() == &y);
  static_assert(!std::is_constructible_v<zn::tensor_ref<double, 8>, zn::tensor<double, 8>&&>);
}

TEST_CASE("a staged log of an exp is its argument", "[staged]") {
  // log(exp(x)) builds no node: the staged graph reads x, exact where exp(x) is finite and
  // right where it overflows (x = 800: exp is inf, log(exp(x)) would be inf).
  auto f = [](auto const& x, auto const& h) {
    auto const lx = zn::log(zn::exp(x * h));
    if constexpr (zn::staged_expression<std::remove_cvref_t<decltype(x)>>)
      static_assert(
          std::is_same_v<std::remove_cvref_t<decltype(lx)>, std::remove_cvref_t<decltype(x * h)>>);
    return zn::sum(lx * x) + zn::sum(zn::log(zn::exp(h)));
  };
  zn::tensor<double, 3> x{0.5, -2.0, 800.0};
  zn::tensor<double> h(1.25);
  auto const [v, g] = zn::jit(zn::value_and_grad(f, zn::argnums<0, 1>))(x, h);
  // sum(h x^2) + h; d/dx = 2 h x, d/dh = sum(x^2) + 1
  double const sx2 = 0.25 + 4.0 + 640000.0;
  CHECK(rel_err(double(v), 1.25 * sx2 + 1.25) <= 1e-15);
  for (std::size_t i = 0; i < 3; ++i) CHECK(rel_err(std::get<0>(g)[i], 2.5 * x[i]) <= 1e-15);
  CHECK(rel_err(double(std::get<1>(g)), sx2 + 1.0) <= 1e-15);
  // Unstaged, the same function is computed as written: inf at x = 800.
  CHECK(std::isinf(double(f(x, h))));
  zn::tensor<double, 3> small{0.5, -2.0, 3.0};
  auto const [sv, sg] = zn::jit(zn::value_and_grad(f, zn::argnums<0, 1>))(small, h);
  CHECK(rel_err(double(sv), double(f(small, h))) <= 1e-14);
  check_close(std::get<0>(sg), numeric_grad<0>(f, small, h), 1e-6);
}
