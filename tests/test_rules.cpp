// Derivative rules: every elementwise op's partial<I> (the rule autodiff builds VJPs and JVPs
// from) against central finite differences in double, evaluated both as an array expression
// and as a plain number. Piecewise-constant ops must have a zero finite difference.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string_view>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

namespace {

constexpr std::size_t n_points = 257;

template <class Op>
constexpr std::size_t arity() {
  if constexpr (requires { Op::apply(1.0); })
    return 1;
  else if constexpr (requires { Op::apply(1.0, 1.0); })
    return 2;
  else
    return 3;
}

template <class Op>
constexpr bool has_rule() {
  if constexpr (requires { Op::piecewise_constant; })
    return Op::piecewise_constant;
  else if constexpr (arity<Op>() == 1)
    return requires { Op::template partial<0>(1.0, 1.0); };
  else if constexpr (arity<Op>() == 2)
    return requires { Op::template partial<0>(1.0, 1.0, 1.0); };
  else
    return requires { Op::template partial<1>(1.0, true, 1.0, 1.0); };
}

struct range {
  double lo, hi;
};

// Where an op's operands are drawn from: inside its domain, away from poles.
range domain_of(std::string_view op, std::size_t operand) {
  if (op == "log" || op == "sqrt" || op == "rsqrt" || op == "reciprocal") return {0.2, 3};
  if (op == "log1p") return {-0.5, 2};
  if (op == "tan") return {-1.2, 1.2};
  if (op == "pow") return operand == 0 ? range{0.2, 3} : range{-2, 2};
  if (op == "div" && operand == 1) return {0.5, 2};
  if (op == "clamp") return operand == 0 ? range{-2, 2} : operand == 1 ? range{-1, 0} : range{0, 1};
  return {-2, 2};
}

std::vector<double> draw(range r, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(r.lo, r.hi);
  std::vector<double> v(n_points);
  for (auto& x : v) x = d(gen);
  return v;
}

// The rule's value at point k: the expression evaluated, or a constant rule's number.
template <class P>
double rule_at(P const& p, std::size_t k) {
  if constexpr (zn::expression<P>)
    return zn::eval(p).data()[k];
  else
    return double(p);
}

template <class Op, std::size_t... I>
void check_op(std::index_sequence<I...>) {
  constexpr std::size_t N = sizeof...(I);
  std::string_view name = Op::name;
  INFO("op " << name);
  std::vector<double> xs[N] = {draw(domain_of(name, I), unsigned(100 + I))...};
  zn::array<double> xa[N] = {zn::array<double>({n_points}, xs[I])...};
  auto f = [&](std::size_t k, std::size_t which, double delta) {
    double v[N] = {xs[I][k]...};
    v[which] += delta;
    return double(Op::apply(v[I]...));
  };
  if constexpr (requires { Op::piecewise_constant; }) {
    for (std::size_t k = 0; k < n_points; ++k)
      for (std::size_t w = 0; w < N; ++w) CHECK(f(k, w, 1e-7) - f(k, w, -1e-7) == 0.0);
  } else {
    auto y = zn::eval(zn::detail::apply_op<Op>(xa[I]...));
    auto check_operand = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      auto rule = Op::template partial<J>(y, xa[I]...);
      zn::array<double> ra = zn::eval(rule * 1.0 + y * 0.0);  // constants broadcast to n
      std::size_t bad = 0;
      for (std::size_t k = 0; k < n_points; ++k) {
        double h = 1e-6 * std::max(1.0, std::abs(xs[J][k]));
        double fd = (f(k, J, h) - f(k, J, -h)) / (2 * h);
        double got = ra.data()[k];
        // The same rule on plain numbers.
        double yk = double(Op::apply(xs[I][k]...));
        double num = double(Op::template partial<J>(yk, xs[I][k]...));
        bool ok = std::abs(got - fd) <= 1e-6 * std::max(1.0, std::abs(fd)) &&
                  std::abs(num - got) <= 1e-13 * std::max(1.0, std::abs(got));
        if (!ok && bad++ == 0) {
          INFO("operand " << J << " at point " << k << ": rule " << got << ", as number " << num
                          << ", finite difference " << fd);
          CHECK(ok);
        }
      }
      CHECK(bad == 0);
      (void)rule_at(rule, 0);
    };
    (check_operand(std::integral_constant<std::size_t, I>{}), ...);
  }
}

template <class... Ops>
void check_all(zn::type_list<Ops...>) {
  (
      [] {
        static_assert(has_rule<Ops>(), "an elementwise op has no derivative rule");
        // select and convert have their own tests; stop_gradient's rule is zero by definition,
        // not by finite differences (tests/autodiff/test_stop_gradient.cpp).
        if constexpr (std::string_view(Ops::name) != "select" &&
                      std::string_view(Ops::name) != "convert" &&
                      std::string_view(Ops::name) != "stop_gradient")
          check_op<Ops>(std::make_index_sequence<arity<Ops>()>{});
      }(),
      ...);
}

}  // namespace

TEST_CASE("every elementwise op's derivative rule matches finite differences", "[rules]") {
  check_all(zn::elementwise_ops{});
}

TEST_CASE("where and cast derivative rules", "[rules]") {
  zn::array<double> a({4}, {1, 2, 3, 4}), b({4}, {5, 6, 7, 8});
  zn::array<bool> c({4}, {true, false, false, true});
  auto y = zn::where(c, a, b);
  zn::array<double> da = zn::ops::where::partial<1>(y, c, a, b);
  zn::array<double> db = zn::ops::where::partial<2>(y, c, a, b);
  for (std::size_t k = 0; k < 4; ++k) {
    CHECK(da(k) == (c(k) ? 1.0 : 0.0));
    CHECK(db(k) == (c(k) ? 0.0 : 1.0));
  }
  STATIC_REQUIRE(zn::ops::where::nondiff_operands == 0b1);
  CHECK(zn::ops::cast<double>::partial<0>(a, a) == 1);
  // Ties of maximum and minimum split the gradient evenly, as in JAX.
  zn::array<double> dm0 = zn::ops::maximum::partial<0>(a, a, a);
  zn::array<double> dm1 = zn::ops::minimum::partial<1>(a, a, a);
  CHECK(dm0(0) == 0.5);
  CHECK(dm1(3) == 0.5);
}
