// zenith::tensor<T, N...>: fixed-size tensors with the shape in the type and inline storage.
// Every result is checked against a plain double loop written out here.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <sstream>
#include <type_traits>

#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

namespace zn = zenith;

// ---------------------------------------------------------------------------------------------
// A global operator new that counts, per thread, so a test can prove a code path never touches
// the heap. It only counts and forwards to malloc/free: other tests see ordinary new/delete.
// (The one replacement of the global operator new in the test binary.)
namespace {
thread_local std::size_t tl_news = 0;
void* counted_alloc(std::size_t n) {
  ++tl_news;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* counted_alloc_aligned(std::size_t n, std::align_val_t al) {
  ++tl_news;
  std::size_t a = std::size_t(al);
  if (a < sizeof(void*)) a = sizeof(void*);
  std::size_t sz = (n + a - 1) / a * a;
  if (void* p = std::aligned_alloc(a, sz ? sz : a)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc_aligned(n, a); }
void* operator new(std::size_t n, std::nothrow_t const&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::nothrow_t const&) noexcept {
  return operator new(n, std::nothrow);
}
void* operator new(std::size_t n, std::align_val_t a, std::nothrow_t const&) noexcept {
  try {
    return counted_alloc_aligned(n, a);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::align_val_t a, std::nothrow_t const&) noexcept {
  return operator new(n, a, std::nothrow);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::nothrow_t const&) noexcept { std::free(p); }
void operator delete[](void* p, std::nothrow_t const&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, std::nothrow_t const&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, std::nothrow_t const&) noexcept { std::free(p); }

namespace {

// Counts operator new calls and zenith allocator allocations over a scope.
struct heap_watch {
  std::size_t news = tl_news;
  std::size_t zn_allocs = zn::cpu_memory_stats().allocations;
  std::size_t new_calls() const { return tl_news - news; }
  std::size_t zenith_allocs() const { return zn::cpu_memory_stats().allocations - zn_allocs; }
};

// Equal up to rounding: the compiler may fuse a * b + c into one FMA on one side only, and
// xsimd's exp / sin may differ from libm's in the last place.
Approx near(double v) { return Approx(v).epsilon(1e-14); }

// Deterministic values in [-1, 1) that are not round numbers.
double val(std::size_t i, double seed = 0.0) { return std::sin(1.37 * double(i) + 0.41 + seed); }

template <class T, std::size_t... N>
zn::tensor<T, N...> filled(double seed = 0.0) {
  zn::tensor<T, N...> t;
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = T(val(i, seed));
  return t;
}

// A user scalar type: what issue 3's dual numbers look like to the tensor.
struct wrap {
  double v = 0;
  wrap() = default;
  wrap(double x) : v(x) {}  // NOLINT
  friend wrap operator+(wrap a, wrap b) { return a.v + b.v; }
  friend wrap operator-(wrap a, wrap b) { return a.v - b.v; }
  friend wrap operator*(wrap a, wrap b) { return a.v * b.v; }
  friend wrap operator/(wrap a, wrap b) { return a.v / b.v; }
  friend bool operator>(wrap a, wrap b) { return a.v > b.v; }
  friend bool operator!=(wrap a, wrap b) { return a.v != b.v; }
  friend wrap sqrt(wrap a) { return std::sqrt(a.v); }
  friend wrap sin(wrap a) { return std::sin(a.v); }
  friend std::ostream& operator<<(std::ostream& os, wrap a) { return os << "w" << a.v; }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
TEST_CASE("tensor: type, construction and element access", "[tensor]") {
  using T23 = zn::tensor<double, 2, 3>;
  static_assert(std::is_same_v<T23::value_type, double>);
  static_assert(T23::fixed && T23::dense);
  static_assert(std::is_same_v<T23::static_shape, zn::fixed_shape<2, 3>>);
  static_assert(zn::fixed_expression<T23> && zn::expression<T23>);
  static_assert(sizeof(T23) == 6 * sizeof(double));  // inline storage, nothing else
  static_assert(sizeof(zn::tensor<float, 3>) == 3 * sizeof(float));
  // Aligned to the largest power of two up to 64 bytes that divides the elements' size (vector
  // loads and stores never straddle a cache line), and never larger for it.
  static_assert(alignof(zn::tensor<double, 8>) == 64 && sizeof(zn::tensor<double, 8>) == 64);
  static_assert(alignof(zn::tensor<double, 2, 16>) == 64);
  static_assert(alignof(zn::tensor<double, 4>) == 32 && alignof(zn::tensor<double, 6>) == 16);
  static_assert(alignof(zn::tensor<double, 3>) == 8 && alignof(zn::tensor<double>) == 8);
  static_assert(alignof(zn::tensor<float, 16>) == 64 && alignof(zn::tensor<float, 3>) == 4);
  static_assert(alignof(zn::tensor<float, 6>) == 8);
  static_assert(T23::size() == 6 && T23::ndim() == 2);
  static_assert(std::is_trivially_copyable_v<T23>);

  zn::tensor<double, 3> q{0.1, 0.2, 0.3};
  CHECK(q.shape() == zn::shape{3});
  CHECK(q(0) == 0.1);
  CHECK(q(2) == 0.3);
  CHECK(q[1] == 0.2);

  T23 m{1, 2, 3, 4, 5, 6};  // row-major
  REQUIRE(m.shape() == zn::shape{2, 3});
  CHECK(m.size() == 6);
  CHECK(m.ndim() == 2);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      CHECK(m(i, j) == double(i * 3 + j + 1));
      CHECK(m.data()[i * 3 + j] == double(i * 3 + j + 1));
    }
  m(1, 2) = 42;  // write access
  CHECK(m[5] == 42);
  CHECK(m.at(5) == 42);

  T23 z;  // zeros
  for (double x : z) CHECK(x == 0);
  auto o = zn::tensor<float, 2, 2>::ones();
  for (float x : o) CHECK(x == 1.0f);
  auto f = zn::tensor<int, 4>::full(7);
  for (int x : f) CHECK(x == 7);
  auto id = zn::tensor<double, 3, 3>::identity();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) CHECK(id(i, j) == (i == j ? 1.0 : 0.0));

  zn::tensor<double, 2, 2> from_array(std::array<double, 4>{4, 3, 2, 1});
  CHECK(from_array(0, 1) == 3);

  constexpr zn::tensor<int, 2> ct{5, 6};  // usable in constant expressions
  static_assert(ct[0] == 5 && ct(1) == 6);

  // Copies are deep (inline storage): changing one leaves the other.
  auto m2 = m;
  m2(0, 0) = -1;
  CHECK(m(0, 0) == 1);

  // Conversions that must not happen implicitly.
  static_assert(!std::is_convertible_v<double, zn::tensor<double, 3>>);
  static_assert(!std::is_convertible_v<zn::tensor<double, 3>, double>);
  static_assert(!std::is_convertible_v<zn::array<double>, zn::tensor<double, 3>>);
  static_assert(std::is_constructible_v<zn::tensor<double, 3>, zn::array<double>>);
}

TEST_CASE("tensor: rank 0 holds one value and converts to it", "[tensor]") {
  zn::tensor<double> s = 2.5;
  static_assert(std::is_convertible_v<zn::tensor<double>, double>);
  static_assert(zn::tensor<double>::ndim() == 0 && zn::tensor<double>::size() == 1);
  CHECK(s.shape() == zn::shape{});
  double d = s;
  CHECK(d == 2.5);
  CHECK(s() == 2.5);
  zn::tensor<double> t = s * 2.0 + 1.0;  // rank 0 expressions unroll to one statement
  CHECK(double(t) == 6.0);
  // A rank-0 expression converts too, without first being assigned to a tensor.
  zn::tensor<double, 3> a{1, 2, 3}, b{4, 5, 6};
  double total = zn::sum(a) + zn::sum(b);
  CHECK(total == 21.0);
  float f = zn::sum(a * b) * 0.5;
  CHECK(f == 16.0f);
  static_assert(std::is_convertible_v<decltype(s * 2.0), double>);
  static_assert(!std::is_convertible_v<decltype(a * 2.0), double>);  // rank 1: no value
  // A rank-0 tensor broadcasts against any fixed shape.
  zn::tensor<double, 2, 2> m{1, 2, 3, 4};
  zn::tensor<double, 2, 2> r = m * s;
  for (std::size_t i = 0; i < 4; ++i) CHECK(r[i] == m[i] * 2.5);
}

TEST_CASE("tensor: elementwise expressions match plain loops", "[tensor]") {
  SECTION("sin(q) * 2 + q") {
    zn::tensor<double, 3> q{0.1, 0.2, 0.3};
    zn::tensor<double, 3> r = zn::sin(q) * 2.0 + q;
    for (std::size_t i = 0; i < 3; ++i) CHECK(r[i] == near(std::sin(q[i]) * 2.0 + q[i]));
  }
  SECTION("a longer chain on a 4x5 tensor") {
    auto a = filled<double, 4, 5>(0.0);
    auto b = filled<double, 4, 5>(1.0);
    zn::tensor<double, 4, 5> r = zn::exp(a) * b - zn::tanh(a / 3.0) + zn::square(b) * 0.5;
    for (std::size_t i = 0; i < 20; ++i) {
      double ref = std::exp(a[i]) * b[i] - std::tanh(a[i] / 3.0) + b[i] * b[i] * 0.5;
      CHECK(r[i] == Approx(ref).epsilon(1e-14));
    }
    zn::tensor<double, 4, 5> w = zn::where(a > b, a, zn::maximum(b, 0.25));
    for (std::size_t i = 0; i < 20; ++i) CHECK(w[i] == (a[i] > b[i] ? a[i] : std::max(b[i], 0.25)));
    zn::tensor<bool, 4, 5> mask = a < b;
    for (std::size_t i = 0; i < 20; ++i) CHECK(mask[i] == (a[i] < b[i]));
  }
  SECTION("a large tensor (not unrolled) evaluates the same") {
    auto a = filled<double, 10, 13>(0.3);
    zn::tensor<double, 10, 13> r = zn::cos(a) + a * a;
    for (std::size_t i = 0; i < 130; ++i) CHECK(r[i] == near(std::cos(a[i]) + a[i] * a[i]));
  }
  SECTION("float tensors compute in float; float with double gives double") {
    auto f = filled<float, 3>(0.2);
    zn::tensor<float, 3> r = zn::sin(f) * 2.0f + f;
    for (std::size_t i = 0; i < 3; ++i)
      CHECK(r[i] == Approx(std::sin(f[i]) * 2.0f + f[i]).epsilon(1e-6));
    auto d = filled<double, 3>(0.7);
    auto mixed = f + d;
    static_assert(std::is_same_v<zn::value_t<decltype(mixed)>, double>);
    zn::tensor<double, 3> rm = mixed;
    for (std::size_t i = 0; i < 3; ++i) CHECK(rm[i] == double(f[i]) + d[i]);
    // An int tensor with a floating scalar gives float32 (JAX's weak scalars).
    zn::tensor<int, 2> k{3, 4};
    auto kh = k * 0.5;
    static_assert(std::is_same_v<zn::value_t<decltype(kh)>, float>);
    zn::tensor<float, 2> rk = kh;
    CHECK(rk[0] == 1.5f);
    CHECK(rk[1] == 2.0f);
  }
  SECTION("assignment evaluates; reading the target itself is safe") {
    zn::tensor<double, 3> q{1, 2, 3};
    q = q * 2.0 + 1.0;
    CHECK(q[0] == 3);
    CHECK(q[1] == 5);
    CHECK(q[2] == 7);
    zn::tensor<double, 2, 2> m{1, 2, 3, 4};
    m = m + zn::transpose(m);  // reads other indices of the target
    CHECK(m(0, 0) == 2);
    CHECK(m(0, 1) == 5);
    CHECK(m(1, 0) == 5);
    CHECK(m(1, 1) == 8);
    zn::tensor<float, 3> qf = q;  // converting: a tensor is a fixed expression
    CHECK(qf[2] == 7.0f);
  }
  SECTION("a lazy expression of tensors holds copies and never dangles") {
    auto make = [] {
      zn::tensor<double, 3> a{1, 2, 3};
      return a * 2.0 + a;  // a dies here; the expression owns a copy
    };
    auto e = make();
    zn::tensor<double, 3> r = e;
    CHECK(r[0] == 3);
    CHECK(r[2] == 9);
  }
}

TEST_CASE("tensor: broadcasting between fixed shapes", "[tensor]") {
  auto col = filled<double, 3, 1>(0.1);
  auto row = filled<double, 1, 4>(0.9);
  auto e = col * row + 1.0;
  static_assert(std::is_same_v<decltype(e)::static_shape, zn::fixed_shape<3, 4>>);
  zn::tensor<double, 3, 4> outer = e;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(outer(i, j) == near(col(i, 0) * row(0, j) + 1.0));

  auto m = filled<double, 2, 3>(0.5);
  zn::tensor<double, 3> v{10, 20, 30};
  zn::tensor<double, 2, 3> r = m - v;  // (2,3) with (3,)
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(r(i, j) == m(i, j) - v(j));

  auto c = filled<double, 2, 1, 3>(0.2);
  auto d = filled<double, 4, 1>(0.4);
  zn::tensor<double, 2, 4, 3> r3 = c * d;  // (2,1,3) with (4,1)
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t k = 0; k < 3; ++k) CHECK(r3(i, j, k) == c(i, 0, k) * d(j, 0));

  // The compile-time broadcast rule (a mismatch is a static_assert when the node is built).
  using zn::fixed_shape;
  static_assert(zn::detail::fixed_broadcast_dims<fixed_shape<3, 1>, fixed_shape<1, 4>>::ok());
  static_assert(!zn::detail::fixed_broadcast_dims<fixed_shape<3>, fixed_shape<4>>::ok());
  static_assert(!zn::detail::fixed_broadcast_dims<fixed_shape<2, 3>, fixed_shape<2>>::ok());
}

TEST_CASE("tensor: reductions match plain loops", "[tensor]") {
  auto t = filled<double, 2, 3, 4>(0.3);
  auto at = [&](std::size_t i, std::size_t j, std::size_t k) { return t(i, j, k); };

  SECTION("whole tensor gives rank 0") {
    double s = 0, p = 1, mx = -1e300, mn = 1e300;
    for (double x : t) {
      s += x;
      p *= x;
      mx = std::max(mx, x);
      mn = std::min(mn, x);
    }
    auto rs = zn::sum(t);
    static_assert(std::is_same_v<decltype(rs), zn::tensor<double>>);
    CHECK(double(rs) == Approx(s).epsilon(1e-14));
    CHECK(double(zn::mean(t)) == Approx(s / 24).epsilon(1e-14));
    CHECK(double(zn::prod(t)) == Approx(p).epsilon(1e-13));
    CHECK(double(zn::max(t)) == mx);
    CHECK(double(zn::min(t)) == mn);
    double via_conversion = zn::sum(t);
    CHECK(via_conversion == double(rs));
    // Every axis listed: also rank 0.
    static_assert(std::is_same_v<decltype(zn::sum<0, 1, 2>(t)), zn::tensor<double>>);
    CHECK(double(zn::sum<2, 0, 1>(t)) == Approx(s).epsilon(1e-14));
  }
  SECTION("over axes") {
    auto s1 = zn::sum<1>(t);
    static_assert(std::is_same_v<decltype(s1), zn::tensor<double, 2, 4>>);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t k = 0; k < 4; ++k) {
        double ref = 0;
        for (std::size_t j = 0; j < 3; ++j) ref += at(i, j, k);
        CHECK(s1(i, k) == Approx(ref).epsilon(1e-14));
      }
    auto m02 = zn::mean<0, -1>(t);  // negative axes count from the end
    static_assert(std::is_same_v<decltype(m02), zn::tensor<double, 3>>);
    for (std::size_t j = 0; j < 3; ++j) {
      double ref = 0;
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t k = 0; k < 4; ++k) ref += at(i, j, k);
      CHECK(m02(j) == Approx(ref / 8).epsilon(1e-14));
    }
    auto mx = zn::max<2>(t);
    auto mn = zn::min<0>(t);
    auto pr = zn::prod<1>(t);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j) {
        double ref = -1e300;
        for (std::size_t k = 0; k < 4; ++k) ref = std::max(ref, at(i, j, k));
        CHECK(mx(i, j) == ref);
      }
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 4; ++k) CHECK(mn(j, k) == std::min(at(0, j, k), at(1, j, k)));
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t k = 0; k < 4; ++k)
        CHECK(pr(i, k) == Approx(at(i, 0, k) * at(i, 1, k) * at(i, 2, k)).epsilon(1e-14));
  }
  SECTION("over trailing axes (contiguous groups), in float, double and int") {
    auto s2 = zn::sum<2>(t);
    auto m12 = zn::mean<1, 2>(t * 3.0);
    for (std::size_t i = 0; i < 2; ++i) {
      double all = 0;
      for (std::size_t j = 0; j < 3; ++j) {
        double ref = 0;
        for (std::size_t k = 0; k < 4; ++k) ref += at(i, j, k);
        CHECK(s2(i, j) == Approx(ref).epsilon(1e-14));
        all += ref * 3.0;
      }
      CHECK(m12(i) == Approx(all / 12).epsilon(1e-14));
    }
    auto f = filled<float, 5, 9>(0.4);
    auto fs = zn::sum<1>(f);
    auto fp = zn::prod<-1>(f + 1.0f);
    for (std::size_t i = 0; i < 5; ++i) {
      double ref = 0, refp = 1;
      for (std::size_t j = 0; j < 9; ++j) {
        ref += double(f(i, j));
        refp *= double(f(i, j) + 1.0f);
      }
      CHECK(double(fs(i)) == Approx(ref).margin(1e-5));
      CHECK(double(fp(i)) == Approx(refp).epsilon(1e-5));
    }
    zn::tensor<std::int64_t, 2, 8> k;
    for (std::size_t i = 0; i < 16; ++i) k[i] = std::int64_t(i * i) - 40;
    auto ks = zn::sum<1>(k);
    CHECK(ks(0) == 0 + 1 + 4 + 9 + 16 + 25 + 36 + 49 - 320);
    CHECK(ks(1) == 64 + 81 + 100 + 121 + 144 + 169 + 196 + 225 - 320);
    CHECK(std::int64_t(zn::sum(k)) == ks(0) + ks(1));
  }
  SECTION("of an expression, and of a large tensor") {
    zn::tensor<double, 3> q{0.1, 0.2, 0.3};
    double ref = std::sin(0.1) + std::sin(0.2) + std::sin(0.3);
    CHECK(double(zn::sum(zn::sin(q))) == Approx(ref).epsilon(1e-15));
    auto big = filled<double, 12, 11>(0.8);  // 132 elements: the loop path
    auto cs = zn::sum<0>(big * 2.0);
    for (std::size_t j = 0; j < 11; ++j) {
      double r = 0;
      for (std::size_t i = 0; i < 12; ++i) r += big(i, j) * 2.0;
      CHECK(cs(j) == Approx(r).epsilon(1e-14));
    }
    auto rs = zn::sum<1>(big - 1.0);
    for (std::size_t i = 0; i < 12; ++i) {
      double r = 0;
      for (std::size_t j = 0; j < 11; ++j) r += big(i, j) - 1.0;
      CHECK(rs(i) == Approx(r).epsilon(1e-14));
    }
    // The sum cancels (0.16 from terms of up to 1): its rounding depends on the order, which
    // follows the vector width, so the bound is relative to the sum of magnitudes.
    double all = 0, magnitudes = 0;
    for (double x : big) all += x, magnitudes += std::abs(x);
    CHECK(std::abs(double(zn::sum(big)) - all) <= 1e-14 * magnitudes);
    CHECK(double(zn::max(big)) == *std::max_element(big.begin(), big.end()));
  }
  SECTION("result types and NaN") {
    zn::tensor<bool, 4> b{true, false, true, true};
    auto nb = zn::sum(b);
    static_assert(std::is_same_v<decltype(nb), zn::tensor<std::int32_t>>);
    CHECK(std::int32_t(nb) == 3);
    zn::tensor<int, 4> k{1, 2, 3, 4};
    auto mk = zn::mean(k);
    static_assert(std::is_same_v<decltype(mk), zn::tensor<float>>);
    CHECK(float(mk) == 2.5f);
    static_assert(std::is_same_v<decltype(zn::sum(k)), zn::tensor<int>>);
    double nan = std::numeric_limits<double>::quiet_NaN();
    zn::tensor<double, 3> n{1.0, nan, 3.0};
    CHECK(std::isnan(double(zn::max(n))));
    CHECK(std::isnan(double(zn::min(n))));
  }
  SECTION("empty axes give the identity") {
    zn::tensor<double, 0, 3> e;
    static_assert(e.size() == 0);
    auto s0 = zn::sum<0>(e);
    auto p0 = zn::prod<0>(e);
    static_assert(std::is_same_v<decltype(s0), zn::tensor<double, 3>>);
    for (std::size_t j = 0; j < 3; ++j) {
      CHECK(s0(j) == 0.0);
      CHECK(p0(j) == 1.0);
    }
    CHECK(std::isnan(double(zn::mean(e))));
    auto s1 = zn::sum<1>(e);  // nothing to compute
    static_assert(std::is_same_v<decltype(s1), zn::tensor<double, 0>>);
  }
  SECTION("axis checks used by the static_asserts") {
    using ax = zn::detail::fixed_axes<2, 1, -2>;
    static_assert(ax::in_range && ax::unique && ax::mask == 3u);
    static_assert(!zn::detail::fixed_axes<2, 2>::in_range);
    static_assert(!zn::detail::fixed_axes<2, -3>::in_range);
    static_assert(!zn::detail::fixed_axes<2, 1, -1>::unique);
  }
}

TEST_CASE("tensor: reshape and transpose", "[tensor]") {
  auto t = filled<double, 2, 3, 4>(0.6);
  auto r = zn::reshape<4, 6>(t);
  static_assert(std::is_same_v<decltype(r), zn::tensor<double, 4, 6>>);
  for (std::size_t i = 0; i < 24; ++i) CHECK(r[i] == t[i]);
  auto r1 = zn::reshape<24>(t * 2.0);  // of an expression
  for (std::size_t i = 0; i < 24; ++i) CHECK(r1[i] == t[i] * 2.0);

  auto tt = zn::transpose(t);
  static_assert(std::is_same_v<decltype(tt), zn::tensor<double, 4, 3, 2>>);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 4; ++k) CHECK(tt(k, j, i) == t(i, j, k));

  auto tp = zn::transpose<1, 0, 2>(t);
  static_assert(std::is_same_v<decltype(tp), zn::tensor<double, 3, 2, 4>>);
  auto tq = zn::transpose<2, -3, 1>(t);  // result axis k = input axis P[k]
  static_assert(std::is_same_v<decltype(tq), zn::tensor<double, 4, 2, 3>>);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 4; ++k) {
        CHECK(tp(j, i, k) == t(i, j, k));
        CHECK(tq(k, i, j) == t(i, j, k));
      }

  auto m = filled<double, 2, 5>(0.2);
  auto mt = zn::transpose(zn::exp(m));  // of an expression
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 5; ++j) CHECK(mt(j, i) == std::exp(m(i, j)));
  zn::tensor<double, 3> v{1, 2, 3};
  auto vt = zn::transpose(v);  // a vector transposes to itself
  static_assert(std::is_same_v<decltype(vt), zn::tensor<double, 3>>);
  CHECK(vt[2] == 3);

  static_assert(zn::detail::fixed_perm<3, 2, 0, 1>::valid);
  static_assert(!zn::detail::fixed_perm<3, 0, 1>::valid);
  static_assert(!zn::detail::fixed_perm<2, 0, 0>::valid);
  static_assert(!zn::detail::fixed_perm<2, 0, 2>::valid);
}

TEST_CASE("tensor: matmul, dot, cross and norm", "[tensor]") {
  auto a = filled<double, 2, 3>(0.1);
  auto b = filled<double, 3, 4>(0.2);
  auto c = zn::matmul(a, b);
  static_assert(std::is_same_v<decltype(c), zn::tensor<double, 2, 4>>);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      double ref = 0;
      for (std::size_t k = 0; k < 3; ++k) ref += a(i, k) * b(k, j);
      CHECK(c(i, j) == Approx(ref).epsilon(1e-14));
    }

  zn::tensor<double, 3> x{0.5, -1.5, 2.0};
  auto ax = zn::matmul(a, x);  // matrix-vector
  static_assert(std::is_same_v<decltype(ax), zn::tensor<double, 2>>);
  for (std::size_t i = 0; i < 2; ++i)
    CHECK(ax(i) == Approx(a(i, 0) * 0.5 - a(i, 1) * 1.5 + a(i, 2) * 2.0).epsilon(1e-14));
  auto xb = zn::matmul(x, b);  // vector-matrix
  static_assert(std::is_same_v<decltype(xb), zn::tensor<double, 4>>);
  for (std::size_t j = 0; j < 4; ++j)
    CHECK(xb(j) == Approx(0.5 * b(0, j) - 1.5 * b(1, j) + 2.0 * b(2, j)).epsilon(1e-14));

  zn::tensor<double, 3> y{1.0, 2.0, -0.5};
  auto d = zn::dot(x, y);
  static_assert(std::is_same_v<decltype(d), zn::tensor<double>>);
  CHECK(double(d) == 0.5 - 3.0 - 1.0);
  CHECK(double(zn::matmul(x, y)) == double(d));

  auto cr = zn::cross(x, y);
  CHECK(cr(0) == -1.5 * -0.5 - 2.0 * 2.0);
  CHECK(cr(1) == 2.0 * 1.0 - 0.5 * -0.5);
  CHECK(cr(2) == 0.5 * 2.0 - -1.5 * 1.0);
  CHECK(double(zn::dot(cr, x)) == Approx(0).margin(1e-14));  // orthogonal to both
  CHECK(double(zn::dot(cr, y)) == Approx(0).margin(1e-14));

  CHECK(double(zn::norm(x)) == Approx(std::sqrt(0.25 + 2.25 + 4.0)).epsilon(1e-15));
  double fro = 0;
  for (double v : a) fro += v * v;
  CHECK(double(zn::norm(a)) == Approx(std::sqrt(fro)).epsilon(1e-15));
  zn::tensor<int, 2> k{3, 4};
  auto nk = zn::norm(k);
  static_assert(std::is_same_v<decltype(nk), zn::tensor<float>>);
  CHECK(float(nk) == 5.0f);

  // A 3x3 chain (the robotics case): R^T (R p + t), of expressions too.
  auto R = filled<double, 3, 3>(0.9);
  zn::tensor<double, 3> p{0.3, -0.2, 0.7}, tr{1, 2, 3};
  zn::tensor<double, 3> rp = zn::matmul(zn::transpose(R), zn::matmul(R, p) + tr);
  for (std::size_t i = 0; i < 3; ++i) {
    double ref = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      double inner = tr(j);
      for (std::size_t k = 0; k < 3; ++k) inner += R(j, k) * p(k);
      ref += R(j, i) * inner;
    }
    CHECK(rp(i) == Approx(ref).epsilon(1e-14));
  }
  auto sq = zn::matmul(R * 2.0, R);  // operands that are expressions are evaluated once
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      double ref = 0;
      for (std::size_t k = 0; k < 3; ++k) ref += R(i, k) * 2.0 * R(k, j);
      CHECK(sq(i, j) == Approx(ref).epsilon(1e-14));
    }
  // Mixed element types promote.
  zn::tensor<float, 2, 2> fm{1, 2, 3, 4};
  zn::tensor<double, 2> dv{0.5, 0.25};
  static_assert(std::is_same_v<decltype(zn::matmul(fm, dv)), zn::tensor<double, 2>>);
  CHECK(zn::matmul(fm, dv)(1) == 3 * 0.5 + 4 * 0.25);

  using zn::fixed_shape;
  static_assert(
      !zn::detail::matmul_shapes<fixed_shape<2, 3>, fixed_shape<2, 3>>::inner_ok);  // static_assert
  static_assert(!zn::detail::matmul_shapes<fixed_shape<2, 3, 4>, fixed_shape<4>>::ranks_ok);
  static_assert(zn::detail::matmul_shapes<fixed_shape<3>, fixed_shape<3, 5>>::inner_ok);
}

TEST_CASE("tensor: mixing tensors and arrays gives arrays", "[tensor]") {
  zn::tensor<double, 2, 3> t{1, 2, 3, 4, 5, 6};
  zn::array<double> a({3}, {10, 20, 30});
  auto e = t + a;
  static_assert(!decltype(e)::fixed);
  zn::array<double> r = e;
  REQUIRE(r.shape() == zn::shape{2, 3});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(r(i, j) == t(i, j) + a(j));

  zn::array<double> big({4, 2, 3}, std::vector<double>(24, 0.5));
  zn::array<double> r2 = zn::exp(big) * t;  // tensor broadcast against a larger array
  REQUIRE(r2.shape() == zn::shape{4, 2, 3});
  for (int n = 0; n < 4; ++n)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) CHECK(r2(n, i, j) == near(std::exp(0.5) * t(i, j)));

  zn::array<double> whole = t;  // a tensor evaluates into an array
  CHECK(whole.shape() == zn::shape{2, 3});
  CHECK(whole(1, 2) == 6);
  zn::array<double> fixed_expr = zn::sin(t);  // a fixed expression evaluates into an array
  CHECK(fixed_expr(1, 0) == near(std::sin(4.0)));

  // Back to a tensor: explicit, shape checked at run time.
  zn::tensor<double, 2, 3> back(a * 2.0 + t);
  CHECK(back(1, 1) == 45);
  CHECK_THROWS_AS((zn::tensor<double, 3>(big * 2.0)), zn::shape_error);
  CHECK_THROWS_AS((zn::tensor<double, 2, 2>(a)), zn::shape_error);
}

TEST_CASE("tensor: evaluation never touches the heap", "[tensor][alloc]") {
  zn::tensor<double, 3> q{0.1, 0.2, 0.3};
  auto R = filled<double, 3, 3>(0.4);
  auto A = filled<double, 3, 3>(0.5);
  heap_watch w;
  zn::tensor<double, 3> r = zn::sin(q) * 2.0 + q;
  zn::tensor<double, 3, 3> m = A * R + A;
  m = m * 2.0 - zn::exp(R);
  auto mm = zn::matmul(R, zn::matmul(A, R));
  auto v = zn::matmul(R, q);
  double s = double(zn::sum(m)) + double(zn::mean(mm)) + double(zn::max(v)) + zn::min<0>(m)(1) +
             zn::prod<1>(R)(2);
  auto t = zn::transpose(m);
  auto rs = zn::reshape<9>(t);
  auto c = zn::cross(q, r);
  double n = double(zn::norm(c)) + double(zn::dot(q, r));
  auto big = filled<double, 10, 10>(0.1);
  zn::tensor<double, 10, 10> bb = big * big + 1.0;  // the plain-loop path
  auto sb = zn::sum<0>(bb);
  CHECK(w.new_calls() == 0);
  CHECK(w.zenith_allocs() == 0);
  // Use every result, so the work above is not optimised away.
  CHECK(std::isfinite(s + n + rs[4] + mm[1] + sb[3] + bb[7]));

  // The counter does count: an array allocates.
  heap_watch w2;
  zn::array<double> arr = q * 2.0;
  CHECK(w2.new_calls() > 0);
  CHECK(w2.zenith_allocs() == 1);
  CHECK(arr(1) == 0.4);
}

TEST_CASE("tensor: printing", "[tensor]") {
  std::ostringstream os;
  os << zn::tensor<double, 2, 2>{1, 2, 3, 4} << ' ' << zn::tensor<double>(2.5) << ' '
     << zn::tensor<int, 3>{1, 2, 3};
  std::ostringstream ref;
  ref << zn::array<double>({2, 2}, {1, 2, 3, 4}) << ' ' << zn::array<double>({}, {2.5}) << ' '
      << zn::array<int>({3}, {1, 2, 3});
  CHECK(os.str() == ref.str());
  std::ostringstream ow;
  ow << zn::tensor<wrap, 2, 2>{1.0, 2.0, 3.0, 4.0};
  CHECK(ow.str() == "[[w1, w2], [w3, w4]]");
}

TEST_CASE("tensor: a user element type", "[tensor]") {
  using W3 = zn::tensor<wrap, 3>;
  W3 x{wrap(1.0), wrap(2.0), wrap(3.0)};
  W3 y{0.5, -1.0, 4.0};  // converts from double
  CHECK(x(1).v == 2.0);
  CHECK(zn::sum(x)().v == 6.0);
  wrap dot = zn::dot(x, y);
  CHECK(dot.v == 0.5 - 2.0 + 12.0);
  auto c = zn::cross(x, y);
  CHECK(c(0).v == 2.0 * 4.0 - 3.0 * -1.0);
  CHECK(c(2).v == 1.0 * -1.0 - 2.0 * 0.5);
  CHECK(zn::norm(x)().v == Approx(std::sqrt(14.0)));
  CHECK(zn::max(y)().v == 4.0);
  CHECK(zn::mean(x)().v == 2.0);
  zn::tensor<wrap, 2, 3> m{1.0, 2.0, 3.0, 4.0, 5.0, 6.0};
  auto mx = zn::matmul(m, x);
  static_assert(std::is_same_v<decltype(mx), zn::tensor<wrap, 2>>);
  CHECK(mx(1).v == 4.0 + 10.0 + 18.0);
  CHECK(zn::transpose(m)(2, 1).v == 6.0);
  CHECK(zn::reshape<3, 2>(m)(2, 0).v == 5.0);
  CHECK(zn::sum<1>(m)(0).v == 6.0);
  // The fixed-size evaluator is generic in the element type: an elementwise node over user
  // types evaluates through it. (The public operators promote with JAX's lattice of zenith's
  // element types, so issue 3 extends elementwise.hpp for user types.)
  zn::map_node<zn::ops::add, W3, W3> sum_node(x, y);
  W3 s = sum_node;
  CHECK(s(2).v == 7.0);
  zn::map_node<zn::ops::sin, W3> sin_node(x);
  W3 sx = sin_node;
  CHECK(sx(0).v == std::sin(1.0));
}

TEST_CASE("tensor: fixed-size ops are chosen over the dynamic ones", "[tensor]") {
  // With every header of <zenith/zenith.hpp> included, a call on tensors resolves to the
  // fixed-size overloads (they return tensors) for const, non-const and temporary arguments.
  zn::tensor<double, 2, 2> m{1, 2, 3, 4};
  zn::tensor<double, 2, 2> const cm{1, 2, 3, 4};
  zn::tensor<double, 2> v{1, 2};
  static_assert(zn::is_tensor_v<decltype(zn::transpose(m))>);
  static_assert(zn::is_tensor_v<decltype(zn::transpose(cm))>);
  static_assert(zn::is_tensor_v<decltype(zn::transpose(zn::tensor<double, 2, 2>{}))>);
  static_assert(zn::is_tensor_v<decltype(zn::transpose(m * 2.0))>);
  static_assert(zn::is_tensor_v<decltype(zn::matmul(m, m))>);
  static_assert(zn::is_tensor_v<decltype(zn::matmul(cm, v))>);
  static_assert(zn::is_tensor_v<decltype(zn::matmul(m, cm))>);
  static_assert(zn::is_tensor_v<decltype(zn::matmul(m * 2.0, v + 1.0))>);
  static_assert(zn::is_tensor_v<decltype(zn::sum(m))>);
  static_assert(zn::is_tensor_v<decltype(zn::sum(cm))>);
  static_assert(zn::is_tensor_v<decltype(zn::sum(m + 1.0))>);
  static_assert(zn::is_tensor_v<decltype(zn::mean(m))>);
  static_assert(zn::is_tensor_v<decltype(zn::prod(cm))>);
  static_assert(zn::is_tensor_v<decltype(zn::max(m))>);
  static_assert(zn::is_tensor_v<decltype(zn::min(m))>);
  static_assert(zn::is_tensor_v<decltype(zn::dot(v, v))>);
  static_assert(zn::is_tensor_v<decltype(zn::norm(m))>);
  // A runtime axis or keepdims is the dynamic (lazy) reduction: it reads the tensor as a leaf.
  zn::array<double> s0 = zn::sum(m, 0);
  REQUIRE(s0.shape() == zn::shape{2});
  CHECK(s0(0) == 4);
  CHECK(s0(1) == 6);
  zn::array<double> sk = zn::max(cm, true);
  CHECK(sk.shape() == zn::shape{1, 1});
  CHECK(sk(0, 0) == 4);
  // Mixed with an array, the dynamic (lazy) matmul applies.
  zn::array<double> a({2, 2}, {1, 0, 0, 1});
  static_assert(!zn::is_tensor_v<decltype(zn::matmul(m, a))>);
  zn::array<double> ma = zn::matmul(m, a);
  CHECK(ma(1, 0) == 3);
  CHECK(ma(0, 1) == 2);
}
