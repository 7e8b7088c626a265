// Element types: JAX's promotion rules (weak C++ scalars), integer and bool ops, casts, and the
// 16-bit storage floats bfloat16 / float16 (conversion, rounding, arithmetic in float).
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <vector>

namespace zn = zenith;
using std::int32_t;
using std::int64_t;

namespace {

template <class E, class T>
constexpr bool gives = std::is_same_v<zn::value_t<E>, T>;

struct simd_guard {
  explicit simd_guard(bool on) { zn::set_simd_enabled(on); }
  ~simd_guard() { zn::set_simd_enabled(true); }
};

// Deterministic integers in [lo, hi].
template <class T>
zn::array<T> int_array(std::size_t n, long lo, long hi, std::uint64_t seed) {
  auto a = zn::array<T>::empty({n});
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    a.data()[i] = T(lo + long((s >> 33) % std::uint64_t(hi - lo + 1)));
  }
  return a;
}

}  // namespace

TEST_CASE("type promotion follows JAX, with weak C++ scalars", "[dtype]") {
  zn::array<float> f({2}, {1, 2});
  zn::array<double> d({2}, {1, 2});
  zn::array<int32_t> i({2}, {1, 2});
  zn::array<int64_t> l({2}, {1, 2});
  zn::array<bool> b({2}, {true, false});
  zn::array<zn::bfloat16> bf({2}, {1.f, 2.f});
  zn::array<zn::float16> hf({2}, {1.f, 2.f});

  // Arrays: the join in the lattice bool < int32 < int64 < {bf16, f16} < f32 < f64.
  STATIC_REQUIRE(gives<decltype(f + d), double>);
  STATIC_REQUIRE(gives<decltype(d * f), double>);
  STATIC_REQUIRE(gives<decltype(i + l), int64_t>);
  STATIC_REQUIRE(gives<decltype(i + f), float>);
  STATIC_REQUIRE(gives<decltype(l + f), float>);
  STATIC_REQUIRE(gives<decltype(b + i), int32_t>);
  STATIC_REQUIRE(gives<decltype(b * f), float>);
  STATIC_REQUIRE(gives<decltype(bf + bf), zn::bfloat16>);
  STATIC_REQUIRE(gives<decltype(bf + hf), float>);
  STATIC_REQUIRE(gives<decltype(bf + f), float>);
  STATIC_REQUIRE(gives<decltype(hf + d), double>);
  STATIC_REQUIRE(gives<decltype(i + bf), zn::bfloat16>);
  STATIC_REQUIRE(gives<decltype(zn::maximum(i, f)), float>);
  STATIC_REQUIRE(gives<decltype(zn::where(f > 0, i, d)), double>);

  // Weak scalars take the array's type...
  STATIC_REQUIRE(gives<decltype(f * 2.0), float>);
  STATIC_REQUIRE(gives<decltype(2.0 * f), float>);
  STATIC_REQUIRE(gives<decltype(f + 1), float>);
  STATIC_REQUIRE(gives<decltype(i + 1), int32_t>);
  STATIC_REQUIRE(gives<decltype(i + int64_t(1)), int32_t>);
  STATIC_REQUIRE(gives<decltype(bf * 2.0), zn::bfloat16>);
  STATIC_REQUIRE(gives<decltype(hf - 1.0f), zn::float16>);
  STATIC_REQUIRE(gives<decltype(d + 1.0f), double>);
  // ...except a floating scalar with an integer or bool array gives float32, and an integer
  // scalar with a bool array int32.
  STATIC_REQUIRE(gives<decltype(i * 2.5), float>);
  STATIC_REQUIRE(gives<decltype(l * 2.5), float>);
  STATIC_REQUIRE(gives<decltype(b * 2.5), float>);
  STATIC_REQUIRE(gives<decltype(b + 1), int32_t>);
  STATIC_REQUIRE(gives<decltype(i * zn::bfloat16(2.5f)), float>);  // a floating scalar, too
  STATIC_REQUIRE(gives<decltype(zn::clip(i, 0.5, 1.5)), float>);
  STATIC_REQUIRE(gives<decltype(zn::where(b, i, 2.5)), float>);
  STATIC_REQUIRE(gives<decltype(zn::where(b, i, 2)), int32_t>);
  STATIC_REQUIRE(gives<decltype(zn::where(b, 1.0, 0.0)), float>);

  // Floating-only ops turn ints and bools into float32 (jnp.exp(int) is float32).
  STATIC_REQUIRE(gives<decltype(zn::exp(i)), float>);
  STATIC_REQUIRE(gives<decltype(zn::sqrt(l)), float>);
  STATIC_REQUIRE(gives<decltype(zn::sin(b)), float>);
  STATIC_REQUIRE(gives<decltype(i / i), float>);
  STATIC_REQUIRE(gives<decltype(i / 2), float>);
  STATIC_REQUIRE(gives<decltype(zn::pow(i, 2)), float>);
  STATIC_REQUIRE(gives<decltype(zn::exp(d)), double>);
  STATIC_REQUIRE(gives<decltype(zn::exp(bf)), zn::bfloat16>);
  // Type-keeping ops keep ints.
  STATIC_REQUIRE(gives<decltype(zn::abs(i)), int32_t>);
  STATIC_REQUIRE(gives<decltype(-l), int64_t>);
  STATIC_REQUIRE(gives<decltype(zn::square(i)), int32_t>);
  STATIC_REQUIRE(gives<decltype(zn::maximum(i, 0)), int32_t>);
  // Comparisons give bool; cast gives its target.
  STATIC_REQUIRE(gives<decltype(f < d), bool>);
  STATIC_REQUIRE(gives<decltype(i == 1), bool>);
  STATIC_REQUIRE(gives<decltype(i < 2.5), bool>);
  STATIC_REQUIRE(gives<decltype(zn::cast<int64_t>(f)), int64_t>);
  STATIC_REQUIRE(gives<decltype(zn::cast<zn::float16>(d)), zn::float16>);

  // The runtime values follow: 2.5 is not truncated to int, 1 << 24 + 1 stays exact in int32.
  zn::array<float> r = i * 2.5;
  CHECK(r(0) == 2.5f);
  CHECK(r(1) == 5.f);
  zn::array<int32_t> big = i + (1 << 24);
  CHECK(big(0) == (1 << 24) + 1);
  zn::array<double> fd = f + d * 1e-10;  // computed in double
  CHECK(fd(0) == 1.0 + 1e-10);
  // A weak double scalar with a float array is rounded to float first.
  zn::array<float> third = f * (1.0 / 3.0);
  CHECK(third(1) == 2.f * float(1.0 / 3.0));
  // Integer comparison with a float scalar compares in float: 1 < 1.5.
  zn::array<bool> lt = i < 1.5;
  CHECK(lt(0));
  CHECK_FALSE(lt(1));
  zn::array<float> w = zn::where(b, 1.0, 0.0);
  CHECK(w(0) == 1.f);
  CHECK(w(1) == 0.f);
}

TEST_CASE("integer ops against an int64 reference, both paths", "[dtype]") {
  auto run = []<class T>(T) {
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(100003)}) {
      auto a = int_array<T>(n, -1000, 1000, 1), b = int_array<T>(n, -1000, 1000, 2);
      b.data()[0] = a.data()[0];  // one equal pair at least
      auto check = [&](char const* name, auto e, auto ref) {
        using R = zn::value_t<decltype(e)>;
        for (bool simd : {true, false}) {
          simd_guard g(simd);
          zn::array<R> got = e;
          std::size_t bad = 0, first = 0;
          for (std::size_t k = 0; k < n; ++k) {
            auto want = ref(int64_t(a.data()[k]), int64_t(b.data()[k]));
            if (!(double(got.data()[k]) == double(want)) && bad++ == 0) first = k;
          }
          INFO(name << " n=" << n << (simd ? " simd" : " scalar") << " first bad " << first);
          CHECK(bad == 0);
        }
      };
      using L = int64_t;
      check("add", a + b, [](L x, L y) { return x + y; });
      check("sub", a - b, [](L x, L y) { return x - y; });
      check("mul", a * b, [](L x, L y) { return x * y; });
      check("neg", -a, [](L x, L) { return -x; });
      check("abs", zn::abs(a), [](L x, L) { return x < 0 ? -x : x; });
      check("sign", zn::sign(a), [](L x, L) { return L(x > 0) - L(x < 0); });
      check("square", zn::square(a), [](L x, L) { return x * x; });
      check("relu", zn::relu(a), [](L x, L) { return x > 0 ? x : 0; });
      check("maximum", zn::maximum(a, b), [](L x, L y) { return std::max(x, y); });
      check("minimum", zn::minimum(a, b), [](L x, L y) { return std::min(x, y); });
      check("clip", zn::clip(a, -300, 400),
            [](L x, L) { return std::min<L>(std::max<L>(x, -300), 400); });
      check("where", zn::where(a > b, a, b * 3), [](L x, L y) { return x > y ? x : y * 3; });
      check("scalar", 7 - a * 2 + 1, [](L x, L) { return 7 - x * 2 + 1; });
      check("==", zn::cast<T>(a == b), [](L x, L y) { return L(x == y); });
      check("!=", zn::cast<T>(a != b), [](L x, L y) { return L(x != y); });
      check("<", zn::cast<T>(a < b), [](L x, L y) { return L(x < y); });
      check(">=", zn::cast<T>(a >= b), [](L x, L y) { return L(x >= y); });
      check("bool <", a < b, [](L x, L y) { return x < y; });
      // True division and floating ops give float32.
      check("div", a / (zn::abs(b) + 1),
            [](L x, L y) { return double(float(x) / float(std::abs(y) + 1)); });
      check("* 2.5", a * 2.5, [](L x, L) { return double(float(x) * 2.5f); });
      check("cast<double>", zn::cast<double>(a), [](L x, L) { return double(x); });
      // An integer comparison choosing between floats of the same width (an int32 mask used
      // for float lanes), and an integer mask cast to float.
      using F = std::conditional_t<sizeof(T) == 4, float, double>;
      check("where float", zn::where(a > b, zn::cast<F>(a) * F(0.5), F(2)),
            [](L x, L y) { return x > y ? double(F(x) * F(0.5)) : 2.0; });
      check("cast mask", zn::cast<F>(a <= b) * F(3), [](L x, L y) { return x <= y ? 3.0 : 0.0; });
    }
    // The int32 path is vectorized, mixed with floats of the same width too (where integer
    // batches are available: not in unoptimised AVX-512 builds, see evaluator.hpp).
    if constexpr (std::is_same_v<T, int32_t> && zn::simd_type_v<T>) {
      zn::array<T> a({1}, {1});
      STATIC_REQUIRE(zn::evaluator_t<decltype(a * a + 1)>::template vectorizable<T>());
      using W = decltype(zn::where(a > 0, zn::cast<float>(a), 2.f));
      STATIC_REQUIRE(zn::evaluator_t<W>::template vectorizable<float>());
    }
  };
  run(int32_t{});
  run(int64_t{});
}

TEST_CASE("casts convert like static_cast (bool: nonzero)", "[dtype]") {
  std::vector<double> v;
  for (int k = -40; k <= 40; ++k) v.push_back(k * 0.37);
  v.push_back(-0.0);
  v.push_back(0.0);
  v.push_back(std::numeric_limits<double>::quiet_NaN());
  v.push_back(1e30);
  v.push_back(16777217.0);  // not representable in float: rounds to even (16777216)
  zn::array<double> d({v.size()}, v);
  for (bool simd : {true, false}) {
    simd_guard g(simd);
    zn::array<float> f = zn::cast<float>(d);
    zn::array<bool> nz = zn::cast<bool>(d);
    zn::array<float> nzf = zn::cast<float>(zn::cast<bool>(d));
    zn::array<double> back = zn::cast<double>(f);
    for (std::size_t k = 0; k < v.size(); ++k) {
      INFO(v[k]);
      if (std::isnan(v[k])) {
        CHECK(std::isnan(f(k)));
      } else {
        CHECK(f(k) == float(v[k]));
        CHECK(back(k) == double(float(v[k])));
      }
      CHECK(nz(k) == (v[k] != 0));
      CHECK(nzf(k) == (v[k] != 0 ? 1.f : 0.f));
    }
    // float -> int truncates toward zero (finite, in-range values only).
    std::size_t n = 81;
    auto fin = zn::slice(d, 0, 0, std::int64_t(n));
    zn::array<int32_t> i32 = zn::cast<int32_t>(zn::cast<float>(fin));
    zn::array<int64_t> i64 = zn::cast<int64_t>(fin);
    zn::array<float> fi = zn::cast<float>(i32);
    for (std::size_t k = 0; k < n; ++k) {
      CHECK(i32(k) == int32_t(float(v[k])));
      CHECK(i64(k) == int64_t(v[k]));
      CHECK(fi(k) == float(int32_t(float(v[k]))));
    }
  }
  // bool arrays: cast and where read them (scalar path).
  zn::array<bool> m({3}, {true, false, true});
  zn::array<int32_t> mi = zn::cast<int32_t>(m);
  CHECK(mi(0) == 1);
  CHECK(mi(1) == 0);
  zn::array<float> sel = zn::where(m, 1.5f, zn::array<float>({3}, {7, 8, 9}));
  CHECK(sel(0) == 1.5f);
  CHECK(sel(1) == 8.f);
  // cast<bool> of an int array and a bool array as a where condition from floats.
  zn::array<float> x({4}, {0.f, -2.f, 0.5f, -0.f});
  zn::array<float> c = zn::where(x, 1.f, 0.f);  // a float condition means "nonzero"
  CHECK(c(0) == 0.f);
  CHECK(c(1) == 1.f);
  CHECK(c(2) == 1.f);
  CHECK(c(3) == 0.f);
}

namespace {

// Independent references for the 16-bit floats: decode from the bit fields, encode by searching
// the sorted table of finite values for the nearest one (ties to the even encoding).
double bf16_value(std::uint16_t b) {
  int sign = b >> 15, e = (b >> 7) & 0xff, m = b & 0x7f;
  double mag = e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134);
  if (e == 0xff) mag = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  return sign ? -mag : mag;
}
double f16_value(std::uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  if (e == 0x1f) mag = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  return sign ? -mag : mag;
}

// The finite non-negative values of a 16-bit format, indexed by encoding 0 .. max_bits.
std::vector<double> value_table(double (*value)(std::uint16_t), std::uint16_t max_bits) {
  std::vector<double> t(std::size_t(max_bits) + 1);
  for (std::size_t b = 0; b < t.size(); ++b) t[b] = value(std::uint16_t(b));
  return t;
}

// Nearest encoding of x by search in the table, ties to the even encoding; from halfway past
// the largest finite value on, inf (inf_bits).
std::uint16_t encode_ref(double x, std::vector<double> const& table, std::uint16_t inf_bits) {
  std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::abs(x);
  std::size_t top = table.size() - 1;
  if (a >= table[top] + (table[top] - table[top - 1]) / 2)
    return std::uint16_t(sign | inf_bits);  // the largest encoding is odd: the tie goes up
  // lo: the largest encoding whose value is <= a.
  std::size_t lo = std::size_t(std::upper_bound(table.begin(), table.end(), a) - table.begin()) - 1;
  std::size_t best = lo;
  if (lo < top) {
    double dl = a - table[lo], dh = table[lo + 1] - a;
    if (dh < dl || (dh == dl && (lo & 1))) best = lo + 1;
  }
  return std::uint16_t(sign | best);
}

std::vector<float> probe_floats() {
  std::vector<float> v;
  // Random bit patterns over the whole float range, plus a dense band near 1.
  std::uint32_t s = 12345;
  for (int k = 0; k < 200000; ++k) {
    s = s * 1664525u + 1013904223u;
    v.push_back(std::bit_cast<float>(s));
    v.push_back(1.0f + float(k) * 1e-6f);
  }
  for (float x : {0.f,
                  -0.f,
                  1.f,
                  -1.f,
                  65504.f,
                  65519.f,
                  65520.f,
                  65536.f,
                  1e-8f,
                  6e-8f,
                  5.96e-8f,
                  2.98e-8f,
                  3e-8f,
                  6.1e-5f,
                  6.103515625e-05f,
                  3.0517578125e-05f,
                  std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(),
                  INFINITY,
                  -INFINITY})
    v.push_back(x);
  return v;
}

}  // namespace

TEST_CASE("bfloat16 converts with round to nearest even, inf and NaN", "[dtype]") {
  // Every encoding round-trips through float (NaN stays NaN).
  std::size_t bad = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    auto h = zn::bfloat16::from_bits(std::uint16_t(b));
    float f = float(h);
    double want = bf16_value(std::uint16_t(b));
    bool ok = std::isnan(want) ? std::isnan(f) && std::isnan(float(zn::bfloat16(f)))
                               : double(f) == want && zn::bfloat16(f).bits == b;
    if (!ok && bad++ == 0) UNSCOPED_INFO("first bad encoding " << b);
  }
  CHECK(bad == 0);
  // Rounding: halfway cases go to the even neighbour.
  CHECK(zn::bfloat16(1.0f + 0x1p-8f).bits == zn::bfloat16(1.0f).bits);
  CHECK(float(zn::bfloat16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(float(zn::bfloat16(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f);
  CHECK(std::isinf(float(zn::bfloat16(std::numeric_limits<float>::max()))));
  CHECK(float(zn::bfloat16(-INFINITY)) == -INFINITY);
  CHECK(std::signbit(float(zn::bfloat16(-0.0f))));
  auto table = value_table(bf16_value, 0x7f7f);
  bad = 0;
  for (float x : probe_floats()) {
    if (std::isnan(x)) {
      bad += !std::isnan(float(zn::bfloat16(x)));
      continue;
    }
    std::uint16_t want = std::isinf(x) ? std::uint16_t(std::signbit(x) ? 0xff80 : 0x7f80)
                                       : encode_ref(x, table, 0x7f80);
    if (zn::bfloat16(x).bits != want && bad++ == 0) UNSCOPED_INFO("first bad float " << x);
  }
  CHECK(bad == 0);
}

TEST_CASE("float16 converts with round to nearest even, subnormals, inf and NaN", "[dtype]") {
  std::size_t bad = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    auto h = zn::float16::from_bits(std::uint16_t(b));
    float f = float(h);
    double want = f16_value(std::uint16_t(b));
    bool ok = std::isnan(want) ? std::isnan(f) && std::isnan(float(zn::float16(f)))
                               : double(f) == want && zn::float16(f).bits == b;
    if (!ok && bad++ == 0) UNSCOPED_INFO("first bad encoding " << b);
  }
  CHECK(bad == 0);
  CHECK(float(zn::float16(65504.f)) == 65504.f);
  CHECK(float(zn::float16(65519.f)) == 65504.f);
  CHECK(std::isinf(float(zn::float16(65520.f))));       // the halfway point rounds to even: inf
  CHECK(float(zn::float16(0x1p-24f)) == 0x1p-24f);      // smallest subnormal
  CHECK(float(zn::float16(0x1p-25f)) == 0.f);           // halfway to zero: even (zero)
  CHECK(float(zn::float16(0x1.8p-24f)) == 0x1p-23f);    // 1.5 ulp: even (2 ulp)
  CHECK(float(zn::float16(0x1p-14f)) == 0x1p-14f);      // smallest normal
  CHECK(float(zn::float16(0x1.ffcp-15f)) == 0x1p-14f);  // largest subnormal rounds up
  CHECK(std::signbit(float(zn::float16(-1e-30f))));
  auto table = value_table(f16_value, 0x7bff);
  bad = 0;
  for (float x : probe_floats()) {
    if (std::isnan(x)) {
      bad += !std::isnan(float(zn::float16(x)));
      continue;
    }
    std::uint16_t want = std::isinf(x) ? std::uint16_t(std::signbit(x) ? 0xfc00 : 0x7c00)
                                       : encode_ref(x, table, 0x7c00);
    if (zn::float16(x).bits != want && bad++ == 0) UNSCOPED_INFO("first bad float " << x);
  }
  CHECK(bad == 0);
}

TEST_CASE("16-bit float arrays compute in float and round on store", "[dtype]") {
  auto run = []<class H>(H) {
    std::size_t n = 1003;
    std::vector<H> av(n), bv(n);
    for (std::size_t k = 0; k < n; ++k) {
      av[k] = H(float(k) * 0.0173f - 5.f);
      bv[k] = H(2.f - float(k % 17) * 0.31f);
    }
    zn::array<H> a({n}, av), b({n}, bv);
    for (bool simd : {true, false}) {
      simd_guard g(simd);
      zn::array<H> prod = a * b, sum = a + 1.5, ex = zn::exp(a), neg = -a;
      // a * 1.001f is typed H (the weak scalar is rounded to H), but inside the fused chain
      // it is computed in float and only the stored result is rounded: here, to float.
      zn::array<float> wide = a * 1.001f + zn::cast<float>(b);
      double scale = double(float(H(1.001f)));
      zn::array<H> m = zn::maximum(a, b);
      zn::array<float> rounded = zn::cast<H>(zn::cast<float>(a) * 1.001f);
      zn::array<double> dd = zn::cast<double>(a) / 3.0;
      for (std::size_t k = 0; k < n; ++k) {
        float x = float(av[k]), y = float(bv[k]);
        INFO("k = " << k << (simd ? " simd" : " scalar"));
        REQUIRE(prod(k).bits == H(x * y).bits);
        REQUIRE(sum(k).bits == H(x + 1.5f).bits);
        REQUIRE(neg(k).bits == H(-x).bits);
        REQUIRE(m(k).bits == H(std::max(x, y)).bits);
        // exp: float result within float tolerance, then rounded: at most one unit apart.
        float e = float(ex(k)), want = float(H(float(std::exp(double(x)))));
        if (std::isinf(want))
          REQUIRE(e == want);
        else
          REQUIRE(std::abs(e - want) <=
                  std::abs(want) * (std::is_same_v<H, zn::bfloat16> ? 0x1p-7f : 0x1p-10f));
        REQUIRE(wide(k) == Approx(double(x) * scale + y).epsilon(1e-6).margin(1e-6));
        REQUIRE(rounded(k) == float(H(x * 1.001f)));  // cast<H> rounds inside an expression
        REQUIRE(dd(k) == Approx(double(x) / 3.0).epsilon(1e-15));
      }
    }
    // Printing shows the float values.
    zn::array<H> p({2}, {H(1.5f), H(-2.f)});
    std::ostringstream os;
    os << p;
    CHECK(os.str() == "[1.5, -2]");
  };
  run(zn::bfloat16{});
  run(zn::float16{});
}
