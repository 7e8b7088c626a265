// bench/fastad_suite: FastAD's benchmark suite (Yang, arXiv:2102.03681; its ADBenchmark repo),
// value + gradient in double, three implementations measured in the same run:
//
//   zenith        zn::value_and_grad(f, zn::argnums<...>) on zn::array<double>, f written the way
//                 a user writes it (zn::log(zn::sum(zn::exp(x))), zn::matmul, ...)
//   zenith jit    the same under zn::jit: recorded on the first call with each N, replayed after
//   hand-written  plain loops computing the value and the analytic gradient (-O3; reductions
//                 carry `#pragma omp simd reduction`, built with -fopenmp-simd, so that they
//                 vectorize without -ffast-math)
//   LibTorch      autograd: the same function on torch::Tensor (kDouble), then
//                 torch::autograd::grad (built when LibTorch is found: ZENITH_BENCH_TORCH)
//
// zenith, OpenBLAS and LibTorch all run on one thread (zn::set_num_threads(1),
// openblas_set_num_threads(1), at::set_num_threads(1)): at these sizes threads only add overhead,
// and one thread each keeps the comparison fair.
//
// The functions, following ADBenchmark's functors (N is ADBenchmark's size argument, 1 .. 2^14):
//   sum             sum(x), x in R^N
//   log_sum_exp     log(sum(exp(x))), x in R^N
//   normal_log_pdf  sum of the normal log-density of x (mu = -0.56, sigma = 1.37), x in R^N
//   matrix_product  sum(A B), A and B n x n with n = max(1, floor(sqrt(N / 2)))
//   regression      log-density of a Bayesian linear regression: y ~ normal(X w + b, sigma),
//                   w ~ normal(0, 1), b ~ normal(0, 1), sigma ~ uniform(0.1, 10); X is 1000 x p,
//                   p = 10 (log2 N + 1); gradient w.r.t. (w, b, sigma)
//   stochastic_volatility
//                   T = max(2, N / 2) latent log-volatilities h: h_0 = mu + sigma s_0 /
//                   sqrt(1 - phi^2), h_t = mu + phi (h_{t-1} - mu) + sigma s_t; y_t ~ normal(0,
//                   exp(h_t / 2)), s ~ normal(0, 1), sigma ~ cauchy(0, 5), mu ~ cauchy(0, 10),
//                   phi ~ uniform(-1, 1); gradient w.r.t. (s, phi, sigma, mu). ADBenchmark's x
//                   also holds h's N slots, which are overwritten (zero gradient): left out.
//                   Neither zenith nor LibTorch has a scan primitive, so both get the AR(1)
//                   recurrence as one user-defined primitive with its hand-written reverse rule
//                   (zn::custom_vjp, torch::autograd::Function), sharing the same two loops; the
//                   rest of the density is differentiated by each library.
//
// The program first checks that the three values and gradients agree (relative 1e-10) and exits
// with status 1 if they do not. Then, per function and N, each implementation runs in batches of
// calls (about `sample_ms` per batch), batches round-robin across the implementations, and the
// median time per call (value and gradient) is printed as Markdown tables.
//
//   fastad_suite [reps (15)] [sample_ms (2)] [max log2 N (14)]
//   fastad_suite --profile FUNCTION N IMPL SECONDS   (IMPL: zenith, jit, hand, torch, fixed)
//   fastad_suite --check   only the agreement check (a ctest test)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>
#include <zenith/zenith.hpp>

#ifdef ZENITH_BENCH_TORCH
#include <torch/torch.h>
#endif

namespace zn = zenith;

namespace {

using A = zn::array<double>;
using vec = std::vector<double>;

// ---------------------------------------------------------------------------------------------
// Keeping the compiler from moving work out of the timing loops.

volatile double sink;

// Tells the compiler that memory behind p may be read and written here: a call's inputs cannot be
// assumed unchanged across iterations, nor its outputs dead.
inline void escape(void const* p) { asm volatile("" : : "g"(p) : "memory"); }

// ---------------------------------------------------------------------------------------------
// Problem data (ADBenchmark fills with Eigen's Random: uniform on [-1, 1]).

vec uniform(std::size_t n, std::mt19937_64& gen, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> d(lo, hi);
  vec v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

A to_zn(vec const& v, zn::shape s) { return zn::copy_from(v.data(), s); }

// The gradient function as it is (traced on every call) or under zn::jit (recorded on the first
// call with each shape, replayed after).
template <bool Jit, class F>
auto maybe_jit(F f) {
  if constexpr (Jit)
    return zn::jit(std::move(f));
  else
    return f;
}
A zn_scalar(double v) { return A({}, {v}); }

#ifdef ZENITH_BENCH_TORCH
auto const f64 = torch::TensorOptions().dtype(torch::kFloat64);
torch::Tensor to_torch(vec const& v, std::vector<std::int64_t> s, bool grad) {
  auto t = torch::from_blob(const_cast<double*>(v.data()), s, f64).clone();
  return grad ? t.requires_grad_() : t;
}
torch::Tensor torch_scalar(double v, bool grad) {
  auto t = torch::scalar_tensor(v, f64);
  return grad ? t.requires_grad_() : t;
}
vec from_torch(torch::Tensor const& t) {
  auto c = t.contiguous();
  return vec(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}
#endif

vec from_zn(A const& a) { return vec(a.data(), a.data() + a.size()); }

// ---------------------------------------------------------------------------------------------
// The fixed-size column: the same functions on zn::tensor<double, ...>, sizes known at compile
// time, value and gradient under zn::jit (staged: the gradient generated from the function's
// expression type, transforms/staged_grad.hpp), for N up to 2^max_fixed_log2 (all the rows with
// N <= 1e4; the build option ZENITH_BENCH_FIXED_LOG2 lowers it).

#ifndef ZENITH_BENCH_FIXED_LOG2
#define ZENITH_BENCH_FIXED_LOG2 13
#endif
constexpr int max_fixed_log2 = ZENITH_BENCH_FIXED_LOG2;

template <std::size_t... N>
zn::tensor<double, N...> to_tensor(vec const& v) {
  zn::tensor<double, N...> t;
  std::copy(v.begin(), v.end(), t.data());
  return t;
}
template <class T>
vec from_tensor(T const& t) {
  return vec(t.data(), t.data() + t.count);
}

// f(std::integral_constant<std::size_t, N>{}) for the N in 1, 2, 4, ..., 2^max_fixed_log2 equal
// to n; false when n is not one of them.
template <class F>
bool with_fixed_size(std::size_t n, F&& f) {
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    return ((n == (std::size_t(1) << K) &&
             (f(std::integral_constant<std::size_t, (std::size_t(1) << K)>{}), true)) ||
            ...);
  }
  (std::make_index_sequence<max_fixed_log2 + 1>{});
}

// What the check compares: the value and every gradient, flattened.
struct result {
  double value = 0;
  std::vector<vec> grads;
};

// The fixed-size variant of a case whose one argument is the vector x, at size N.
template <class Case, std::size_t N>
struct vector_fixed {
  zn::tensor<double, N> x;
  explicit vector_fixed(Case const& c) : x(to_tensor<N>(c.x)) {}
  auto run() const {
    static auto const f = zn::jit(zn::value_and_grad(Case::function));
    return f(x);
  }
  result get() const {
    auto [v, gx] = run();
    return {double(v), {from_tensor(gx)}};
  }
};

// A case's fixed-size variant: Case::fixed<N>, built from the case's data, with run() giving
// {value, gradients} and get() the result to check.
template <class Case>
concept has_fixed = requires {
  typename Case::template fixed<1>;
};

// ---------------------------------------------------------------------------------------------
// Log-densities as a user writes them, once per library (ADBenchmark's normal_log_density,
// cauchy_log_density). sigma is a scalar (a double or a rank-0 array / tensor) ...

template <class Y, class M, class S>
auto zn_normal_lpdf(Y const& y, M const& mu, S const& sigma) {
  double n = double(y.shape().numel());
  if constexpr (std::is_arithmetic_v<S>)
    return -0.5 * zn::sum(zn::square(y - mu)) / (sigma * sigma) - n * std::log(sigma);
  else
    return -0.5 * zn::sum(zn::square(y - mu)) / zn::square(sigma) - n * zn::log(sigma);
}
// ... or one standard deviation per element.
template <class Y, class S>
auto zn_normal_lpdf_vec(Y const& y, double mu, S const& sigma) {
  return -0.5 * zn::sum(zn::square((y - mu) / sigma)) - zn::sum(zn::log(sigma));
}
template <class X>
auto zn_cauchy_lpdf(X const& x, double loc, double scale) {
  return -zn::log(scale * (1.0 + zn::square((x - loc) / scale)));
}

#ifdef ZENITH_BENCH_TORCH
torch::Tensor torch_normal_lpdf(torch::Tensor const& y, double mu, double sigma) {
  return -0.5 * (y - mu).square().sum() / (sigma * sigma) - double(y.numel()) * std::log(sigma);
}
torch::Tensor torch_normal_lpdf(torch::Tensor const& y, torch::Tensor const& mu,
                                torch::Tensor const& sigma) {
  return -0.5 * (y - mu).square().sum() / sigma.square() - double(y.numel()) * torch::log(sigma);
}
torch::Tensor torch_normal_lpdf_vec(torch::Tensor const& y, double mu, torch::Tensor const& sigma) {
  return -0.5 * ((y - mu) / sigma).square().sum() - torch::log(sigma).sum();
}
torch::Tensor torch_cauchy_lpdf(torch::Tensor const& x, double loc, double scale) {
  return -torch::log(scale * (1.0 + ((x - loc) / scale).square()));
}
#endif

// ---------------------------------------------------------------------------------------------
// sum(x)

struct sum_case {
  static constexpr char const* name = "sum";
  std::size_t n;
  vec x, g;
  double value = 0;
  A zx;
#ifdef ZENITH_BENCH_TORCH
  torch::Tensor tx;
#endif

  sum_case(std::size_t N, std::mt19937_64& gen) : n(N), x(uniform(N, gen)), g(N) {
    zx = to_zn(x, {n});
#ifdef ZENITH_BENCH_TORCH
    tx = to_torch(x, {std::int64_t(n)}, true);
#endif
  }
  std::string size() const { return "x: " + std::to_string(n); }

  static constexpr auto function = [](auto const& x) { return zn::sum(x); };
  template <bool Jit = false>
  auto zenith() const {
    static auto const f = maybe_jit<Jit>(zn::value_and_grad(function));
    return f(zx);
  }
  template <bool Jit = false>
  result zenith_result() const {
    auto [v, gx] = zenith<Jit>();
    return {v.item(), {from_zn(gx)}};
  }
  template <std::size_t N>
  using fixed = vector_fixed<sum_case, N>;

  void hand() {
    double const* px = x.data();
    double* pg = g.data();
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (std::size_t i = 0; i < n; ++i) {
      s += px[i];
      pg[i] = 1.0;
    }
    value = s;
  }
  result hand_result() {
    hand();
    return {value, {g}};
  }

#ifdef ZENITH_BENCH_TORCH
  std::vector<torch::Tensor> torch_run() const {
    auto y = tx.sum();
    auto gs = torch::autograd::grad({y}, {tx});
    return {y, gs[0]};
  }
#endif
};

// ---------------------------------------------------------------------------------------------
// log(sum(exp(x)))

struct log_sum_exp_case {
  static constexpr char const* name = "log_sum_exp";
  std::size_t n;
  vec x, g;
  double value = 0;
  A zx;
#ifdef ZENITH_BENCH_TORCH
  torch::Tensor tx;
#endif

  log_sum_exp_case(std::size_t N, std::mt19937_64& gen) : n(N), x(uniform(N, gen)), g(N) {
    zx = to_zn(x, {n});
#ifdef ZENITH_BENCH_TORCH
    tx = to_torch(x, {std::int64_t(n)}, true);
#endif
  }
  std::string size() const { return "x: " + std::to_string(n); }

  static constexpr auto function = [](auto const& x) { return zn::log(zn::sum(zn::exp(x))); };
  template <bool Jit = false>
  auto zenith() const {
    static auto const f = maybe_jit<Jit>(zn::value_and_grad(function));
    return f(zx);
  }
  template <bool Jit = false>
  result zenith_result() const {
    auto [v, gx] = zenith<Jit>();
    return {v.item(), {from_zn(gx)}};
  }
  template <std::size_t N>
  using fixed = vector_fixed<log_sum_exp_case, N>;

  // As FastAD does it: exp(x) is kept (in the gradient's buffer) and scaled by 1 / sum.
  void hand() {
    double const* px = x.data();
    double* pg = g.data();
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (std::size_t i = 0; i < n; ++i) {
      pg[i] = std::exp(px[i]);
      s += pg[i];
    }
    double const r = 1.0 / s;
    for (std::size_t i = 0; i < n; ++i) pg[i] *= r;
    value = std::log(s);
  }
  result hand_result() {
    hand();
    return {value, {g}};
  }

#ifdef ZENITH_BENCH_TORCH
  std::vector<torch::Tensor> torch_run() const {
    auto y = torch::log(torch::exp(tx).sum());
    auto gs = torch::autograd::grad({y}, {tx});
    return {y, gs[0]};
  }
#endif
};

// ---------------------------------------------------------------------------------------------
// sum of the normal log-density of x, mu = -0.56, sigma = 1.37 (gradient w.r.t. x)

constexpr double nlp_mu = -0.56, nlp_sigma = 1.37;

struct normal_log_pdf_case {
  static constexpr char const* name = "normal_log_pdf";
  std::size_t n;
  vec x, g;
  double value = 0;
  A zx;
#ifdef ZENITH_BENCH_TORCH
  torch::Tensor tx;
#endif

  normal_log_pdf_case(std::size_t N, std::mt19937_64& gen) : n(N), x(uniform(N, gen)), g(N) {
    zx = to_zn(x, {n});
#ifdef ZENITH_BENCH_TORCH
    tx = to_torch(x, {std::int64_t(n)}, true);
#endif
  }
  std::string size() const { return "x: " + std::to_string(n); }

  static constexpr auto function = [](auto const& x) {
    return zn_normal_lpdf(x, nlp_mu, nlp_sigma);
  };
  template <bool Jit = false>
  auto zenith() const {
    static auto const f = maybe_jit<Jit>(zn::value_and_grad(function));
    return f(zx);
  }
  template <bool Jit = false>
  result zenith_result() const {
    auto [v, gx] = zenith<Jit>();
    return {v.item(), {from_zn(gx)}};
  }
  template <std::size_t N>
  using fixed = vector_fixed<normal_log_pdf_case, N>;

  void hand() {
    double const* px = x.data();
    double* pg = g.data();
    double const r = 1.0 / (nlp_sigma * nlp_sigma);
    double z2 = 0;
#pragma omp simd reduction(+ : z2)
    for (std::size_t i = 0; i < n; ++i) {
      double d = px[i] - nlp_mu;
      z2 += d * d;
      pg[i] = -d * r;
    }
    value = -0.5 * z2 * r - double(n) * std::log(nlp_sigma);
  }
  result hand_result() {
    hand();
    return {value, {g}};
  }

#ifdef ZENITH_BENCH_TORCH
  std::vector<torch::Tensor> torch_run() const {
    auto y = torch_normal_lpdf(tx, nlp_mu, nlp_sigma);
    auto gs = torch::autograd::grad({y}, {tx});
    return {y, gs[0]};
  }
#endif
};

// ---------------------------------------------------------------------------------------------
// sum(A B), A and B n x n (row-major here; ADBenchmark's Eigen maps are column-major, which only
// transposes the roles and changes nothing in the cost)

struct matrix_product_case {
  static constexpr char const* name = "matrix_product";
  std::size_t n;
  vec a, b, ga, gb, row, col;
  double value = 0;
  A za, zb;
#ifdef ZENITH_BENCH_TORCH
  torch::Tensor ta, tb;
#endif

  static constexpr std::size_t dim(std::size_t N) {  // max(1, floor(sqrt(N / 2)))
    std::size_t r = 0;
    while ((r + 1) * (r + 1) <= N / 2) ++r;
    return std::max<std::size_t>(1, r);
  }
  matrix_product_case(std::size_t N, std::mt19937_64& gen)
      : n(dim(N)),
        a(uniform(n * n, gen)),
        b(uniform(n * n, gen)),
        ga(n * n),
        gb(n * n),
        row(n),
        col(n) {
    za = to_zn(a, {n, n});
    zb = to_zn(b, {n, n});
#ifdef ZENITH_BENCH_TORCH
    ta = to_torch(a, {std::int64_t(n), std::int64_t(n)}, true);
    tb = to_torch(b, {std::int64_t(n), std::int64_t(n)}, true);
#endif
  }
  std::string size() const {
    return "2 x " + std::to_string(n) + "x" + std::to_string(n) + " (" + std::to_string(2 * n * n) +
           ")";
  }

  static constexpr auto function = [](auto const& a, auto const& b) {
    return zn::sum(zn::matmul(a, b));
  };
  template <bool Jit = false>
  auto zenith() const {
    static auto const f = maybe_jit<Jit>(zn::value_and_grad(function, zn::argnums<0, 1>));
    return f(za, zb);
  }
  template <bool Jit = false>
  result zenith_result() const {
    auto [v, g] = zenith<Jit>();
    return {v.item(), {from_zn(std::get<0>(g)), from_zn(std::get<1>(g))}};
  }
  template <std::size_t N>
  struct fixed {
    static constexpr std::size_t n = dim(N);
    zn::tensor<double, n, n> a, b;
    explicit fixed(matrix_product_case const& c)
        : a(to_tensor<n, n>(c.a)), b(to_tensor<n, n>(c.b)) {}
    auto run() const {
      static auto const f = zn::jit(zn::value_and_grad(function, zn::argnums<0, 1>));
      return f(a, b);
    }
    result get() const {
      auto [v, g] = run();
      return {double(v), {from_tensor(std::get<0>(g)), from_tensor(std::get<1>(g))}};
    }
  };

  // The value as the function is defined (the product, i-k-j loops that vectorize over j, then its
  // sum); the gradient analytically: d/dA_ik = sum_j B_kj (row sums of B), d/dB_kj = sum_i A_ik
  // (column sums of A), O(n^2).
  void hand() {
    double const *pa = a.data(), *pb = b.data();
    double *pr = row.data(), *pc = col.data();
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) pr[j] = 0;
      for (std::size_t k = 0; k < n; ++k) {
        double aik = pa[i * n + k];
        for (std::size_t j = 0; j < n; ++j) pr[j] += aik * pb[k * n + j];
      }
#pragma omp simd reduction(+ : s)
      for (std::size_t j = 0; j < n; ++j) s += pr[j];
    }
    value = s;
    for (std::size_t k = 0; k < n; ++k) {
      double r = 0;
#pragma omp simd reduction(+ : r)
      for (std::size_t j = 0; j < n; ++j) r += pb[k * n + j];
      pr[k] = r;
    }
    for (std::size_t k = 0; k < n; ++k) pc[k] = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < n; ++k) pc[k] += pa[i * n + k];
    double *pga = ga.data(), *pgb = gb.data();
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < n; ++k) pga[i * n + k] = pr[k];
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < n; ++j) pgb[k * n + j] = pc[k];
  }
  result hand_result() {
    hand();
    return {value, {ga, gb}};
  }

#ifdef ZENITH_BENCH_TORCH
  std::vector<torch::Tensor> torch_run() const {
    auto y = torch::matmul(ta, tb).sum();
    auto gs = torch::autograd::grad({y}, {ta, tb});
    return {y, gs[0], gs[1]};
  }
#endif
};

// ---------------------------------------------------------------------------------------------
// Linear regression log-density: gradient w.r.t. (w, b, sigma)

constexpr std::size_t reg_rows = 1000;

struct regression_case {
  static constexpr char const* name = "regression";
  std::size_t p;
  vec X, y, w, r, gw;
  double b, sigma, value = 0, gb = 0, gsigma = 0;
  A zX, zy, zw, zb, zsigma;
#ifdef ZENITH_BENCH_TORCH
  torch::Tensor tX, ty, tw, tb, tsigma;
#endif

  static std::size_t features(std::size_t N) {
    return (std::size_t(std::log2(double(N))) + 1) * 10;
  }
  regression_case(std::size_t N, std::mt19937_64& gen)
      : p(features(N)),
        X(uniform(reg_rows * p, gen)),
        y(uniform(reg_rows, gen)),
        w(uniform(p, gen)),
        r(reg_rows),
        gw(p) {
    vec bs = uniform(2, gen);
    b = bs[0];
    sigma = std::abs(bs[1]) + 0.1;  // as ADBenchmark: a positive sigma
    zX = to_zn(X, {reg_rows, p});
    zy = to_zn(y, {reg_rows});
    zw = to_zn(w, {p});
    zb = zn_scalar(b);
    zsigma = zn_scalar(sigma);
#ifdef ZENITH_BENCH_TORCH
    tX = to_torch(X, {std::int64_t(reg_rows), std::int64_t(p)}, false);
    ty = to_torch(y, {std::int64_t(reg_rows)}, false);
    tw = to_torch(w, {std::int64_t(p)}, true);
    tb = torch_scalar(b, true);
    tsigma = torch_scalar(sigma, true);
#endif
  }
  std::string size() const { return "X: 1000x" + std::to_string(p); }

  template <bool Jit = false>
  auto zenith() const {
    static auto const f = maybe_jit<Jit>(zn::value_and_grad(
        [](A const& w, A const& b, A const& sigma, A const& X, A const& y) {
          return zn_normal_lpdf(y, zn::matmul(X, w) + b, sigma) + zn_normal_lpdf(w, 0.0, 1.0) +
                 zn_normal_lpdf(b, 0.0, 1.0) - std::log(10.0 - 0.1);
        },
        zn::argnums<0, 1, 2>));
    return f(zw, zb, zsigma, zX, zy);
  }
  template <bool Jit = false>
  result zenith_result() const {
    auto [v, g] = zenith<Jit>();
    return {v.item(), {from_zn(std::get<0>(g)), {std::get<1>(g).item()}, {std::get<2>(g).item()}}};
  }

  // r = y - X w - b; value = -|r|^2 / (2 s^2) - m log s - |w|^2 / 2 - b^2 / 2 - log 9.9;
  // d/dw = X^T r / s^2 - w, d/db = sum(r) / s^2 - b, d/ds = |r|^2 / s^3 - m / s.
  void hand() {
    double const *pX = X.data(), *py = y.data(), *pw = w.data();
    double *pr = r.data(), *pg = gw.data();
    double r2 = 0, rs = 0;
    for (std::size_t i = 0; i < reg_rows; ++i) {
      double const* xi = pX + i * p;
      double d = 0;
#pragma omp simd reduction(+ : d)
      for (std::size_t j = 0; j < p; ++j) d += xi[j] * pw[j];
      double ri = py[i] - d - b;
      pr[i] = ri;
      r2 += ri * ri;
      rs += ri;
    }
    double const is2 = 1.0 / (sigma * sigma);
    for (std::size_t j = 0; j < p; ++j) pg[j] = 0;
    for (std::size_t i = 0; i < reg_rows; ++i) {
      double const* xi = pX + i * p;
      double ri = pr[i] * is2;
      for (std::size_t j = 0; j < p; ++j) pg[j] += ri * xi[j];
    }
    double w2 = 0;
#pragma omp simd reduction(+ : w2)
    for (std::size_t j = 0; j < p; ++j) {
      w2 += pw[j] * pw[j];
      pg[j] -= pw[j];
    }
    value = -0.5 * r2 * is2 - double(reg_rows) * std::log(sigma) - 0.5 * w2 - 0.5 * b * b -
            std::log(10.0 - 0.1);
    gb = rs * is2 - b;
    gsigma = r2 * is2 / sigma - double(reg_rows) / sigma;
  }
  result hand_result() {
    hand();
    return {value, {gw, {gb}, {gsigma}}};
  }

#ifdef ZENITH_BENCH_TORCH
  std::vector<torch::Tensor> torch_run() const {
    auto lp = torch_normal_lpdf(ty, torch::matmul(tX, tw) + tb, tsigma) +
              torch_normal_lpdf(tw, 0.0, 1.0) + torch_normal_lpdf(tb, 0.0, 1.0) -
              std::log(10.0 - 0.1);
    auto gs = torch::autograd::grad({lp}, {tw, tb, tsigma});
    return {lp, gs[0], gs[1], gs[2]};
  }
#endif
};

// ---------------------------------------------------------------------------------------------
// Stochastic volatility. The AR(1) recurrence, written once as loops over raw memory:
//   u_0 = s_0 / sqrt(1 - phi^2),  u_t = phi u_{t-1} + s_t,
// and its reverse rule: a_t = ct_t + phi a_{t+1} (a reverse scan), d/ds_t = a_t (times
// 1 / sqrt(1 - phi^2) at t = 0), d/dphi = sum_{t>=1} a_t u_{t-1} + a_0 s_0 phi (1 - phi^2)^-3/2.
// Then h = mu + sigma u.

void ar1_forward(double const* s, double phi, double* u, std::size_t n) {
  double v = s[0] / std::sqrt(1 - phi * phi);
  u[0] = v;
  for (std::size_t t = 1; t < n; ++t) u[t] = v = phi * v + s[t];
}
// The same, writing u to two places: the output of the fixed-size rule and its residual. (One
// pass; a copy of u afterwards reads memory 16 bytes past the stores it has just issued, modulo
// 4 KiB, and ran at a quarter of its speed on Zen 3.)
void ar1_forward(double const* s, double phi, double* u, double* u2, std::size_t n) {
  double v = s[0] / std::sqrt(1 - phi * phi);
  u[0] = u2[0] = v;
  for (std::size_t t = 1; t < n; ++t) u[t] = u2[t] = v = phi * v + s[t];
}

double ar1_backward(double const* s, double phi, double const* u, double const* ct, double* ds,
                    std::size_t n) {
  double const c = 1 / std::sqrt(1 - phi * phi);
  double a = 0, dphi = 0;
  for (std::size_t t = n - 1; t >= 1; --t) {
    a = ct[t] + phi * a;
    ds[t] = a;
    dphi += a * u[t - 1];
  }
  a = ct[0] + phi * a;
  ds[0] = a * c;
  return dphi + a * s[0] * phi * c * c * c;
}

// zenith: the recurrence as a primitive with its own reverse rule.
auto const zn_ar1 = zn::custom_vjp(
    [](A const& s, A const& phi) {  // f, outside a trace
      A u = A::empty(s.shape());
      ar1_forward(s.data(), phi.item(), u.data(), s.size());
      return u;
    },
    [](A const& s, A const& phi) {  // fwd: {output, residuals}
      A u = A::empty(s.shape());
      ar1_forward(s.data(), phi.item(), u.data(), s.size());
      return std::pair{u, std::tuple{s, phi, u}};
    },
    [](std::tuple<A, A, A> const& res, A const& ct) {  // bwd
      auto const& [s, phi, u] = res;
      A ds = A::empty(s.shape());
      double dphi = ar1_backward(s.data(), phi.item(), u.data(), ct.data(), ds.data(), s.size());
      return std::make_tuple(ds, zn_scalar(dphi));
    });

// The same rule for the fixed-size column: tensors in, tensors out (zn::jit stages a custom_vjp
// as one node whose reverse calls bwd). Results are built in place, unset (zn::uninitialized)
// where the loops write every element, and the residuals are what the reverse scan reads (u,
// phi and s_0): a tensor copy or a zeroing is a pass over its elements.
auto const zn_ar1_fixed = zn::custom_vjp(
    [](auto const& s, auto const& phi) {
      auto u = s;
      ar1_forward(s.data(), double(phi), u.data(), s.count);
      return u;
    },
    [](auto const& s, auto const& phi) {  // fwd: {u, residuals (u, phi, s_0)}
      using T = std::remove_cvref_t<decltype(s)>;
      std::pair<T, std::tuple<T, double, double>> r(
          std::piecewise_construct, std::forward_as_tuple(zn::uninitialized),
          std::forward_as_tuple(zn::uninitialized, double(phi), s[0]));
      ar1_forward(s.data(), double(phi), r.first.data(), std::get<0>(r.second).data(), s.count);
      return r;
    },
    [](auto const& res, auto const& ct) {  // bwd
      auto const& [u, phi, s0] = res;
      std::tuple<std::remove_cvref_t<decltype(u)>, zn::tensor<double>> r(zn::uninitialized, 0.0);
      std::get<1>(r) =  // the scan reads s only at s_0
          ar1_backward(&s0, phi, u.data(), ct.data(), std::get<0>(r).data(), u.count);
      return r;
    });

#ifdef ZENITH_BENCH_TORCH
// LibTorch: the same primitive as an autograd Function.
struct torch_ar1 : torch::autograd::Function<torch_ar1> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor s,
                               torch::Tensor phi) {
    auto u = torch::empty_like(s);
    ar1_forward(s.data_ptr<double>(), phi.item<double>(), u.data_ptr<double>(),
                std::size_t(s.numel()));
    ctx->save_for_backward({s, phi, u});
    return u;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list cts) {
    auto saved = ctx->get_saved_variables();
    auto const &s = saved[0], &phi = saved[1], &u = saved[2];
    auto ct = cts[0].contiguous();
    auto ds = torch::empty_like(s);
    double dphi =
        ar1_backward(s.data_ptr<double>(), phi.item<double>(), u.data_ptr<double>(),
                     ct.data_ptr<double>(), ds.data_ptr<double>(), std::size_t(s.numel()));
    return {ds, torch::scalar_tensor(dphi, f64)};
  }
};
#endif

struct stochastic_volatility_case {
  static constexpr char const* name = "stochastic_volatility";
  std::size_t n;
  vec s, y, u, g, gs;
  double phi, sigma, mu, value = 0, gphi = 0, gsigma = 0, gmu = 0;
  A zs, zy, zphi, zsigma, zmu;
#ifdef ZENITH_BENCH_TORCH
  torch::Tensor ts, ty, tphi, tsigma, tmu;
#endif

  static constexpr std::size_t length(std::size_t N) { return std::max<std::size_t>(2, N / 2); }
  stochastic_volatility_case(std::size_t N, std::mt19937_64& gen)
      : n(length(N)), s(uniform(n, gen)), y(uniform(n, gen)), u(n), g(n), gs(n) {
    vec par = uniform(3, gen);
    phi = par[0];
    sigma = std::abs(par[1]) + 0.1;  // as ADBenchmark: a positive sigma
    mu = par[2];
    zs = to_zn(s, {n});
    zy = to_zn(y, {n});
    zphi = zn_scalar(phi);
    zsigma = zn_scalar(sigma);
    zmu = zn_scalar(mu);
#ifdef ZENITH_BENCH_TORCH
    ts = to_torch(s, {std::int64_t(n)}, true);
    ty = to_torch(y, {std::int64_t(n)}, false);
    tphi = torch_scalar(phi, true);
    tsigma = torch_scalar(sigma, true);
    tmu = torch_scalar(mu, true);
#endif
  }
  std::string size() const { return "T: " + std::to_string(n); }

  // The density, one definition for arrays and tensors (the AR(1) rule comes in both forms).
  static constexpr auto function = [](auto const& s, auto const& phi, auto const& sigma,
                                      auto const& mu, auto const& y) {
    auto h = [&] {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(s)>, A>)
        return mu + sigma * zn_ar1(s, phi);
      else
        return mu + sigma * zn_ar1_fixed(s, phi);
    }();
    return zn_normal_lpdf_vec(y, 0.0, zn::exp(h / 2.0)) + zn_normal_lpdf(s, 0.0, 1.0) +
           zn_cauchy_lpdf(sigma, 0.0, 5.0) + zn_cauchy_lpdf(mu, 0.0, 10.0) - std::log(2.0);
  };
  template <bool Jit = false>
  auto zenith() const {
    static auto const f = maybe_jit<Jit>(zn::value_and_grad(function, zn::argnums<0, 1, 2, 3>));
    return f(zs, zphi, zsigma, zmu, zy);
  }
  template <std::size_t N>
  struct fixed {
    static constexpr std::size_t T = length(N);
    zn::tensor<double, T> s, y;
    zn::tensor<double> phi, sigma, mu;
    explicit fixed(stochastic_volatility_case const& c)
        : s(to_tensor<T>(c.s)), y(to_tensor<T>(c.y)), phi(c.phi), sigma(c.sigma), mu(c.mu) {}
    auto run() const {
      static auto const f = zn::jit(zn::value_and_grad(function, zn::argnums<0, 1, 2, 3>));
      return f(s, phi, sigma, mu, y);
    }
    result get() const {
      auto [v, g] = run();
      return {double(v),
              {from_tensor(std::get<0>(g)),
               {double(std::get<1>(g))},
               {double(std::get<2>(g))},
               {double(std::get<3>(g))}}};
    }
  };
  template <bool Jit = false>
  result zenith_result() const {
    auto [v, g] = zenith<Jit>();
    return {v.item(),
            {from_zn(std::get<0>(g)),
             {std::get<1>(g).item()},
             {std::get<2>(g).item()},
             {std::get<3>(g).item()}}};
  }

  // One forward loop (u, h, the density, dlp/dh), then the reverse scan.
  void hand() {
    double const *ps = s.data(), *py = y.data();
    double *pu = u.data(), *pg = g.data(), *pgs = gs.data();
    ar1_forward(ps, phi, pu, n);
    double lp = 0, gh_sum = 0, gu_sum = 0, s2 = 0;
#pragma omp simd reduction(+ : lp, gh_sum, gu_sum, s2)
    for (std::size_t t = 0; t < n; ++t) {
      double h = mu + sigma * pu[t];
      double e = py[t] * py[t] * std::exp(-h);  // (y / exp(h / 2))^2
      lp += -0.5 * e - 0.5 * h;
      double gh = 0.5 * e - 0.5;  // d lp / d h_t
      gh_sum += gh;
      gu_sum += gh * pu[t];
      pg[t] = sigma * gh;  // d lp / d u_t, the AR(1) rule's cotangent
      s2 += ps[t] * ps[t];
    }
    double const c5 = sigma / 5, c10 = mu / 10;
    value = lp - 0.5 * s2 - std::log(5 * (1 + c5 * c5)) - std::log(10 * (1 + c10 * c10)) -
            std::log(2.0);
    gphi = ar1_backward(ps, phi, pu, pg, pgs, n);
    for (std::size_t t = 0; t < n; ++t) pgs[t] -= ps[t];
    gsigma = gu_sum - 2 * sigma / (25 + sigma * sigma);
    gmu = gh_sum - 2 * mu / (100 + mu * mu);
  }
  result hand_result() {
    hand();
    return {value, {gs, {gphi}, {gsigma}, {gmu}}};
  }

#ifdef ZENITH_BENCH_TORCH
  std::vector<torch::Tensor> torch_run() const {
    auto h = tmu + tsigma * torch_ar1::apply(ts, tphi);
    auto lp = torch_normal_lpdf_vec(ty, 0.0, torch::exp(h / 2.0)) +
              torch_normal_lpdf(ts, 0.0, 1.0) + torch_cauchy_lpdf(tsigma, 0.0, 5.0) +
              torch_cauchy_lpdf(tmu, 0.0, 10.0) - std::log(2.0);
    auto gs = torch::autograd::grad({lp}, {ts, tphi, tsigma, tmu});
    return {lp, gs[0], gs[1], gs[2], gs[3]};
  }
#endif
};

#ifdef ZENITH_BENCH_TORCH
result torch_result(std::vector<torch::Tensor> const& out) {
  result r{out[0].item<double>(), {}};
  for (std::size_t k = 1; k < out.size(); ++k) r.grads.push_back(from_torch(out[k]));
  return r;
}
#endif

// ---------------------------------------------------------------------------------------------
// The check: values and gradients agree to a relative 1e-10 (a gradient relative to its largest
// element, a value relative to max(|value|, 1)).

double rel_diff(result const& a, result const& ref) {
  double worst = std::abs(a.value - ref.value) / std::max(std::abs(ref.value), 1.0);
  if (a.grads.size() != ref.grads.size()) return INFINITY;
  for (std::size_t k = 0; k < ref.grads.size(); ++k) {
    if (a.grads[k].size() != ref.grads[k].size()) return INFINITY;
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < ref.grads[k].size(); ++i) {
      scale = std::max(scale, std::abs(ref.grads[k][i]));
      diff = std::max(diff, std::abs(a.grads[k][i] - ref.grads[k][i]));
    }
    worst = std::max(worst, scale > 0 ? diff / scale : diff);
  }
  return std::isnan(worst) ? INFINITY : worst;
}

// ---------------------------------------------------------------------------------------------
// Timing: each implementation runs `iters` calls per sample, calibrated to about sample_ms;
// samples go round-robin across the implementations (load from other processes falls on all
// alike), with a short sleep after each round so that other processes run between rounds when
// this one has real-time priority.

using clock_type = std::chrono::steady_clock;

struct timed {
  explicit timed(std::function<void(long)> f) : batch(std::move(f)) {}
  std::function<void(long)> batch;  // runs the implementation `iters` times
  long iters = 1;
  std::vector<double> ns;  // per call, one per sample
};

double seconds_of(std::function<void(long)> const& f, long iters) {
  auto t0 = clock_type::now();
  f(iters);
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

void calibrate(timed& t, double sample_s) {
  long it = 1;
  double s = seconds_of(t.batch, it);  // also a warm-up call
  while (s < sample_s / 4 && it < (1L << 30)) {
    it *= 2;
    s = seconds_of(t.batch, it);
  }
  t.iters = std::max(1L, long(double(it) * sample_s / std::max(s, 1e-9)));
  seconds_of(t.batch, t.iters);  // warm-up at the final size
}

struct cell {
  double median = NAN, best = NAN;
};

std::vector<cell> measure(std::vector<timed>& impls, int reps, double sample_s) {
  for (auto& t : impls) calibrate(t, sample_s);
  for (int r = 0; r < reps; ++r) {
    for (auto& t : impls) t.ns.push_back(seconds_of(t.batch, t.iters) * 1e9 / double(t.iters));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<cell> out;
  for (auto& t : impls) {
    std::sort(t.ns.begin(), t.ns.end());
    out.push_back({t.ns[t.ns.size() / 2], t.ns[0]});
  }
  return out;
}

// The implementations of one case as batch loops.
// Columns of a row: zenith, zenith under jit, hand-written, LibTorch (when built with it), then
// zenith fixed-size (when the case has it at this N).
constexpr std::size_t z_col = 0, jit_col = 1, hand_col = 2, torch_col = 3;

// The fixed-size variant of case c at size N, as a batch loop (none when it has no such size).
template <class Case>
std::optional<timed> fixed_batch(Case const& c, std::size_t N) {
  std::optional<timed> out;
  if constexpr (has_fixed<Case>) {
    with_fixed_size(N, [&](auto n) {
      auto st = std::make_shared<typename Case::template fixed<decltype(n)::value>>(c);
      out.emplace([st](long iters) {
        // The inputs on this frame, next to the result, as a caller of fixed-size code keeps
        // them: their placement relative to the result is then the same in every run. Read from
        // the heap, with the result on the stack, the distance moved with the stack's random
        // offset, and where it came near a multiple of 4 KiB a call took twice as long (4 KiB
        // aliasing; see bench/RESULTS.md).
        auto const local = *st;
        for (long i = 0; i < iters; ++i) {
          auto r = local.run();
          escape(&r);  // the gradients are stored, as the hand-written code's are
          sink = double(r.first);
        }
      });
    });
  }
  return out;
}

template <class Case>
std::vector<timed> batches(Case& c, std::size_t N) {
  std::vector<timed> out;
  out.emplace_back([&c](long iters) {
    for (long i = 0; i < iters; ++i) {
      auto r = c.zenith();
      sink = r.first.item();
    }
  });
  out.emplace_back([&c](long iters) {
    for (long i = 0; i < iters; ++i) {
      auto r = c.template zenith<true>();
      sink = r.first.item();
    }
  });
  out.emplace_back([&c](long iters) {
    for (long i = 0; i < iters; ++i) {
      c.hand();
      escape(&c);
      sink = c.value;
    }
  });
#ifdef ZENITH_BENCH_TORCH
  out.emplace_back([&c](long iters) {
    for (long i = 0; i < iters; ++i) {
      auto r = c.torch_run();
      sink = r[0].template data_ptr<double>()[0];
    }
  });
#endif
  if (auto f = fixed_batch(c, N)) out.push_back(std::move(*f));
  return out;
}

struct row {
  std::size_t N;
  std::string size;
  std::vector<cell> cells;  // impl_index order
  bool has_fixed = false;   // the last cell is the fixed-size column's
};

#ifdef ZENITH_BENCH_TORCH
constexpr bool have_torch = true;
#else
constexpr bool have_torch = false;
#endif

template <class Case>
bool check_case(int max_log2) {
  bool ok = true;
  for (int k = 0; k <= max_log2; ++k) {
    std::size_t N = std::size_t(1) << k;
    std::mt19937_64 gen(1000 + k);
    Case c(N, gen);
    result h = c.hand_result(), z = c.zenith_result();
    double dz = rel_diff(z, h), dt = 0;
    // jit: the call that records, then two replays (the second into the first's buffers).
    for (int call = 0; call < 3; ++call)
      dz = std::max(dz, rel_diff(c.template zenith_result<true>(), h));
    if constexpr (has_fixed<Case>)
      with_fixed_size(N, [&](auto n) {
        auto const st = std::make_unique<typename Case::template fixed<decltype(n)::value>>(c);
        dz = std::max(dz, rel_diff(st->get(), h));
      });
#ifdef ZENITH_BENCH_TORCH
    dt = rel_diff(torch_result(c.torch_run()), h);
#endif
    if (!(dz <= 1e-10) || !(dt <= 1e-10)) {
      std::fprintf(stderr,
                   "fastad_suite: %s, N = %zu: gradients differ (zenith vs hand-written %.3g, "
                   "LibTorch vs hand-written %.3g; tolerance 1e-10)\n",
                   Case::name, N, dz, dt);
      ok = false;
    }
  }
  return ok;
}

template <class Case>
std::vector<row> run_case(int max_log2, int reps, double sample_s) {
  std::vector<row> rows;
  for (int k = 0; k <= max_log2; ++k) {
    std::size_t N = std::size_t(1) << k;
    std::mt19937_64 gen(1000 + k);
    Case c(N, gen);
    auto impls = batches(c, N);
    bool const fixed = impls.size() > (have_torch ? 4 : 3);
    rows.push_back({N, c.size(), measure(impls, reps, sample_s), fixed});
  }
  return rows;
}

std::string fmt_ns(double ns) {
  char buf[32];
  if (ns < 100)
    std::snprintf(buf, sizeof buf, "%.1f", ns);
  else
    std::snprintf(buf, sizeof buf, "%.0f", ns);
  return buf;
}

// Per function, for rows with N <= 1e4, each zenith column against hand-written code and
// LibTorch. Kinds: traced, jit, fixed (rows that have it), best (the faster of jit and fixed).
constexpr int n_kinds = 4;
char const* const kind_names[n_kinds] = {"traced", "jit", "fixed", "best of jit, fixed"};

struct summary {
  std::string name;
  double hand_lo[n_kinds], hand_hi[n_kinds], torch_lo[n_kinds], torch_hi[n_kinds];
  int rows[n_kinds] = {}, hand_met[n_kinds] = {}, torch_met[n_kinds] = {};
  explicit summary(std::string n) : name(std::move(n)) {
    for (int k = 0; k < n_kinds; ++k) {
      hand_lo[k] = torch_lo[k] = INFINITY;
      hand_hi[k] = torch_hi[k] = 0;
    }
  }
  void add(int k, double z, double h, double t) {
    ++rows[k];
    hand_lo[k] = std::min(hand_lo[k], z / h);
    hand_hi[k] = std::max(hand_hi[k], z / h);
    hand_met[k] += z / h <= 1.5;
    if (have_torch) {
      torch_lo[k] = std::min(torch_lo[k], t / z);
      torch_hi[k] = std::max(torch_hi[k], t / z);
      torch_met[k] += t / z >= 5;
    }
  }
};

std::string fmt_ratio(double r) {
  if (std::isnan(r)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", r);
  return buf;
}

summary print_table(char const* name, std::vector<row> const& rows) {
  summary s{name};
  std::printf("\n### %s\n\n", name);
  std::printf(
      "| N | size | zenith ns | jit ns | fixed ns | hand-written ns |%s zenith / hand | "
      "jit / hand | fixed / hand |%s\n",
      have_torch ? " LibTorch ns |" : "",
      have_torch ? " LibTorch / zenith | LibTorch / jit | LibTorch / fixed |" : "");
  std::printf("|---:|---|---:|---:|---:|---:|%s---:|---:|---:|%s\n", have_torch ? "---:|" : "",
              have_torch ? "---:|---:|---:|" : "");
  for (auto const& r : rows) {
    double const z = r.cells[z_col].median, j = r.cells[jit_col].median,
                 f = r.has_fixed ? r.cells.back().median : NAN, h = r.cells[hand_col].median,
                 t = have_torch ? r.cells[torch_col].median : NAN;
    std::printf("| %zu | %s | %s | %s | %s | %s |", r.N, r.size.c_str(), fmt_ns(z).c_str(),
                fmt_ns(j).c_str(), r.has_fixed ? fmt_ns(f).c_str() : "-", fmt_ns(h).c_str());
    if (have_torch) std::printf(" %s |", fmt_ns(t).c_str());
    std::printf(" %.2f | %.2f | %s |", z / h, j / h, fmt_ratio(f / h).c_str());
    if (have_torch) std::printf(" %.2f | %.2f | %s |", t / z, t / j, fmt_ratio(t / f).c_str());
    std::printf("\n");
    if (r.N > 10000) continue;
    s.add(0, z, h, t);
    s.add(1, j, h, t);
    if (r.has_fixed) s.add(2, f, h, t);
    s.add(3, r.has_fixed ? std::min(j, f) : j, h, t);
  }
  return s;
}

template <class Case>
int profile(std::size_t N, std::string const& impl, double secs) {
  std::mt19937_64 gen(7);
  Case c(N, gen);
  auto impls = batches(c, N);
  bool const fixed = fixed_batch(c, N).has_value();
  std::size_t k = impl == "zenith"           ? z_col
                  : impl == "jit"            ? jit_col
                  : impl == "hand"           ? hand_col
                  : impl == "torch"          ? (have_torch ? torch_col : std::size_t(99))
                  : impl == "fixed" && fixed ? impls.size() - 1
                                             : std::size_t(99);
  if (k >= impls.size()) {
    std::fprintf(stderr, "fastad_suite: no implementation '%s'\n", impl.c_str());
    return 2;
  }
  calibrate(impls[k], 0.01);
  long calls = 0;
  auto t0 = clock_type::now();
  while (std::chrono::duration<double>(clock_type::now() - t0).count() < secs) {
    impls[k].batch(impls[k].iters);
    calls += impls[k].iters;
  }
  double el = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::printf("%s N = %zu %s: %ld calls, %.1f ns per call\n", Case::name, N, impl.c_str(), calls,
              el * 1e9 / double(calls));
  if (k == z_col || k == jit_col) {  // buffer allocations per call (the allocator's count)
    auto before = zn::cpu_memory_stats().allocations;
    impls[k].batch(100);
    std::printf("zenith: %.1f buffer allocations per call\n",
                double(zn::cpu_memory_stats().allocations - before) / 100);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  zn::set_num_threads(1);
  openblas_set_num_threads(1);
#ifdef ZENITH_BENCH_TORCH
  at::set_num_threads(1);
#endif

  if (argc > 1 && std::strcmp(argv[1], "--profile") == 0) {
    if (argc < 6) {
      std::fprintf(stderr, "usage: fastad_suite --profile FUNCTION N IMPL SECONDS\n");
      return 2;
    }
    std::string fn = argv[2], impl = argv[4];
    std::size_t N = std::size_t(std::atol(argv[3]));
    double secs = std::atof(argv[5]);
    if (fn == "sum") return profile<sum_case>(N, impl, secs);
    if (fn == "log_sum_exp") return profile<log_sum_exp_case>(N, impl, secs);
    if (fn == "normal_log_pdf") return profile<normal_log_pdf_case>(N, impl, secs);
    if (fn == "matrix_product") return profile<matrix_product_case>(N, impl, secs);
    if (fn == "regression") return profile<regression_case>(N, impl, secs);
    if (fn == "stochastic_volatility") return profile<stochastic_volatility_case>(N, impl, secs);
    std::fprintf(stderr, "fastad_suite: unknown function '%s'\n", fn.c_str());
    return 2;
  }

  // --check: only the agreement check below (a ctest test: the gradients at -O3 against
  // hand-written ones, every function and N, traced and under jit).
  bool check_only = argc > 1 && std::strcmp(argv[1], "--check") == 0;
  int reps = argc > 1 && !check_only ? std::atoi(argv[1]) : 15;
  double sample_s = (argc > 2 ? std::atof(argv[2]) : 2.0) * 1e-3;
  int max_log2 = argc > 3 ? std::atoi(argv[3]) : 14;

  // Every case is checked (and reported) even after one fails.
  int failed = !check_case<sum_case>(max_log2) + !check_case<log_sum_exp_case>(max_log2) +
               !check_case<normal_log_pdf_case>(max_log2) +
               !check_case<matrix_product_case>(max_log2) + !check_case<regression_case>(max_log2) +
               !check_case<stochastic_volatility_case>(max_log2);
  if (failed > 0) return 1;
  std::printf("fastad_suite: values and gradients agree (zenith, hand-written%s; relative 1e-10)\n",
              have_torch ? ", LibTorch" : "");
  if (check_only) return 0;
  std::printf(
      "median ns per value + gradient; %d samples of ~%.1f ms each, round-robin; 1 thread each\n",
      reps, sample_s * 1e3);
  std::printf("OpenBLAS core: %s (%s)\n", openblas_get_corename(), openblas_get_config());

  std::vector<summary> sums;
  sums.push_back(print_table("sum", run_case<sum_case>(max_log2, reps, sample_s)));
  sums.push_back(print_table("log_sum_exp", run_case<log_sum_exp_case>(max_log2, reps, sample_s)));
  sums.push_back(
      print_table("normal_log_pdf", run_case<normal_log_pdf_case>(max_log2, reps, sample_s)));
  sums.push_back(
      print_table("matrix_product", run_case<matrix_product_case>(max_log2, reps, sample_s)));
  sums.push_back(print_table("regression", run_case<regression_case>(max_log2, reps, sample_s)));
  sums.push_back(print_table("stochastic_volatility",
                             run_case<stochastic_volatility_case>(max_log2, reps, sample_s)));

  std::printf("\n### Targets (rows with N <= 1e4)\n\n");
  std::printf("| function | | zenith / hand (min - max) | rows <= 1.5 |%s\n",
              have_torch ? " LibTorch / zenith (min - max) | rows >= 5 |" : "");
  std::printf("|---|---|---:|---:|%s\n", have_torch ? "---:|---:|" : "");
  int met[n_kinds] = {}, torch_met[n_kinds] = {}, total[n_kinds] = {};
  for (auto const& s : sums)
    for (int k = 0; k < n_kinds; ++k) {
      if (s.rows[k] == 0) continue;
      met[k] += s.hand_met[k];
      torch_met[k] += s.torch_met[k];
      total[k] += s.rows[k];
      std::printf("| %s | %s | %.2f - %.2f | %d / %d |", s.name.c_str(), kind_names[k],
                  s.hand_lo[k], s.hand_hi[k], s.hand_met[k], s.rows[k]);
      if (have_torch)
        std::printf(" %.2f - %.2f | %d / %d |", s.torch_lo[k], s.torch_hi[k], s.torch_met[k],
                    s.rows[k]);
      std::printf("\n");
    }
  for (int k = 0; k < n_kinds; ++k) {
    std::printf("| all | %s | | %d / %d |", kind_names[k], met[k], total[k]);
    if (have_torch) std::printf(" | %d / %d |", torch_met[k], total[k]);
    std::printf("\n");
  }
  return 0;
}
