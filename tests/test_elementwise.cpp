// Every elementwise op against a plain double-precision loop over the same random inputs, on
// float and double, at sizes 1, 7 and 1000003, through both the xsimd path and the scalar path
// (zenith::set_simd_enabled(false)). Also NaN / signed-zero handling and the operators.
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace zn = zenith;

namespace {

// The xsimd path runs at every size; the scalar path (slow for transcendental ops) up to 4103,
// which still covers whole batches and a tail. Sanitizer builds run ten times slower: there the
// big size is 100003 (still threaded, still a tail).
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t big_size = 100003;
#else
constexpr std::size_t big_size = 1000003;
#endif
constexpr std::size_t test_sizes[] = {1, 7, 4103, big_size};
constexpr std::size_t scalar_path_max = 4103;

// Restores the SIMD switch when a check fails half-way.
struct simd_guard {
  explicit simd_guard(bool on) { zn::set_simd_enabled(on); }
  ~simd_guard() { zn::set_simd_enabled(true); }
};

enum class input_kind {
  uniform,   // uniform in [lo, hi]
  quarters,  // multiples of 0.25 in [lo, hi]: exact halves and integers for floor/ceil/round
};
struct input_spec {
  double lo, hi;
  input_kind kind = input_kind::uniform;
};

// splitmix64: fast, so that inputs of a million elements cost little next to the checks.
struct rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

template <class T>
zn::array<T> random_array(std::size_t n, input_spec in, std::uint32_t seed) {
  rng gen{seed};
  auto a = zn::array<T>::empty({n});
  T* p = a.data();
  if (in.kind == input_kind::quarters) {
    double k0 = std::ceil(in.lo * 4), k1 = std::floor(in.hi * 4);
    for (std::size_t i = 0; i < n; ++i)
      p[i] = T(std::floor(k0 + gen.uniform() * (k1 - k0 + 1)) * 0.25);
  } else {
    for (std::size_t i = 0; i < n; ++i) p[i] = T(in.lo + gen.uniform() * (in.hi - in.lo));
  }
  return a;
}

struct tolerance {
  double rtol, atol;
};

// Counts elements of out not within tol of ref (NaN matches NaN) and reports the first one.
template <class T>
void check_close(std::string const& what, std::vector<double> const& ref, zn::array<T> const& out,
                 tolerance tol) {
  REQUIRE(out.size() == ref.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    double y = double(out.data()[i]), r = ref[i];
    bool ok = (std::isnan(r) && std::isnan(y)) || y == r ||
              std::abs(y - r) <= tol.atol + tol.rtol * std::abs(r);
    if (!ok && bad++ == 0) first = i;
  }
  std::ostringstream msg;
  if (bad) {
    msg.precision(17);
    msg << what << ": " << bad << " of " << ref.size() << " outside tolerance; first at " << first
        << ": got " << double(out.data()[first]) << ", want " << ref[first];
  }
  INFO(msg.str());
  CHECK(bad == 0);
}

template <class T>
bool bitwise_equal(zn::array<T> const& a, zn::array<T> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
constexpr char const* type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

template <class F, class R>
struct unary_case {
  char const* name;
  F fn;   // array -> expression
  R ref;  // double -> double
  input_spec x;
  tolerance float_tol{2e-6, 1e-6};
  tolerance double_tol{1e-13, 1e-14};
  bool exact = false;  // both paths compute the same IEEE operation: results bitwise equal
};
template <class F, class R>
struct binary_case {
  char const* name;
  F fn;
  R ref;
  input_spec x, y;
  tolerance float_tol{2e-6, 1e-6};
  tolerance double_tol{1e-13, 1e-14};
  bool exact = false;
};
// Deduction guides for the aggregates (clang before 17 deduces no aggregate's arguments).
template <class F, class R>
unary_case(char const*, F, R, input_spec, tolerance = {}, tolerance = {}, bool = false)
    -> unary_case<F, R>;
template <class F, class R>
binary_case(char const*, F, R, input_spec, input_spec, tolerance = {}, tolerance = {}, bool = false)
    -> binary_case<F, R>;

// A case whose op is one IEEE operation or a selection: both paths give bitwise equal results,
// within tol of the double reference (exactly, by default).
template <class F, class R>
unary_case<F, R> exact_unary(char const* name, F f, R r, input_spec x, tolerance tf = {0, 0},
                             tolerance td = {0, 0}) {
  return {name, f, r, x, tf, td, true};
}
template <class F, class R>
binary_case<F, R> exact_binary(char const* name, F f, R r, input_spec x, input_spec y,
                               tolerance tf = {0, 0}, tolerance td = {0, 0}) {
  return {name, f, r, x, y, tf, td, true};
}

// Evaluates expression e into an array<T> with the SIMD path on and off, checks both against
// ref and, for exact ops, against each other bitwise.
template <class T, class E>
void check_both_paths(std::string const& what, E const& e, std::vector<double> const& ref,
                      tolerance tol, bool exact) {
  // The xsimd path must really be taken for these expressions (else this test proves nothing).
  static_assert(zn::evaluator_t<E>::template vectorizable<T>(),
                "an elementwise op on float/double should take the xsimd path");
  zn::array<T> with_simd, without_simd;
  {
    simd_guard g(true);
    with_simd = e;
  }
  check_close(what + " [simd]", ref, with_simd, tol);
  if (ref.size() > scalar_path_max) return;
  {
    simd_guard g(false);
    without_simd = e;
  }
  check_close(what + " [scalar]", ref, without_simd, tol);
  if (exact) {
    INFO(what << ": simd and scalar paths differ");
    CHECK(bitwise_equal(with_simd, without_simd));
  }
}

template <class T, class C>
void run_case(C const& c, std::uint32_t seed) {
  tolerance tol = std::is_same_v<T, float> ? c.float_tol : c.double_tol;
  for (std::size_t n : test_sizes) {
    std::string what = std::string(c.name) + "<" + type_name<T>() + ">[" + std::to_string(n) + "]";
    std::vector<double> ref(n);
    if constexpr (requires { c.y; }) {
      auto a = random_array<T>(n, c.x, seed), b = random_array<T>(n, c.y, seed + 7919);
      for (std::size_t i = 0; i < n; ++i) ref[i] = c.ref(double(a.data()[i]), double(b.data()[i]));
      check_both_paths<T>(what, c.fn(a, b), ref, tol, c.exact);
    } else {
      auto a = random_array<T>(n, c.x, seed);
      for (std::size_t i = 0; i < n; ++i) ref[i] = c.ref(double(a.data()[i]));
      check_both_paths<T>(what, c.fn(a), ref, tol, c.exact);
    }
  }
}

template <class Cases>
void run_all(Cases const& cases) {
  std::apply(
      [](auto const&... c) {
        std::uint32_t seed = 1;
        ((run_case<float>(c, seed), run_case<double>(c, seed), ++seed), ...);
      },
      cases);
}

double ref_sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x == 0 ? 0.0 : x; }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double ref_gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

}  // namespace

TEST_CASE("unary ops match a double-precision reference on both paths", "[elementwise]") {
  constexpr tolerance exact_f{0, 0}, exact_d{0, 0};
  auto cases = std::tuple{
      unary_case{"neg",
                 [](auto const& a) { return -a; },
                 [](double x) { return -x; },
                 {-10, 10},
                 exact_f,
                 exact_d,
                 true},
      unary_case{"abs",
                 [](auto const& a) { return zn::abs(a); },
                 [](double x) { return std::abs(x); },
                 {-10, 10},
                 exact_f,
                 exact_d,
                 true},
      unary_case{"sign",
                 [](auto const& a) { return zn::sign(a); },
                 ref_sign,
                 {-2, 2, input_kind::quarters},
                 exact_f,
                 exact_d,
                 true},
      unary_case{"exp",
                 [](auto const& a) { return zn::exp(a); },
                 [](double x) { return std::exp(x); },
                 {-20, 20}},
      unary_case{"log",
                 [](auto const& a) { return zn::log(a); },
                 [](double x) { return std::log(x); },
                 {1e-3, 1e3}},
      unary_case{"log1p",
                 [](auto const& a) { return zn::log1p(a); },
                 [](double x) { return std::log1p(x); },
                 {-0.9, 10}},
      unary_case{"expm1",
                 [](auto const& a) { return zn::expm1(a); },
                 [](double x) { return std::expm1(x); },
                 {-5, 5}},
      unary_case{"sqrt",
                 [](auto const& a) { return zn::sqrt(a); },
                 [](double x) { return std::sqrt(x); },
                 {0, 1e4},
                 tolerance{1e-7, 0},
                 tolerance{2e-16, 0},
                 true},
      unary_case{"rsqrt",
                 [](auto const& a) { return zn::rsqrt(a); },
                 [](double x) { return 1 / std::sqrt(x); },
                 {1e-3, 1e4},
                 tolerance{2e-7, 0},
                 tolerance{4e-16, 0},
                 true},
      unary_case{"square",
                 [](auto const& a) { return zn::square(a); },
                 [](double x) { return x * x; },
                 {-100, 100},
                 tolerance{1e-7, 0},
                 tolerance{2e-16, 0},
                 true},
      unary_case{"sin",
                 [](auto const& a) { return zn::sin(a); },
                 [](double x) { return std::sin(x); },
                 {-10, 10}},
      unary_case{"cos",
                 [](auto const& a) { return zn::cos(a); },
                 [](double x) { return std::cos(x); },
                 {-10, 10}},
      unary_case{"tan",
                 [](auto const& a) { return zn::tan(a); },
                 [](double x) { return std::tan(x); },
                 {-1.5, 1.5}},
      unary_case{"tanh",
                 [](auto const& a) { return zn::tanh(a); },
                 [](double x) { return std::tanh(x); },
                 {-10, 10}},
      unary_case{"sigmoid",
                 [](auto const& a) { return zn::sigmoid(a); },
                 [](double x) { return 1 / (1 + std::exp(-x)); },
                 {-20, 20}},
      unary_case{"relu",
                 [](auto const& a) { return zn::relu(a); },
                 [](double x) { return x > 0 ? x : 0.0; },
                 {-10, 10},
                 exact_f,
                 exact_d,
                 true},
      unary_case{"gelu", [](auto const& a) { return zn::gelu(a); }, ref_gelu_tanh, {-6, 6}},
      unary_case{
          "gelu_tanh", [](auto const& a) { return zn::gelu_tanh(a); }, ref_gelu_tanh, {-6, 6}},
      // xsimd's double erf is good to ~1e-14 relative; 1 + erf(x) near -1 magnifies that.
      unary_case{"gelu_erf",
                 [](auto const& a) { return zn::gelu_erf(a); },
                 ref_gelu_erf,
                 {-6, 6},
                 tolerance{2e-6, 1e-6},
                 tolerance{1e-13, 1e-13}},
      unary_case{"erf",
                 [](auto const& a) { return zn::erf(a); },
                 [](double x) { return std::erf(x); },
                 {-4, 4}},
      unary_case{"floor",
                 [](auto const& a) { return zn::floor(a); },
                 [](double x) { return std::floor(x); },
                 {-100, 100, input_kind::quarters},
                 exact_f,
                 exact_d,
                 true},
      unary_case{"floor (non-quarter)",
                 [](auto const& a) { return zn::floor(a); },
                 [](double x) { return std::floor(x); },
                 {-1e6, 1e6},
                 exact_f,
                 exact_d,
                 true},
      unary_case{"ceil",
                 [](auto const& a) { return zn::ceil(a); },
                 [](double x) { return std::ceil(x); },
                 {-100, 100, input_kind::quarters},
                 exact_f,
                 exact_d,
                 true},
      // Half to even, as NumPy and JAX: round(0.5) == 0, round(1.5) == 2, round(-2.5) == -2.
      unary_case{"round",
                 [](auto const& a) { return zn::round(a); },
                 [](double x) {
                   double f = std::floor(x), d = x - f;
                   return d < 0.5 ? f : d > 0.5 ? f + 1 : (std::fmod(f, 2.0) == 0 ? f : f + 1);
                 },
                 {-100, 100, input_kind::quarters},
                 exact_f,
                 exact_d,
                 true},
      unary_case{"reciprocal",
                 [](auto const& a) { return zn::reciprocal(a); },
                 [](double x) { return 1 / x; },
                 {0.01, 100},
                 tolerance{1e-7, 0},
                 tolerance{2e-16, 0},
                 true},
      unary_case{"reciprocal (negative)",
                 [](auto const& a) { return zn::reciprocal(a); },
                 [](double x) { return 1 / x; },
                 {-100, -0.01},
                 tolerance{1e-7, 0},
                 tolerance{2e-16, 0},
                 true},
      // A chain, and the unary plus.
      unary_case{"chain",
                 [](auto const& a) { return +(zn::exp(-a * a) * 2 + zn::sin(a) - a / 3); },
                 [](double x) { return std::exp(-x * x) * 2 + std::sin(x) - x / 3; },
                 {-3, 3}},
  };
  run_all(cases);
}

TEST_CASE("binary ops and operators match a double-precision reference", "[elementwise]") {
  constexpr tolerance ulp_f{1e-7, 0}, ulp_d{2e-16, 0};
  auto cases = std::tuple{
      exact_binary(
          "add", [](auto const& a, auto const& b) { return a + b; },
          [](double x, double y) { return x + y; }, {-10, 10}, {-10, 10}, ulp_f, ulp_d),
      exact_binary(
          "sub", [](auto const& a, auto const& b) { return a - b; },
          [](double x, double y) { return x - y; }, {-10, 10}, {-10, 10}, ulp_f, ulp_d),
      exact_binary(
          "mul", [](auto const& a, auto const& b) { return a * b; },
          [](double x, double y) { return x * y; }, {-10, 10}, {-10, 10}, ulp_f, ulp_d),
      exact_binary(
          "div", [](auto const& a, auto const& b) { return a / b; },
          [](double x, double y) { return x / y; }, {-10, 10}, {0.1, 10}, ulp_f, ulp_d),
      exact_binary(
          "add()", [](auto const& a, auto const& b) { return zn::add(a, b); },
          [](double x, double y) { return x + y; }, {-10, 10}, {-10, 10}, ulp_f, ulp_d),
      exact_binary(
          "subtract()", [](auto const& a, auto const& b) { return zn::subtract(a, b); },
          [](double x, double y) { return x - y; }, {-10, 10}, {-10, 10}, ulp_f, ulp_d),
      exact_binary(
          "multiply()", [](auto const& a, auto const& b) { return zn::multiply(a, b); },
          [](double x, double y) { return x * y; }, {-10, 10}, {-10, 10}, ulp_f, ulp_d),
      exact_binary(
          "divide()", [](auto const& a, auto const& b) { return zn::divide(a, b); },
          [](double x, double y) { return x / y; }, {-10, 10}, {-10, -0.1}, ulp_f, ulp_d),
      // Scalars on either side (weakly typed: they take the array's type).
      binary_case{"scalar ops",
                  [](auto const& a, auto const& b) { return 2 - a * 0.5 + b / 4 - 3 / (b + 20); },
                  [](double x, double y) { return 2 - x * 0.5 + y / 4 - 3 / (y + 20); },
                  {-10, 10},
                  {-10, 10},
                  tolerance{2e-6, 4e-6}},
      binary_case{"pow",
                  [](auto const& a, auto const& b) { return zn::pow(a, b); },
                  [](double x, double y) { return std::pow(x, y); },
                  {0.1, 10},
                  {-3, 3},
                  tolerance{4e-6, 1e-6}},
      // A negative base with integral exponents: pow(-2, 3) == -8 as std::pow.
      binary_case{"pow (negative base)",
                  [](auto const& a, auto const& b) { return zn::pow(a, b); },
                  [](double x, double y) { return std::pow(x, y); },
                  {-3, -0.1},
                  {-4, 4, input_kind::quarters},
                  tolerance{4e-6, 1e-6}},
      binary_case{"pow (scalar exponent)",
                  [](auto const& a, auto const&) { return zn::pow(a, 2); },
                  [](double x, double) { return x * x; },
                  {-3, 3},
                  {0, 1}},
      exact_binary(
          "maximum", [](auto const& a, auto const& b) { return zn::maximum(a, b); },
          [](double x, double y) { return std::max(x, y); }, {-10, 10}, {-10, 10}),
      exact_binary(
          "minimum", [](auto const& a, auto const& b) { return zn::minimum(a, b); },
          [](double x, double y) { return std::min(x, y); }, {-10, 10}, {-10, 10}),
      binary_case{"atan2",
                  [](auto const& a, auto const& b) { return zn::atan2(a, b); },
                  [](double y, double x) { return std::atan2(y, x); },
                  {-5, 5},
                  {-5, 5}},
      exact_binary(
          "where", [](auto const& a, auto const& b) { return zn::where(a > b, a, b * 2); },
          [](double x, double y) { return x > y ? x : y * 2; }, {-10, 10}, {-10, 10}),
      exact_binary(
          "where (scalar branch)",
          [](auto const& a, auto const& b) { return zn::where(a <= b, 1.5, a); },
          [](double x, double y) { return x <= y ? 1.5 : x; }, {-10, 10}, {-10, 10}),
      exact_binary(
          "clip (scalar bounds)", [](auto const& a, auto const&) { return zn::clip(a, -0.5, 2); },
          [](double x, double) { return std::min(std::max(x, -0.5), 2.0); }, {-3, 3}, {0, 1}),
      exact_binary(
          "clip (array bounds)", [](auto const& a, auto const& b) { return zn::clip(a, -b, b); },
          [](double x, double y) { return std::min(std::max(x, -y), y); }, {-3, 3}, {0, 2}),
  };
  run_all(cases);
}

// Comparisons give bool. As a root they are written by the scalar path; inside where() or cast()
// they are xsimd masks, so both are checked.
TEST_CASE("comparisons give bool arrays", "[elementwise]") {
  auto run = []<class T>(T) {
    for (std::size_t n : test_sizes) {
      // Quarter values so equal elements are common.
      auto a = random_array<T>(n, {-2, 2, input_kind::quarters}, 11);
      auto b = random_array<T>(n, {-2, 2, input_kind::quarters}, 12);
      auto check = [&](char const* name, auto e, auto ref) {
        static_assert(std::is_same_v<zn::value_t<decltype(e)>, bool>);
        // A comparison at the root stores its xsimd mask as bytes: the SIMD path is taken.
        using Ev = zn::evaluator_t<decltype(e)>;
        static_assert(std::is_same_v<zn::simd_lane_t<Ev>, T> &&
                      Ev::template vectorizable<zn::simd_lane_t<Ev>>());
        INFO(name << "<" << type_name<T>() << ">[" << n << "]");
        for (bool simd : {true, false}) {
          if (!simd && n > scalar_path_max) continue;
          simd_guard g(simd);
          zn::array<bool> got = e;
          std::size_t bad = 0;
          for (std::size_t i = 0; i < n; ++i)
            bad += got.data()[i] != ref(double(a.data()[i]), double(b.data()[i]));
          INFO((simd ? "simd" : "scalar") << " path");
          CHECK(bad == 0);
        }
        // Through the mask path, with SIMD on and off.
        std::vector<double> want(n);
        for (std::size_t i = 0; i < n; ++i)
          want[i] = ref(double(a.data()[i]), double(b.data()[i])) ? 1.0 : 0.0;
        check_both_paths<T>(std::string(name) + " as cast", zn::cast<T>(e), want, {0, 0}, true);
      };
      check("==", a == b, [](double x, double y) { return x == y; });
      check("!=", a != b, [](double x, double y) { return x != y; });
      check("<", a < b, [](double x, double y) { return x < y; });
      check("<=", a <= b, [](double x, double y) { return x <= y; });
      check(">", a > b, [](double x, double y) { return x > y; });
      check(">=", a >= b, [](double x, double y) { return x >= y; });
      check("equal", zn::equal(a, b), [](double x, double y) { return x == y; });
      check("not_equal", zn::not_equal(a, b), [](double x, double y) { return x != y; });
      check("less", zn::less(a, b), [](double x, double y) { return x < y; });
      check("less_equal", zn::less_equal(a, b), [](double x, double y) { return x <= y; });
      check("greater", zn::greater(a, b), [](double x, double y) { return x > y; });
      check("greater_equal", zn::greater_equal(a, b), [](double x, double y) { return x >= y; });
      check("scalar <", 0.5 < a, [](double x, double) { return 0.5 < x; });
    }
  };
  run(float{});
  run(double{});
  // Into a strided destination (stride 2: stacked along a new last axis), on both paths.
  auto a = random_array<float>(1000, {-2, 2, input_kind::quarters}, 13);
  auto b = random_array<float>(1000, {-2, 2, input_kind::quarters}, 14);
  for (bool simd : {true, false}) {
    simd_guard g(simd);
    zn::array<bool> st = zn::stack(std::vector{a < b, b < a}, -1);
    REQUIRE(st.shape() == zn::shape{1000, 2});
    std::size_t bad = 0;
    for (std::size_t i = 0; i < 1000; ++i)
      bad += st(i, 0) != (a(i) < b(i)) || st(i, 1) != (b(i) < a(i));
    CHECK(bad == 0);
  }
}

// NaN and signed zero: the special values, placed both in SIMD batches and in the scalar tail.
TEST_CASE("NaN and signed zero handling", "[elementwise]") {
  auto run = []<class T>(T) {
    constexpr T nan = std::numeric_limits<T>::quiet_NaN();
    constexpr T inf = std::numeric_limits<T>::infinity();
    // 37 elements: two batches of 16 floats (or four of 8 doubles) and a scalar tail.
    std::vector<T> xv(37), yv(37);
    for (std::size_t i = 0; i < 37; ++i) {
      xv[i] = T(double(i % 5) - 2.0);
      yv[i] = T(1.5 - double(i % 3));
    }
    for (std::size_t i : {0u, 3u, 17u, 35u}) xv[i] = nan;
    for (std::size_t i : {1u, 3u, 20u, 36u}) yv[i] = nan;
    xv[5] = T(-0.0);
    xv[33] = T(-0.0);
    xv[6] = -inf;
    xv[34] = inf;
    zn::array<T> x({37}, xv), y({37}, yv);

    for (bool simd : {true, false}) {
      simd_guard g(simd);
      INFO((simd ? "simd" : "scalar") << " path, " << type_name<T>());
      zn::array<T> mx = zn::maximum(x, y), mn = zn::minimum(x, y);
      zn::array<T> mx2 = zn::maximum(y, x), mn2 = zn::minimum(y, x);
      zn::array<T> r = zn::relu(x), s = zn::sign(x), ab = zn::abs(x), neg = -x;
      zn::array<T> cl = zn::clip(x, -1, 1);
      for (std::size_t i = 0; i < 37; ++i) {
        INFO("i = " << i << ", x = " << xv[i] << ", y = " << yv[i]);
        bool any_nan = std::isnan(xv[i]) || std::isnan(yv[i]);
        // NumPy's maximum / minimum propagate NaN from either side.
        if (any_nan) {
          CHECK(std::isnan(mx(i)));
          CHECK(std::isnan(mn(i)));
          CHECK(std::isnan(mx2(i)));
          CHECK(std::isnan(mn2(i)));
        } else {
          CHECK(mx(i) == std::max(xv[i], yv[i]));
          CHECK(mn(i) == std::min(xv[i], yv[i]));
          CHECK(mx2(i) == std::max(xv[i], yv[i]));
          CHECK(mn2(i) == std::min(xv[i], yv[i]));
        }
        if (std::isnan(xv[i])) {
          CHECK(std::isnan(r(i)));
          CHECK(std::isnan(s(i)));
          CHECK(std::isnan(ab(i)));
          CHECK(std::isnan(cl(i)));
        } else {
          CHECK(r(i) == (xv[i] > 0 ? xv[i] : T(0)));
          CHECK_FALSE(std::signbit(r(i)));  // relu(-0.0) is +0
          CHECK(s(i) == (xv[i] > 0 ? T(1) : xv[i] < 0 ? T(-1) : T(0)));
          CHECK(ab(i) == std::abs(xv[i]));
          CHECK_FALSE(std::signbit(ab(i)));  // abs(-0.0) is +0.0
          CHECK(cl(i) == std::min(std::max(xv[i], T(-1)), T(1)));
        }
        CHECK(std::signbit(neg(i)) != std::signbit(xv[i]));
      }
      // abs(-0.0) and sign(0) bit patterns.
      CHECK(std::signbit(x(5)));
      CHECK_FALSE(std::signbit(ab(5)));
      CHECK(s(5) == 0);
      CHECK(r(6) == 0);
      CHECK(r(34) == inf);
      CHECK(s(6) == -1);
      CHECK(s(34) == 1);
      CHECK(ab(6) == inf);
      // Comparisons with NaN are false (!= is true).
      zn::array<T> lt = zn::cast<T>(x < y), ne = zn::cast<T>(x != y), eq = zn::cast<T>(x == x);
      for (std::size_t i = 0; i < 37; ++i) {
        if (std::isnan(xv[i]) || std::isnan(yv[i])) {
          CHECK(lt(i) == 0);
          CHECK(ne(i) == 1);
        }
        CHECK(eq(i) == (std::isnan(xv[i]) ? 0 : 1));
      }
    }
    // Special values of the transcendental ops.
    zn::array<T> sp({6}, {T(0), T(-1), inf, -inf, nan, T(-0.0)});
    zn::array<T> lg = zn::log(sp), sq = zn::sqrt(sp), ex = zn::exp(sp), th = zn::tanh(sp);
    CHECK(lg(0) == -inf);
    CHECK(std::isnan(lg(1)));
    CHECK(lg(2) == inf);
    CHECK(std::isnan(lg(4)));
    CHECK(std::isnan(sq(1)));
    CHECK(sq(2) == inf);
    CHECK(ex(2) == inf);
    CHECK(ex(3) == 0);
    CHECK(ex(0) == 1);
    CHECK(std::isnan(ex(4)));
    CHECK(th(2) == 1);
    CHECK(th(3) == -1);
    CHECK(std::signbit(sq(5)));  // sqrt(-0.0) is -0.0
  };
  run(float{});
  run(double{});
}

TEST_CASE("round is half to even, floor and ceil at the edges", "[elementwise]") {
  zn::array<double> x({12}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994,
                             2.5000000000000004, -0.0, 1e300, -3.7, 4503599627370497.0});
  for (bool simd : {true, false}) {
    simd_guard g(simd);
    zn::array<double> r = zn::round(x), f = zn::floor(x), c = zn::ceil(x);
    std::vector<double> want{0, 2, 2, -0.0, -2, -2, 0, 3, -0.0, 1e300, -4, 4503599627370497.0};
    for (std::size_t i = 0; i < 12; ++i) {
      INFO("round(" << x(i) << ")");
      CHECK(r(i) == want[i]);
      CHECK(std::signbit(r(i)) == std::signbit(want[i]));
      CHECK(f(i) == std::floor(x(i)));
      CHECK(c(i) == std::ceil(x(i)));
    }
    zn::array<float> xf = zn::cast<float>(x);
    zn::array<float> rf = zn::round(xf);
    CHECK(rf(0) == 0.f);
    CHECK(rf(1) == 2.f);
    CHECK(rf(2) == 2.f);
    CHECK(rf(5) == -2.f);
  }
}

TEST_CASE("threads sharing a strided loop each walk their own rows", "[elementwise][threads]") {
  // A transposed operand: every thread's evaluator keeps its own row position, so the threads'
  // shares of the rows must not see each other's (each thread a private copy of the evaluator).
  std::size_t rows = 1001, cols = 997;
  std::vector<float> src(rows * cols);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = float(i % 1009) * 0.001f - 0.5f;
  zn::array<float> m({rows, cols}, src);
  std::size_t saved = zn::get_num_threads();
  for (std::size_t threads : {1, 2, 3, 4}) {
    zn::set_num_threads(threads);
    zn::array<float> t = zn::exp(zn::transpose(m)) * 0.5f;
    zn::set_num_threads(saved);
    REQUIRE(t.shape() == zn::shape{cols, rows});
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < cols; ++i)
      for (std::size_t j = 0; j < rows; ++j) {
        double want = std::exp(double(src[j * cols + i])) * 0.5;
        if (std::abs(t(i, j) - want) > 1e-6 * want) ++wrong;
      }
    INFO(threads << " threads");
    CHECK(wrong == 0);
  }
}
