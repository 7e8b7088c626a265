// The op catalogue: every tag in zenith::elementwise_ops carries a name, a CUDA snippet, a scalar
// apply() for float and double and an xsimd simd() for batch<float> and batch<double>, and the
// two agree. A tag missing a member fails to compile here, with a static_assert naming the
// member (the compiler's "required from" line names the op).
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <cmath>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace zn = zenith;

namespace {

template <class Op>
concept has_name = requires {
  { Op::name } -> std::convertible_to<std::string_view>;
};
template <class Op>
concept has_cuda = requires {
  { Op::cuda } -> std::convertible_to<std::string_view>;
};

// The number of operands apply() takes on T (0: no apply).
template <class Op, class T>
constexpr std::size_t arity() {
  if constexpr (requires(T x) { Op::apply(x); })
    return 1;
  else if constexpr (requires(T x) { Op::apply(x, x); })
    return 2;
  else if constexpr (requires(T x) { Op::apply(x, x, x); })
    return 3;
  else
    return 0;
}

// simd()'s operand I on lanes of T: a batch, or a mask where the op takes one (where's condition).
template <class Op, class T, std::size_t I>
using simd_operand =
    std::conditional_t<zn::takes_mask<Op>(I), xsimd::batch_bool<T>, xsimd::batch<T>>;

template <class Op, class T, std::size_t... I>
constexpr bool simd_callable(std::index_sequence<I...>) {
  return requires(simd_operand<Op, T, I> const&... b) { Op::simd(b...); };
}
template <class Op, class T>
constexpr bool has_simd() {
  constexpr std::size_t n = arity<Op, float>();
  if constexpr (n == 0)
    return false;
  else
    return simd_callable<Op, T>(std::make_index_sequence<n>{});
}

// The lane types simd() must take: float and double, except for a conversion, which converts
// lane for lane between types of one width (the evaluator reads other casts on the scalar path).
template <class Op>
struct lanes {
  using first = float;
  using second = double;
};
template <class To>
struct lanes<zn::ops::cast<To>> {
  using first = zn::compute_t<To>;
  using second = std::conditional_t<sizeof(first) == 4, std::int32_t, std::int64_t>;
};

template <class Op>
concept catalogued =
    has_name<Op> && has_cuda<Op> &&(arity<Op, float>() > 0) &&
    (arity<Op, double>() == arity<Op, float>()) && has_simd<Op, typename lanes<Op>::first>() &&
    has_simd<Op, typename lanes<Op>::second>();

// One readable message per missing member.
template <class Op>
constexpr bool check_members() {
  static_assert(has_name<Op>,
                "zenith catalogue: op lacks `static constexpr std::string_view name`");
  static_assert(has_cuda<Op>, "zenith catalogue: op lacks its `cuda` device-source snippet");
  static_assert(arity<Op, float>() > 0, "zenith catalogue: op lacks a scalar apply() for float");
  static_assert(arity<Op, double>() == arity<Op, float>(),
                "zenith catalogue: op lacks a scalar apply() for double");
  static_assert(has_simd<Op, typename lanes<Op>::first>(),
                "zenith catalogue: op lacks simd() for xsimd::batch<float>");
  static_assert(has_simd<Op, typename lanes<Op>::second>(),
                "zenith catalogue: op lacks simd() for xsimd::batch<double>");
  if constexpr (has_name<Op> && has_cuda<Op>) {
    static_assert(!std::string_view(Op::name).empty(), "zenith catalogue: op has an empty name");
    static_assert(!std::string_view(Op::cuda).empty(), "zenith catalogue: op has an empty cuda");
  }
  return catalogued<Op>;
}

// Op::simd() on the batches in[0..n-1], and Op::apply() on their lane i; an operand the op takes
// as a mask (where's condition) is `in > mask_above`.
template <class Op, class T, std::size_t W>
auto simd_on(T const (&in)[3][W], T mask_above) {
  using B = xsimd::batch<T>;
  auto operand = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    if constexpr (zn::takes_mask<Op>(I))
      return B::load_aligned(in[I]) > B(mask_above);
    else
      return B::load_aligned(in[I]);
  };
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return Op::simd(operand(std::integral_constant<std::size_t, I>{})...);
  }
  (std::make_index_sequence<arity<Op, T>()>{});
}
template <class Op, class T, std::size_t W>
auto apply_on(T const (&in)[3][W], std::size_t i, T mask_above) {
  auto operand = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    if constexpr (zn::takes_mask<Op>(I))
      return in[I][i] > mask_above;
    else
      return in[I][i];
  };
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return Op::apply(operand(std::integral_constant<std::size_t, I>{})...);
  }
  (std::make_index_sequence<arity<Op, T>()>{});
}

// Runs simd() on a few lanes and checks each lane against apply().
template <class Op, class T>
void check_agreement() {
  constexpr std::size_t W = xsimd::batch<T>::size;
  // Inputs in [0.25, 2]: inside every op's domain (log, sqrt, pow, atan2, ...).
  alignas(64) T in[3][W];
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t i = 0; i < W; ++i) in[k][i] = T(0.25 + 0.07 * double((i * 5 + k * 3) % 26));
  auto r = simd_on<Op>(in, T(1));
  double tol = std::is_same_v<T, double> ? 1e-13 : 1e-6;
  for (std::size_t i = 0; i < W; ++i) {
    auto s = apply_on<Op>(in, i, T(1));
    double got = double(r.get(i)), want = double(s);
    INFO(Op::name << " on " << (std::is_same_v<T, float> ? "float" : "double") << " lane " << i
                  << ": simd " << got << ", apply " << want);
    CHECK(std::abs(got - want) <= tol * (1 + std::abs(want)));
  }
}

// simd() against apply() where C's rules decide the result: every combination of NaN, +-inf,
// +-0 and ordinary values (negative ones too) over the op's operands, lane by lane. NaN agrees
// with NaN only, an infinity with the same infinity only; the lanes after the last combination
// repeat the first.
template <class Op, class T>
void check_special_values() {
  constexpr std::size_t n = arity<Op, T>();
  using B = xsimd::batch<T>;
  constexpr std::size_t W = B::size;
  T const v[] = {std::numeric_limits<T>::quiet_NaN(),
                 std::numeric_limits<T>::infinity(),
                 -std::numeric_limits<T>::infinity(),
                 T(0),
                 T(-0.0),
                 T(0.5),
                 T(-0.5),
                 T(1),
                 T(-1),
                 T(1.5),
                 T(-2),
                 T(3)};
  constexpr std::size_t m = std::size(v);
  std::size_t combos = 1;
  for (std::size_t k = 0; k < n; ++k) combos *= m;
  auto value = [&](std::size_t combo, std::size_t k) {
    for (std::size_t j = 0; j < k; ++j) combo /= m;
    return v[combo % m];
  };
  double tol = std::is_same_v<T, double> ? 1e-13 : 1e-6;
  for (std::size_t first = 0; first < combos; first += W) {
    alignas(64) T in[3][W];
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t i = 0; i < W; ++i) in[k][i] = value((first + i) % combos, k);
    auto r = simd_on<Op>(in, T(0));
    for (std::size_t i = 0; i < W; ++i) {
      auto s = apply_on<Op>(in, i, T(0));
      double got = double(r.get(i)), want = double(s);
      INFO(Op::name << " on " << (std::is_same_v<T, float> ? "float" : "double") << " of ("
                    << double(in[0][i]) << (n > 1 ? ", " + std::to_string(double(in[1][i])) : "")
                    << (n > 2 ? ", " + std::to_string(double(in[2][i])) : "") << "): simd " << got
                    << ", apply " << want);
      if (std::isnan(got) || std::isnan(want))
        CHECK((std::isnan(got) && std::isnan(want)));
      else if (std::isinf(got) || std::isinf(want))
        CHECK(got == want);
      else
        CHECK(std::abs(got - want) <= tol * (1 + std::abs(want)));
    }
  }
}

template <class Op>
void check_op(std::set<std::string_view>& names) {
  STATIC_REQUIRE(check_members<Op>());
  INFO("op " << Op::name);
  CHECK_FALSE(Op::name.empty());
  CHECK_FALSE(Op::cuda.empty());
  CHECK(names.insert(Op::name).second);  // names are unique: the IR and error messages use them
  // The snippet uses every operand placeholder {0}..{n-1} and no other.
  constexpr std::size_t n = arity<Op, float>();
  std::string cuda(Op::cuda);
  // (A char array, not "{" + std::to_string(k) + "}": GCC 12 gives a false -Wrestrict on
  // that at -O3.)
  for (std::size_t k = 0; k < 3; ++k) {
    char placeholder[] = {'{', char('0' + k), '}', 0};
    CHECK((cuda.find(placeholder) != std::string::npos) == (k < n));
  }
  check_agreement<Op, typename lanes<Op>::first>();
  check_agreement<Op, typename lanes<Op>::second>();
  if constexpr (std::is_floating_point_v<typename lanes<Op>::first>)
    check_special_values<Op, typename lanes<Op>::first>();
  if constexpr (std::is_floating_point_v<typename lanes<Op>::second>)
    check_special_values<Op, typename lanes<Op>::second>();
}

template <class... Ops>
std::size_t walk(zn::type_list<Ops...>) {
  std::set<std::string_view> names;
  (check_op<Ops>(names), ...);
  return sizeof...(Ops);
}

template <class Op, class... Ops>
constexpr bool listed(zn::type_list<Ops...>) {
  return (std::is_same_v<Op, Ops> || ...);
}
template <class E>
constexpr bool op_listed() {
  return listed<typename E::op_type>(zn::elementwise_ops{});
}

// Tags that lack a member: the catalogue check must reject each.
struct op_without_simd {
  static constexpr std::string_view name = "no_simd";
  static constexpr std::string_view cuda = "{0}";
  template <class T>
  static T apply(T x) {
    return x;
  }
};
struct op_without_cuda {
  static constexpr std::string_view name = "no_cuda";
  template <class T>
  static T apply(T x) {
    return x;
  }
  template <class B>
  static B simd(B const& x) {
    return x;
  }
};
struct op_without_apply {
  static constexpr std::string_view name = "no_apply";
  static constexpr std::string_view cuda = "{0}";
  template <class B>
  static B simd(B const& x) {
    return x;
  }
};
struct op_without_name {
  [[maybe_unused]] static constexpr std::string_view cuda = "{0}";
  template <class T>
  static T apply(T x) {
    return x;
  }
  template <class B>
  static B simd(B const& x) {
    return x;
  }
};
struct op_float_only_simd {  // simd() for float batches only
  static constexpr std::string_view name = "float_simd";
  static constexpr std::string_view cuda = "{0}";
  template <class T>
  static T apply(T x) {
    return x;
  }
  static xsimd::batch<float> simd(xsimd::batch<float> const& x) { return x; }
};
struct op_complete {
  static constexpr std::string_view name = "complete";
  static constexpr std::string_view cuda = "({0} + {1})";
  template <class T>
  static T apply(T x, T y) {
    return x + y;
  }
  template <class B>
  static B simd(B const& x, B const& y) {
    return x + y;
  }
};

}  // namespace

TEST_CASE("every op in the catalogue has name, cuda, apply and simd, and they agree",
          "[catalogue]") {
  std::size_t count = walk(zn::elementwise_ops{});
  CHECK(count >= 40);
}

TEST_CASE("the catalogue check rejects an op that lacks a member", "[catalogue]") {
  STATIC_REQUIRE(catalogued<op_complete>);
  STATIC_REQUIRE_FALSE(catalogued<op_without_simd>);
  STATIC_REQUIRE_FALSE(catalogued<op_without_cuda>);
  STATIC_REQUIRE_FALSE(catalogued<op_without_apply>);
  STATIC_REQUIRE_FALSE(catalogued<op_without_name>);
  STATIC_REQUIRE_FALSE(catalogued<op_float_only_simd>);
}

TEST_CASE("every public elementwise function builds a catalogued op", "[catalogue]") {
  zn::array<float> a({1}, {1.f});
  STATIC_REQUIRE(op_listed<decltype(-a)>());
  STATIC_REQUIRE(op_listed<decltype(zn::abs(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::sign(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::exp(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::log(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::log1p(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::expm1(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::sqrt(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::rsqrt(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::square(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::sin(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::cos(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::tan(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::tanh(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::sigmoid(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::relu(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::gelu(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::gelu_tanh(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::gelu_erf(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::erf(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::floor(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::ceil(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::round(a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::reciprocal(a))>());
  STATIC_REQUIRE(op_listed<decltype(a + a)>());
  STATIC_REQUIRE(op_listed<decltype(a - a)>());
  STATIC_REQUIRE(op_listed<decltype(a * a)>());
  STATIC_REQUIRE(op_listed<decltype(a / a)>());
  STATIC_REQUIRE(op_listed<decltype(zn::pow(a, a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::maximum(a, a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::minimum(a, a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::atan2(a, a))>());
  STATIC_REQUIRE(op_listed<decltype(a == a)>());
  STATIC_REQUIRE(op_listed<decltype(a != a)>());
  STATIC_REQUIRE(op_listed<decltype(a < a)>());
  STATIC_REQUIRE(op_listed<decltype(a <= a)>());
  STATIC_REQUIRE(op_listed<decltype(a > a)>());
  STATIC_REQUIRE(op_listed<decltype(a >= a)>());
  STATIC_REQUIRE(op_listed<decltype(zn::where(a > a, a, a))>());
  STATIC_REQUIRE(op_listed<decltype(zn::clip(a, 0, 1))>());
  STATIC_REQUIRE(op_listed<decltype(zn::cast<float>(zn::array<double>()))>());
  // cast<To> is a family: every member is complete, whatever To is.
  STATIC_REQUIRE(check_members<zn::ops::cast<double>>());
  STATIC_REQUIRE(check_members<zn::ops::cast<std::int32_t>>());
  STATIC_REQUIRE(check_members<zn::ops::cast<zn::bfloat16>>());
}
