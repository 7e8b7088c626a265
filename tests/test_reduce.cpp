// Reductions: every op against a plain double loop, over axes, keepdims, views, broadcasts,
// rank 0 and empty arrays; SIMD vs scalar; determinism across runs and thread counts; the
// allocation count of a fused reduction; the compile-time axis rule; errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

namespace {

enum class rop { sum, mean, prod, max, min, argmax, argmin, logsumexp, var, std_ };
char const* rop_name(rop op) {
  static char const* const names[] = {"sum",    "mean",   "prod",      "max", "min",
                                      "argmax", "argmin", "logsumexp", "var", "std"};
  return names[int(op)];
}
std::vector<rop> const all_ops = {rop::sum,    rop::mean,   rop::prod,      rop::max, rop::min,
                                  rop::argmax, rop::argmin, rop::logsumexp, rop::var, rop::std_};

template <class T>
zn::array<T> random_array(zn::shape s, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  auto a = zn::array<T>::empty(s);
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution d(0.5);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = d(gen);
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int> d{int(lo), int(hi)};
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(d(gen));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(float(d(gen)));
  }
  return a;
}

template <class T>
double eps_of() {
  if constexpr (std::is_same_v<T, zn::bfloat16>)
    return 1.0 / 128;
  else if constexpr (std::is_same_v<T, zn::float16>)
    return 1.0 / 1024;
  else if constexpr (std::is_same_v<T, double>)
    return std::numeric_limits<double>::epsilon();
  else
    return std::numeric_limits<float>::epsilon();  // float, and ints computed in float
}

std::uint32_t mask_of(std::vector<int> const& axes, std::size_t r) {
  std::uint32_t m = 0;
  for (int a : axes) m |= 1u << std::size_t(a < 0 ? a + int(r) : a);
  return m;
}

struct ref_out {
  zn::shape shape;
  std::vector<double> value, allowed;
};

// The reference: a plain double loop. Elements of each output are visited in row-major order of
// the reduced axes, which is also the order argmax positions count in.
ref_out reference(rop op, zn::array<double> const& x, std::uint32_t mask, bool keep, double eps,
                  int ddof = 0) {
  zn::shape s = x.shape();
  std::size_t r = s.size();
  ref_out out;
  for (std::size_t k = 0; k < r; ++k) {
    if (!(mask >> k & 1))
      out.shape.push_back(s[k]);
    else if (keep)
      out.shape.push_back(1);
  }
  std::vector<std::vector<double>> groups(out.shape.numel());
  std::vector<std::size_t> idx(r, 0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::size_t o = 0;
    for (std::size_t k = 0; k < r; ++k)
      if (!(mask >> k & 1)) o = o * s[k] + idx[k];
    groups[o].push_back(x.data()[i]);
    for (std::size_t k = r; k-- > 0;) {
      if (++idx[k] < s[k]) break;
      idx[k] = 0;
    }
  }
  double const c = 32;
  for (auto const& g : groups) {
    double n = double(g.size()), sum = 0, abs_sum = 0, sq = 0, prod = 1;
    double mx = -INFINITY, mn = INFINITY;
    std::size_t imax = 0, imin = 0;
    bool nan = false;
    for (std::size_t i = 0; i < g.size(); ++i) {
      double v = g[i];
      sum += v;
      abs_sum += std::abs(v);
      sq += v * v;
      prod *= v;
      if (std::isnan(v)) {
        if (!nan) imax = imin = i;
        nan = true;
      }
      if (!nan && v > mx) mx = v, imax = i;
      if (!nan && v < mn) mn = v, imin = i;
    }
    double val = 0, tol = 0;
    switch (op) {
      case rop::sum:
        val = sum, tol = c * eps * abs_sum;
        break;
      case rop::mean:
        val = sum / n, tol = c * eps * abs_sum / n;
        break;
      case rop::prod:
        val = prod, tol = c * eps * std::sqrt(n + 1) * std::abs(prod);
        break;
      case rop::max:
        val = nan ? NAN : mx;
        break;
      case rop::min:
        val = nan ? NAN : mn;
        break;
      case rop::argmax:
        val = double(imax);
        break;
      case rop::argmin:
        val = double(imin);
        break;
      case rop::logsumexp: {
        double m = nan ? NAN : mx;
        double m0 = std::isfinite(m) ? m : 0.0;
        double se = 0;
        for (double v : g) se += std::exp(v - m0);
        val = m0 + std::log(se), tol = c * eps * (1 + std::abs(val));
        break;
      }
      case rop::var:
      case rop::std_: {
        double mu = sum / n, ss = 0;
        for (double v : g) ss += (v - mu) * (v - mu);
        double var = ss / std::max(n - ddof, 0.0);
        val = op == rop::var ? var : std::sqrt(var);
        tol = c * eps * (std::abs(val) + (op == rop::var ? sq / n : std::sqrt(sq / n)));
        break;
      }
    }
    out.value.push_back(val);
    out.allowed.push_back(tol);
  }
  return out;
}

template <class E>
zn::array<double> run_op(rop op, E const& x, std::vector<int> const& axes, bool keep,
                         int ddof = 0) {
  switch (op) {
    case rop::sum:
      return zn::cast<double>(zn::sum(x, axes, keep));
    case rop::mean:
      return zn::cast<double>(zn::mean(x, axes, keep));
    case rop::prod:
      return zn::cast<double>(zn::prod(x, axes, keep));
    case rop::max:
      return zn::cast<double>(zn::max(x, axes, keep));
    case rop::min:
      return zn::cast<double>(zn::min(x, axes, keep));
    case rop::argmax:
      if (axes.size() == 1) return zn::cast<double>(zn::argmax(x, axes[0], keep));
      return zn::cast<double>(zn::argmax(x, keep));
    case rop::argmin:
      if (axes.size() == 1) return zn::cast<double>(zn::argmin(x, axes[0], keep));
      return zn::cast<double>(zn::argmin(x, keep));
    case rop::logsumexp:
      return zn::cast<double>(zn::logsumexp(x, axes, keep));
    case rop::var:
      return zn::cast<double>(zn::var(x, axes, keep, ddof));
    case rop::std_:
      return zn::cast<double>(zn::std(x, axes, keep, ddof));
  }
  return {};
}

bool is_exact_for_ints(rop op) {
  return op == rop::sum || op == rop::prod || op == rop::max || op == rop::min ||
         op == rop::argmax || op == rop::argmin;
}

// Checks one reduction of expression x against the reference; returns false on a mismatch.
template <class E>
bool check_reduction(rop op, E const& x, std::vector<int> const& axes, bool keep, int ddof = 0) {
  using T = zn::value_t<E>;
  zn::array<double> xd = zn::cast<double>(x);
  std::size_t r = xd.ndim();
  bool flat = axes.size() == r;  // argmax over every axis is over the flattened array
  double eps = (!zn::floating_element<T> && is_exact_for_ints(op)) ? 0.0 : eps_of<T>();
  if (op == rop::argmax || op == rop::argmin) eps = 0;
  if (zn::storage_float<T> && (op == rop::max || op == rop::min)) eps = 0;
  auto ref = reference(op, xd, mask_of(axes, r), keep, eps, ddof);
  zn::array<double> got = run_op(op, x, axes, keep, ddof);
  std::ostringstream where;
  where << rop_name(op) << " of " << zn::dtype_name<T>() << " shape " << xd.shape().str()
        << " axes {";
  for (int a : axes) where << a << ' ';
  where << "} keepdims " << keep << (flat ? " (all)" : "");
  INFO(where.str());
  REQUIRE(got.shape() == ref.shape);
  for (std::size_t i = 0; i < ref.value.size(); ++i) {
    double g = got.data()[i], v = ref.value[i];
    bool ok = (std::isnan(v) && std::isnan(g)) || g == v || std::abs(g - v) <= ref.allowed[i];
    if (!ok) {
      INFO("output " << i << ": got " << g << ", expected " << v << " +- " << ref.allowed[i]);
      CHECK(ok);
      return false;
    }
  }
  return true;
}

// Every subset of axes, each with and without keepdims, with negative spellings mixed in.
template <class E>
void check_all_axes(rop op, E const& x) {
  std::size_t r = x.shape().size();
  for (std::uint32_t m = 0; m < (1u << r); ++m) {
    std::vector<int> axes;
    for (std::size_t k = 0; k < r; ++k)
      if (m >> k & 1) axes.push_back((m + k) % 2 ? int(k) - int(r) : int(k));
    if ((op == rop::argmax || op == rop::argmin) && axes.size() != 1 && axes.size() != r) continue;
    if ((op == rop::argmax || op == rop::argmin) && axes.empty()) continue;
    for (bool keep : {false, true})
      if (!check_reduction(op, x, axes, keep)) return;
  }
}

std::vector<zn::shape> const test_shapes = {
    zn::shape{1},       zn::shape{7},       zn::shape{7, 13},      zn::shape{3, 1, 5},
    zn::shape{4, 5, 6}, zn::shape{37, 129}, zn::shape{2, 3, 4, 5}, zn::shape{130, 3}};

// Inputs whose products neither overflow nor underflow: floats near 1, integers in {-2, -1, 1, 2}
// (over at most 30 elements).
template <class T>
zn::array<T> input_for(rop op, zn::shape s, unsigned seed) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (op == rop::prod) {
      auto a = random_array<T>(s, seed, -2, 2);
      for (std::size_t i = 0; i < a.size(); ++i)
        if (a.data()[i] == 0) a.data()[i] = 1;
      return a;
    }
    return random_array<T>(s, seed, -1000, 1000);
  } else {
    if (op == rop::prod) return random_array<T>(s, seed, 0.9, 1.1);
    return random_array<T>(s, seed);
  }
}

template <class A, class B>
bool bitwise_equal(zn::array<A> const& a, zn::array<B> const& b) {
  static_assert(std::is_same_v<A, B>);
  return a.shape() == b.shape() &&
         std::equal(a.data(), a.data() + a.size(), b.data(),
                    [](A x, A y) { return std::memcmp(&x, &y, sizeof(A)) == 0; });
}

// The axis rule, checked at compile time: integers are axes, floating values are not.
template <class X>
concept max_takes_double = requires(X x) {
  zn::max(x, 0.5);
};
template <class X>
concept max_takes_int = requires(X x) {
  zn::max(x, 0);
};
template <class X>
concept sum_takes_axes_and_double = requires(X x) {
  zn::sum(x, 0, 0.5);
};
template <class X>
concept argmax_takes_axes_list = requires(X x) {
  zn::argmax(x, std::vector<int>{0, 1});
};

}  // namespace

TEST_CASE("reductions match a double loop over every axis combination", "[reduce]") {
  unsigned seed = 1;
  for (rop op : all_ops) {
    for (auto const& s : test_shapes) {
      DYNAMIC_SECTION(rop_name(op) << " float " << s.str()) {
        check_all_axes(op, input_for<float>(op, s, seed++));
      }
    }
  }
}

TEST_CASE("reductions of other element types", "[reduce]") {
  zn::shape s{7, 13};
  for (rop op : all_ops) {
    DYNAMIC_SECTION(rop_name(op)) {
      check_all_axes(op, input_for<double>(op, s, 11));
      check_all_axes(op, input_for<zn::bfloat16>(op, s, 12));
      check_all_axes(op, input_for<zn::float16>(op, {3, 1, 5}, 13));
      check_all_axes(op, input_for<std::int32_t>(op, op == rop::prod ? zn::shape{3, 4, 2} : s, 14));
      check_all_axes(op, input_for<std::int64_t>(
                             op, op == rop::prod ? zn::shape{3, 4, 2} : zn::shape{4, 5, 6}, 15));
      if (op != rop::logsumexp) check_all_axes(op, random_array<bool>(s, 16));
    }
  }
}

TEST_CASE("reduction result types follow JAX", "[reduce]") {
  zn::array<bool> b({2}, {true, true});
  zn::array<std::int32_t> i({2}, {1, 2});
  zn::array<zn::float16> h({2}, {zn::float16(1.f), zn::float16(2.f)});
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::sum(b))>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::prod(b))>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::sum(i))>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::mean(i))>, float>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::mean(b))>, float>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::var(i))>, float>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::std(i, 0))>, float>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::logsumexp(i))>, float>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::max(b))>, bool>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::max(h))>, zn::float16>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::mean(h))>, zn::float16>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::argmax(h))>, std::int64_t>);
  STATIC_REQUIRE(std::is_same_v<zn::value_t<decltype(zn::argmin(i, 0))>, std::int64_t>);
  CHECK(zn::eval(zn::sum(b)).item() == 2);
  CHECK(zn::eval(zn::mean(i)).item() == 1.5f);
  CHECK(float(zn::eval(zn::mean(h)).item()) == 1.5f);
}

TEST_CASE("integer sums and products wrap around, as in JAX", "[reduce]") {
  for (bool simd : {true, false}) {
    zn::set_simd_enabled(simd);
    auto x = zn::full<std::int32_t>({40}, std::int32_t(1) << 30);
    std::uint32_t ref = 0;
    for (int i = 0; i < 40; ++i) ref += std::uint32_t(1) << 30;
    CHECK(zn::eval(zn::sum(x)).item() == std::int32_t(ref));
    auto y = zn::arange<std::int32_t>(1, 41);
    std::uint32_t p = 1;
    for (std::uint32_t i = 1; i <= 40; ++i) p *= i;
    CHECK(zn::eval(zn::prod(y)).item() == std::int32_t(p));
    auto z = zn::full<std::int64_t>({3}, std::numeric_limits<std::int64_t>::max());
    CHECK(zn::eval(zn::sum(z)).item() == std::numeric_limits<std::int64_t>::max() - 2);
  }
  zn::set_simd_enabled(true);
}

TEST_CASE("axes: one integer, a list, none, keepdims, negative", "[reduce]") {
  auto x = random_array<float>({4, 5, 6}, 21);
  zn::array<float> a = zn::sum(x, 1);
  zn::array<float> b = zn::sum(x, -2);
  zn::array<float> c = zn::sum(x, std::vector<int>{1});
  zn::array<float> d = zn::sum(x, {1}, true);
  zn::array<float> e = zn::sum(x, 1u);
  zn::array<float> f = zn::sum(x, std::size_t(1), true);
  zn::array<float> all = zn::sum(x);
  zn::array<float> all_keep = zn::sum(x, true);
  zn::array<float> none = zn::sum(x, {});
  CHECK(a.shape() == zn::shape{4, 6});
  CHECK(d.shape() == zn::shape{4, 1, 6});
  CHECK(f.shape() == zn::shape{4, 1, 6});
  CHECK(all.shape() == zn::shape{});
  CHECK(all_keep.shape() == zn::shape{1, 1, 1});
  CHECK(none.shape() == x.shape());
  CHECK(bitwise_equal(a, b));
  CHECK(bitwise_equal(a, c));
  CHECK(bitwise_equal(a, e));
  CHECK(std::equal(a.data(), a.data() + a.size(), d.data()));
  CHECK(std::equal(x.data(), x.data() + x.size(), none.data()));
  double ref = 0;
  for (std::size_t i = 0; i < x.size(); ++i) ref += x.data()[i];
  CHECK(all.item() == Approx(ref).epsilon(1e-5));
  CHECK(all_keep.item() == all.item());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      double s = 0;
      for (int k = 0; k < 5; ++k) s += x(i, k, j);
      CHECK(a(i, j) == Approx(s).epsilon(1e-5));
    }
  zn::array<std::int64_t> am = zn::argmax(x, -1, true);
  CHECK(am.shape() == zn::shape{4, 5, 1});
  zn::array<std::int64_t> am_all = zn::argmax(x, true);
  CHECK(am_all.shape() == zn::shape{1, 1, 1});
}

TEST_CASE("the compile-time axis rule", "[reduce]") {
  STATIC_REQUIRE(max_takes_int<zn::array<float>>);
  STATIC_REQUIRE_FALSE(max_takes_double<zn::array<float>>);
  STATIC_REQUIRE_FALSE(sum_takes_axes_and_double<zn::array<float>>);
  STATIC_REQUIRE_FALSE(argmax_takes_axes_list<zn::array<float>>);
  // max(x, 0) is a reduction over axis 0, not an elementwise max with 0.
  zn::array<float> x({2, 2}, {-1, -2, -3, -4});
  zn::array<float> m = zn::max(x, 0);
  CHECK(m.shape() == zn::shape{2});
  CHECK(m(0) == -1.f);
  CHECK(m(1) == -2.f);
}

TEST_CASE("large inputs: 1000003 elements, full and partial", "[reduce]") {
  for (rop op : all_ops) {
    DYNAMIC_SECTION(rop_name(op)) {
      auto x = op == rop::prod ? random_array<float>({1000003}, 31, 0.999, 1.001)
                               : random_array<float>({1000003}, 31);
      check_reduction(op, x, {0}, false);
      if (op != rop::prod) {
        auto y = random_array<float>({1009, 1031}, 32);  // more kept columns than one chunk
        check_reduction(op, y, {0}, false);
        check_reduction(op, y, {1}, true);
        auto z = random_array<float>({40009, 3}, 33);  // many rows, few columns
        check_reduction(op, z, {0}, false);
        auto w = random_array<float>({3, 70001}, 34);  // few outputs, long rows
        check_reduction(op, w, {1}, false);
      }
    }
  }
}

TEST_CASE("float sums are accurate: blocked pairwise summation", "[reduce]") {
  // A naive float loop over 2^22 + 3 copies of 0.1f stalls at 2^21 (0.1 is below half an ulp
  // there): 50% off. Blocked pairwise summation is off by at most (chain length) * eps: each
  // of the 4 batch accumulators of W lanes adds 8192 / (4 W) values of a block in sequence, then
  // a tree of depth 10 joins the blocks: 138 steps (1.6e-5) with AVX-512, 266 with AVX2.
  constexpr double W = double(xsimd::batch<float>::size);
  double const bound = (8192 / (4 * W) + 10) * std::numeric_limits<float>::epsilon();
  std::size_t n = (std::size_t(1) << 22) + 3;
  auto x = zn::full<float>({n}, 0.1f);
  double ref = double(0.1f) * double(n);
  float got = zn::eval(zn::sum(x)).item();
  CHECK(std::abs(got - ref) / ref < bound);
  // Along axis 0 (the kept-inner case): each column sums n / 4 values.
  auto y = zn::full<float>({n / 4, 4}, 0.1f);
  zn::array<float> cols = zn::sum(y, 0);
  for (int j = 0; j < 4; ++j) CHECK(std::abs(cols(j) - double(0.1f) * double(n / 4)) < bound * ref);
  // bfloat16 input accumulates in float: 3000 ones sum to 3000, then round once to bfloat16
  // (a bfloat16 accumulator would stall at 256).
  auto h = zn::full<zn::bfloat16>({3000}, zn::bfloat16(1.f));
  CHECK(float(zn::eval(zn::sum(h)).item()) == float(zn::bfloat16(3000.f)));
  CHECK(float(zn::eval(zn::mean(h)).item()) == 1.f);
}

TEST_CASE("reductions of non-contiguous views", "[reduce]") {
  auto x = random_array<float>({37, 129}, 41);
  auto t = zn::transpose(x);
  auto sl = zn::slice(x, {zn::range{1, 30, 3}, zn::range{zn::range::none, zn::range::none, -2}});
  auto x3 = random_array<float>({4, 5, 6}, 42);
  auto perm = zn::transpose(x3, {2, 0, 1});
  for (rop op : all_ops) {
    DYNAMIC_SECTION(rop_name(op)) {
      if (op == rop::prod) continue;
      check_all_axes(op, t);
      check_all_axes(op, sl);
      check_all_axes(op, perm);
    }
  }
}

TEST_CASE("reductions of elementwise and broadcast expressions", "[reduce]") {
  auto a = random_array<float>({37, 1}, 51);
  auto b = random_array<float>({129}, 52);
  auto c = random_array<float>({37, 129}, 53);
  for (rop op : all_ops) {
    DYNAMIC_SECTION(rop_name(op)) {
      if (op == rop::prod) continue;
      check_all_axes(op, a * b + c);
      check_all_axes(op, zn::broadcast_to(b, {5, 129}));
      check_all_axes(op, zn::abs(a) - b * 0.5f);
      check_all_axes(op, zn::transpose(c) * 2.f + a.shape()[0]);
    }
  }
  // A comparison: how many elements are positive.
  zn::array<std::int32_t> pos = zn::sum(c > 0.f, 1);
  for (int i = 0; i < 37; ++i) {
    int n = 0;
    for (int j = 0; j < 129; ++j) n += c(i, j) > 0.f;
    CHECK(pos(i) == n);
  }
}

TEST_CASE("reductions inside bigger expressions", "[reduce]") {
  auto x = random_array<float>({7, 13}, 61);
  zn::array<float> centered = x - zn::mean(x, 1, true);
  zn::array<float> softmax = zn::exp(x - zn::logsumexp(x, -1, true));
  zn::array<float> zscore = (x - zn::mean(x, 0)) / zn::std(x, 0);
  for (int i = 0; i < 7; ++i) {
    double m = 0, s = 0;
    for (int j = 0; j < 13; ++j) m += x(i, j) / 13.0;
    for (int j = 0; j < 13; ++j) {
      CHECK(centered(i, j) == Approx(x(i, j) - m).margin(1e-6));
      s += softmax(i, j);
    }
    CHECK(s == Approx(1.0).epsilon(1e-6));
  }
  for (int j = 0; j < 13; ++j) {
    double m = 0, v = 0;
    for (int i = 0; i < 7; ++i) m += x(i, j) / 7.0;
    for (int i = 0; i < 7; ++i) v += (x(i, j) - m) * (x(i, j) - m) / 7.0;
    for (int i = 0; i < 7; ++i)
      CHECK(zscore(i, j) == Approx((x(i, j) - m) / std::sqrt(v)).margin(1e-5));
  }
  // A reduction of a reduction, and assignment that rebinds.
  zn::array<float> total = zn::sum(zn::mean(x, 0));
  double ref = 0;
  for (std::size_t i = 0; i < x.size(); ++i) ref += x.data()[i] / 7.0;
  CHECK(total.item() == Approx(ref).epsilon(1e-5));
  zn::array<float> y = x;
  y = zn::sum(y, 0);
  CHECK(y.shape() == zn::shape{13});
  CHECK(x.shape() == zn::shape{7, 13});
  // An expression holding a reduction can be returned and evaluated later: nothing dangles.
  auto make = [] {
    auto local = zn::full<float>({3, 4}, 2.f);
    return zn::sum(local * local, 1) + 1.f;
  };
  auto e = make();
  zn::array<float> r = e;
  CHECK(r.shape() == zn::shape{3});
  CHECK(r(0) == 17.f);
}

TEST_CASE("var and std with ddof", "[reduce]") {
  auto x = random_array<float>({7, 13}, 71);
  for (int ddof : {0, 1, 2}) {
    check_reduction(rop::var, x, {0}, false, ddof);
    check_reduction(rop::var, x, {1}, true, ddof);
    check_reduction(rop::std_, x, {0, 1}, false, ddof);
  }
  zn::array<float> all = zn::var(x, false, 1);
  zn::array<float> all2 = zn::var(x, {0, 1}, false, 1);
  CHECK(bitwise_equal(all, all2));
  // n - ddof <= 0 divides by zero, as NumPy does.
  zn::array<float> one({1}, {3.f});
  CHECK(std::isnan(zn::eval(zn::var(one, false, 1)).item()));
  // Large offsets: the two-pass form keeps the variance of 1e4 + small noise.
  auto big = zn::eval(random_array<float>({1000}, 72) * 0.01f + 10000.f);
  check_reduction(rop::var, big, {0}, false);
}

TEST_CASE("max, min, argmax, argmin: NaN, ties, infinities", "[reduce]") {
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  zn::array<float> x({2, 5}, {1, nan, 3, nan, 3, -inf, -inf, -inf, -inf, -inf});
  zn::array<float> mx = zn::max(x, 1);
  CHECK(std::isnan(mx(0)));
  CHECK(mx(1) == -inf);
  zn::array<std::int64_t> am = zn::argmax(x, 1);
  CHECK(am(0) == 1);  // the first NaN
  CHECK(am(1) == 0);  // all equal to -inf: the first
  zn::array<std::int64_t> an = zn::argmin(x, 1);
  CHECK(an(0) == 1);
  CHECK(an(1) == 0);
  zn::array<float> ties({9}, {0, 5, 1, 5, 5, 2, 5, 0, 5});
  CHECK(zn::eval(zn::argmax(ties)).item() == 1);
  CHECK(zn::eval(zn::argmin(ties)).item() == 0);
  // Over a long row (SIMD lanes and blocks) the first occurrence still wins.
  auto y = zn::full<float>({10007}, 1.f);
  y(5000) = 7.f, y(9000) = 7.f, y(20) = -3.f, y(10006) = -3.f;
  CHECK(zn::eval(zn::argmax(y)).item() == 5000);
  CHECK(zn::eval(zn::argmin(y)).item() == 20);
  auto ints = zn::full<std::int32_t>({5000}, std::numeric_limits<std::int32_t>::min());
  CHECK(zn::eval(zn::argmax(ints)).item() == 0);
  ints(4000) = 0;
  CHECK(zn::eval(zn::argmax(ints)).item() == 4000);
  // argmax over a transposed view counts positions in the view's row-major order.
  zn::array<float> m({2, 3}, {0, 9, 2, 8, 1, 7});
  CHECK(zn::eval(zn::argmax(zn::transpose(m))).item() == 2);  // transpose: [0 8; 9 1; 2 7]
}

TEST_CASE("logsumexp is stable", "[reduce]") {
  float inf = INFINITY;
  zn::array<float> x({4, 2}, {1000, 1000, -1000, -1000, -inf, -inf, inf, 1});
  zn::array<float> r = zn::logsumexp(x, 1);
  CHECK(r(0) == Approx(1000 + std::log(2.0)));
  CHECK(r(1) == Approx(-1000 + std::log(2.0)));
  CHECK(r(2) == -inf);
  CHECK(r(3) == inf);
  zn::array<double> d({3}, {-750, -750, -751});
  double ref = -750 + std::log(2 + std::exp(-1.0));
  CHECK(zn::eval(zn::logsumexp(d)).item() == Approx(ref).epsilon(1e-14));
  // Over a matmul-free but barrier-containing child: the inner reduction runs once per pass.
  auto y = random_array<float>({5, 6}, 81);
  check_reduction(rop::logsumexp, zn::eval(y - zn::mean(y, 0)), {1}, false);
  zn::array<float> z = zn::logsumexp(y - zn::mean(y, 0), 1);
  zn::array<float> z2 = zn::logsumexp(zn::eval(y - zn::mean(y, 0)), 1);
  CHECK(bitwise_equal(z, z2));
}

TEST_CASE("rank 0 and empty arrays", "[reduce]") {
  zn::array<float> s(zn::shape{}, {2.5f});
  for (rop op : all_ops) check_reduction(op, s, {}, false);
  CHECK(zn::eval(zn::sum(s)).item() == 2.5f);
  CHECK(zn::eval(zn::argmax(s)).item() == 0);
  CHECK_THROWS_AS(zn::sum(s, 0), zn::shape_error);

  auto e = zn::zeros<float>({0});
  CHECK(zn::eval(zn::sum(e)).item() == 0.f);
  CHECK(zn::eval(zn::prod(e)).item() == 1.f);
  CHECK(std::isnan(zn::eval(zn::mean(e)).item()));
  CHECK(std::isnan(zn::eval(zn::var(e)).item()));
  CHECK(zn::eval(zn::logsumexp(e)).item() == -INFINITY);
  CHECK_THROWS_AS(zn::max(e), zn::value_error);
  CHECK_THROWS_AS(zn::min(e), zn::value_error);
  CHECK_THROWS_AS(zn::argmax(e), zn::value_error);
  CHECK_THROWS_AS(zn::argmin(e, 0), zn::value_error);
  CHECK_THROWS_WITH(zn::max(e), Catch::Contains("max") && Catch::Contains("(0,)"));

  auto e2 = zn::zeros<float>({3, 0});
  zn::array<float> s1 = zn::sum(e2, 1);
  CHECK(s1.shape() == zn::shape{3});
  CHECK(std::all_of(s1.data(), s1.data() + 3, [](float v) { return v == 0.f; }));
  zn::array<float> p1 = zn::prod(e2, 1, true);
  CHECK(p1.shape() == zn::shape{3, 1});
  CHECK(p1(2, 0) == 1.f);
  zn::array<float> m0 = zn::max(e2, 0);  // reduces 3 elements into each of 0 outputs
  CHECK(m0.shape() == zn::shape{0});
  CHECK_THROWS_AS(zn::max(e2, 1), zn::value_error);
  zn::array<std::int32_t> si = zn::sum(zn::zeros<std::int32_t>({0, 4}), 0);
  CHECK(si.shape() == zn::shape{4});
  CHECK(si(3) == 0);
}

TEST_CASE("reduction errors name the op and the shape", "[reduce]") {
  auto x = random_array<float>({2, 3}, 91);
  CHECK_THROWS_AS(zn::sum(x, 2), zn::shape_error);
  CHECK_THROWS_AS(zn::sum(x, -3), zn::shape_error);
  CHECK_THROWS_AS(zn::mean(x, {0, 0}), zn::shape_error);
  CHECK_THROWS_AS(zn::mean(x, {1, -1}), zn::shape_error);
  CHECK_THROWS_AS(zn::argmax(x, 5), zn::shape_error);
  CHECK_THROWS_AS(zn::var(x, {0, 7}), zn::shape_error);
  CHECK_THROWS_WITH(zn::sum(x, 2), Catch::Contains("sum") && Catch::Contains("(2, 3)") &&
                                       Catch::Contains("axis 2"));
  CHECK_THROWS_WITH(zn::prod(x, {1, -1}), Catch::Contains("prod") && Catch::Contains("repeated") &&
                                              Catch::Contains("(2, 3)"));
  CHECK_THROWS_WITH(zn::std(x, 3u), Catch::Contains("std") && Catch::Contains("(2, 3)"));
  CHECK_THROWS_WITH(zn::logsumexp(x, -9), Catch::Contains("logsumexp"));
}

TEST_CASE("SIMD and scalar paths agree", "[reduce]") {
  struct restore {
    ~restore() { zn::set_simd_enabled(true); }
  } guard;
  auto x = random_array<float>({37, 129}, 101);
  auto t = zn::transpose(x);
  auto xi = random_array<std::int32_t>({37, 129}, 102, -1000, 1000);
  auto xd = random_array<double>({3, 1001}, 103);
  for (rop op : all_ops) {
    DYNAMIC_SECTION(rop_name(op)) {
      for (auto const& axes : std::vector<std::vector<int>>{{0}, {1}, {0, 1}}) {
        if ((op == rop::argmax || op == rop::argmin) && axes.size() == 2) continue;
        zn::set_simd_enabled(true);
        auto a = run_op(op, x, axes, false), b = run_op(op, t, axes, false);
        auto c = run_op(op, xi, axes, false), d = run_op(op, xd, axes, false);
        zn::set_simd_enabled(false);
        auto a2 = run_op(op, x, axes, false), b2 = run_op(op, t, axes, false);
        auto c2 = run_op(op, xi, axes, false), d2 = run_op(op, xd, axes, false);
        zn::set_simd_enabled(true);
        bool exact = op == rop::max || op == rop::min || op == rop::argmax || op == rop::argmin;
        if (exact) {
          CHECK(bitwise_equal(a, a2));
          CHECK(bitwise_equal(b, b2));
          CHECK(bitwise_equal(d, d2));
        } else {
          CHECK(zn::allclose(a, a2, 1e-5, 1e-6));
          CHECK(zn::allclose(b, b2, 1e-5, 1e-6));
          CHECK(zn::allclose(d, d2, 1e-12, 1e-14));
        }
        if (op != rop::prod && is_exact_for_ints(op)) {
          CHECK(bitwise_equal(c, c2));
        } else if (op != rop::prod) {
          CHECK(zn::allclose(c, c2, 1e-5, 1e-5));
        }
      }
    }
  }
}

TEST_CASE("reductions are deterministic, across runs and thread counts", "[reduce]") {
  std::size_t threads = zn::get_num_threads();
  struct restore {
    std::size_t n;
    ~restore() { zn::set_num_threads(n); }
  } guard{threads};
  auto x = random_array<float>({1000003}, 111);
  auto y = random_array<float>({3, 200003}, 112);
  auto z = random_array<float>({200003, 3}, 113);
  auto w = random_array<float>({1001, 1003}, 114);
  auto all = [&] {
    return std::vector<zn::array<float>>{zn::sum(x * x),
                                         zn::sum(y, 1),
                                         zn::sum(y, 0),
                                         zn::sum(z, 0),
                                         zn::sum(z, 1),
                                         zn::sum(w, 0),
                                         zn::sum(w, 1),
                                         zn::mean(zn::transpose(w), 1),
                                         zn::logsumexp(x),
                                         zn::var(y, 1),
                                         zn::prod(y * 0.f + 1.f, 1)};
  };
  zn::set_num_threads(2);
  auto r1 = all(), r2 = all();
  zn::set_num_threads(1);
  auto r3 = all();
  for (std::size_t i = 0; i < r1.size(); ++i) {
    INFO("result " << i);
    CHECK(bitwise_equal(r1[i], r2[i]));
    // The summation order depends on the shapes only, so even the thread count changes nothing.
    CHECK(bitwise_equal(r1[i], r3[i]));
  }
  zn::set_num_threads(2);
  zn::array<std::int64_t> a1 = zn::argmax(x), a2 = zn::argmax(w, 0);
  zn::set_num_threads(1);
  zn::array<std::int64_t> b1 = zn::argmax(x), b2 = zn::argmax(w, 0);
  CHECK(bitwise_equal(a1, b1));
  CHECK(bitwise_equal(a2, b2));
}

TEST_CASE("a reduction of an elementwise expression allocates only its output", "[reduce]") {
  auto a = random_array<float>({1000003}, 121);
  auto b = random_array<float>({1000003}, 122);
  auto before = zn::cpu_memory_stats().allocations;
  zn::array<float> s = zn::sum(a * b);
  auto after = zn::cpu_memory_stats().allocations;
  CHECK(after - before == 1);
  double ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ref += double(a.data()[i]) * b.data()[i];
  CHECK(s.item() == Approx(ref).margin(1e-6 * double(a.size())));

  auto m = random_array<float>({1001, 1003}, 123);
  auto row = random_array<float>({1003}, 124);
  for (int axis : {0, 1}) {
    before = zn::cpu_memory_stats().allocations;
    zn::array<float> r = zn::mean(zn::exp(m) * row - 1.f, axis);
    after = zn::cpu_memory_stats().allocations;
    CHECK(after - before == 1);
  }
  before = zn::cpu_memory_stats().allocations;
  zn::array<std::int64_t> am = zn::argmax(m * row, 1);
  after = zn::cpu_memory_stats().allocations;
  CHECK(after - before == 1);
}

TEST_CASE("the reduction op catalogue is complete", "[reduce]") {
  std::size_t n = 0;
  auto check = [&]<class Op>(Op*) {
    INFO(Op::name);
    CHECK(!Op::name.empty());
    CHECK(!Op::cuda.empty());
    CHECK(!Op::cuda_identity.empty());
    CHECK(!Op::cuda_finalize.empty());
    if constexpr (zn::indexed_reduction<Op>) {
      using S = typename Op::template state<float>;
      S id{Op::template identity<float>(), -1}, a{2.f, 4}, b{2.f, 1};
      CHECK(Op::combine(id, a).index == 4);
      CHECK(Op::combine(a, b).index == 1);  // ties: the lower index
      CHECK(Op::finalize(id, 3) == 0);
    } else {
      float x = 0.75f;
      CHECK(Op::combine(Op::template identity<float>(), x) == x);
      CHECK(Op::combine(x, Op::template identity<float>()) == x);
      double y = -2.5;
      CHECK(Op::combine(Op::template identity<double>(), y) == y);
      // hreduce of a batch equals a scalar fold of its lanes.
      using B = xsimd::batch<double>;
      B bx = Op::simd(B(Op::template identity<double>()), B(y));
      double fold = y;
      for (std::size_t l = 1; l < B::size; ++l) fold = Op::combine(fold, y);
      CHECK(Op::hreduce(bx) == Approx(fold).epsilon(1e-12));
    }
    ++n;
  };
  [&]<class... Ops>(zn::type_list<Ops...>) { (check((Ops*)nullptr), ...); }(zn::reduction_ops{});
  CHECK(n == 8);
}

TEST_CASE("a reduction over many arrays runs on several threads as on one", "[reduce]") {
  // Six leaves: the evaluator each thread copies is larger than the copy's stack buffer.
  std::size_t threads = zn::get_num_threads();
  struct restore {
    std::size_t n;
    ~restore() { zn::set_num_threads(n); }
  } guard{threads};
  std::vector<zn::array<float>> x;
  for (unsigned k = 0; k < 6; ++k) x.push_back(random_array<float>({7, 100003}, 131 + k));
  auto expr = [&] { return x[0] * x[1] + x[2] * x[3] - x[4] * x[5]; };
  zn::set_num_threads(2);
  zn::array<float> rows = zn::sum(expr(), 1), all = zn::sum(expr());
  zn::set_num_threads(1);
  zn::array<float> rows1 = zn::sum(expr(), 1), all1 = zn::sum(expr());
  CHECK(bitwise_equal(rows, rows1));
  CHECK(bitwise_equal(all, all1));
  for (std::size_t i = 0; i < 7; ++i) {
    double ref = 0;
    for (std::size_t j = 0; j < 100003; ++j)
      ref += double(x[0](i, j)) * x[1](i, j) + double(x[2](i, j)) * x[3](i, j) -
             double(x[4](i, j)) * x[5](i, j);
    CHECK(std::abs(rows(i) - ref) < 1e-3 * (1 + std::abs(ref)));
  }
}
