#pragma once
// Reductions: sum, mean, prod, max, min, argmax, argmin, logsumexp, var, std.
//
// Each takes an expression and nothing (all axes), an integer axis or a list of axes
// (`{0, 2}`, std::vector<int>), plus keepdims. Axes are integers only: `max(x, 0)` reduces over
// axis 0 and `max(x, 0.5)` does not compile (elementwise max is `maximum`). Negative axes count
// from the end; an axis out of range or repeated is a shape_error naming the op and the shape.
//
// A reduction is a barrier node, reduce_node<Op, C>: inside a bigger expression it is computed
// into a small buffer first and then read as a leaf, so `x - mean(x, 1, true)` is one fused pass
// after the reduction. The reduction itself reads its child expression once, with no temporary
// (backend/cpu/reduce.hpp).
//
// One op, one place: every reduction is a tag type in namespace ops carrying
//   name            IR name (JAX / StableHLO / ONNX style)
//   input<T>        the type the child is converted to first (sum of bool -> int32, mean of int
//                   -> float32), result<T> the value type of the reduction of an input<T>
//   identity<A>()   the value of an empty reduction, in the accumulator type A
//   combine(a, b)   scalar combine (associative), simd(a, b) the same on xsimd batches
//   hreduce(b)      a batch's lanes combined into one value (a fixed tree)
//   finalize(a, n)  the accumulator of n elements to the result (mean divides by n)
//   cuda            device source of combine, {0} {1} the operands, {T} the accumulator type;
//                   cuda_identity and cuda_finalize ({n} the element count) likewise
//                   ({lowest} / {highest}: the accumulator type's -inf / +inf or extreme value)
// argmax / argmin are `indexed`: their state is a (value, index) pair that combine() merges
// using better(a, b) (scalar) / simd_better (batches); their `cuda` is better(a, b).
// var and std are composites: lazy expressions of mean, sum and elementwise ops. logsumexp is a
// node of its own (one rule for autodiff and IR) that the CPU evaluates in two passes: the max,
// then the sum of exp(x - max).
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

// xsimd (its warnings silenced) before the other zenith headers
#include "simd_exp.hpp"

#include "../core/expr_base.hpp"
#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "ops.hpp"

namespace zenith {

namespace detail {
// A batch's lanes combined pairwise in a fixed tree: lane i with lane i + W/2, and so on.
template <class Op, class B>
auto tree_hreduce(B const& b) {
  using T = typename B::value_type;
  constexpr std::size_t W = B::size;
  alignas(64) T lanes[W];
  b.store_aligned(lanes);
  for (std::size_t w = W; w > 1; w /= 2)
    for (std::size_t i = 0; i < w / 2; ++i) lanes[i] = Op::combine(lanes[i], lanes[i + w / 2]);
  return lanes[0];
}
template <class A>
constexpr A lowest_value() {
  if constexpr (std::numeric_limits<A>::has_infinity)
    return -std::numeric_limits<A>::infinity();
  else
    return std::numeric_limits<A>::lowest();
}
template <class A>
constexpr A highest_value() {
  if constexpr (std::numeric_limits<A>::has_infinity)
    return std::numeric_limits<A>::infinity();
  else
    return std::numeric_limits<A>::max();
}
// A floating-point value (a number or an xsimd batch) as computed, hidden from the optimizer.
// Under -ffp-contract=fast (GCC's default) a product that feeds a sum's accumulator may become
// one multiply-add with it, and whether it does depends on the loop around it (GCC weighs
// loop-carried multiply-add chains per target): the same sum, computed by two loops, would
// differ in the last bits. A sum adds its operand settled, so every loop rounds it first.
template <class V>
V settled(V v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__))
#if defined(__aarch64__)
#define ZENITH_FP_REG "+w"
#else
#define ZENITH_FP_REG "+v"
#endif
  if constexpr (std::is_floating_point_v<V>)
    asm("" : ZENITH_FP_REG(v));
  else if constexpr (requires { v.data; })
    if constexpr (std::is_floating_point_v<typename V::value_type>) asm("" : ZENITH_FP_REG(v.data));
#undef ZENITH_FP_REG
#endif
  return v;
}

// Integer sums and products wrap around on overflow, as in JAX (and without undefined behaviour).
template <class A>
A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>)
    return A(std::make_unsigned_t<A>(a) + std::make_unsigned_t<A>(b));
  else
    return a + settled(b);
}
template <class A>
A wrap_mul(A a, A b) {
  if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>)
    return A(std::make_unsigned_t<A>(a) * std::make_unsigned_t<A>(b));
  else
    return a * b;
}
template <class T>
using sum_input_t = std::conditional_t<std::is_same_v<T, bool>, std::int32_t, T>;
}  // namespace detail

namespace ops {

// What the folding reductions share: input and result are the element type, a batch's lanes
// fold in a fixed tree, and the accumulator is the answer. A tag redeclares what differs.
template <class Self>
struct fold_defaults {
  static constexpr std::string_view cuda_finalize = "{0}";
  template <class T>
  using input = T;
  template <class T>
  using result = T;
  template <class B>
  static auto hreduce(B const& b) {
    return ::zenith::detail::tree_hreduce<Self>(b);
  }
  template <class A>
  static A finalize(A acc, std::size_t) {
    return acc;
  }
};

struct reduce_sum : fold_defaults<reduce_sum> {
  static constexpr std::string_view name = "reduce_sum";
  static constexpr std::string_view cuda = "({0} + {1})";
  static constexpr std::string_view cuda_identity = "(({T})0)";
  static constexpr bool has_identity = true;
  template <class T>
  using input = ::zenith::detail::sum_input_t<T>;
  template <class A>
  static A identity() {
    return A(0);
  }
  template <class A>
  static A combine(A a, A b) {
    return ::zenith::detail::wrap_add(a, b);
  }
  template <class B>
  static B simd(B const& a, B const& b) {
    return a + ::zenith::detail::settled(b);
  }
};

// The mean: a sum divided by the element count (NaN for none). Integer input gives float32.
struct reduce_mean : reduce_sum {
  static constexpr std::string_view name = "reduce_mean";
  static constexpr std::string_view cuda_finalize = "({0} / ({T}){n})";
  template <class T>
  using input = float_of_t<T>;
  template <class A>
  static A finalize(A acc, std::size_t n) {
    return acc / A(n);
  }
};

struct reduce_prod : fold_defaults<reduce_prod> {
  static constexpr std::string_view name = "reduce_prod";
  static constexpr std::string_view cuda = "({0} * {1})";
  static constexpr std::string_view cuda_identity = "(({T})1)";
  static constexpr bool has_identity = true;
  template <class T>
  using input = ::zenith::detail::sum_input_t<T>;
  template <class A>
  static A identity() {
    return A(1);
  }
  template <class A>
  static A combine(A a, A b) {
    return ::zenith::detail::wrap_mul(a, b);
  }
  template <class B>
  static B simd(B const& a, B const& b) {
    return a * b;
  }
};

// max / min propagate NaN, as numpy.max and jnp.max do: the elementwise maximum / minimum
// folded over the axes. An empty max or min is an error, so neither has an identity.
template <class Pick, bool Max>
struct reduce_extreme : fold_defaults<reduce_extreme<Pick, Max>> {
  static constexpr std::string_view name = Max ? "reduce_max" : "reduce_min";
  static constexpr std::string_view cuda =
      Max ? "(({0} > {1} || {0} != {0}) ? {0} : {1})" : "(({0} < {1} || {0} != {0}) ? {0} : {1})";
  static constexpr std::string_view cuda_identity = Max ? "{lowest}" : "{highest}";
  static constexpr bool has_identity = false;
  template <class A>
  static A identity() {
    if constexpr (Max)
      return ::zenith::detail::lowest_value<A>();
    else
      return ::zenith::detail::highest_value<A>();
  }
  template <class A>
  static A combine(A a, A b) {
    return Pick::apply(a, b);
  }
  template <class B>
  static B simd(B const& a, B const& b) {
    return Pick::simd(a, b);
  }
};
using reduce_max = reduce_extreme<maximum, true>;
using reduce_min = reduce_extreme<minimum, false>;

// argmax / argmin: the index of the first best element along one axis (or of the flattened
// array); a NaN beats every number, so the first NaN is found, as in NumPy. The state is a
// (value, index) pair; index -1 marks "nothing better than identity seen yet", and a reduction
// that ends that way had only identity-valued elements, so its answer is its first index, 0.
// combine keeps the better value, the lower index on ties.
#define ZENITH_ARG_REDUCTION(NAME, CMP, WORST, CUDA_WORST)                                       \
  struct NAME {                                                                                  \
    static constexpr std::string_view name = #NAME;                                              \
    static constexpr std::string_view cuda = "({0} " #CMP " {1} || ({0} != {0} && {1} == {1}))"; \
    static constexpr std::string_view cuda_identity = CUDA_WORST;                                \
    static constexpr std::string_view cuda_finalize = "({0} < 0 ? 0 : {0})";                     \
    static constexpr bool has_identity = false;                                                  \
    static constexpr bool indexed = true;                                                        \
    template <class T>                                                                           \
    using input = T;                                                                             \
    template <class T>                                                                           \
    using result = std::int64_t;                                                                 \
    template <class A>                                                                           \
    struct state {                                                                               \
      A value;                                                                                   \
      std::int64_t index;                                                                        \
    };                                                                                           \
    template <class A>                                                                           \
    static A identity() {                                                                        \
      return ::zenith::detail::WORST<A>();                                                       \
    }                                                                                            \
    /* whether a replaces b */                                                                   \
    template <class A>                                                                           \
    static bool better(A a, A b) {                                                               \
      return a CMP b || (a != a && b == b);                                                      \
    }                                                                                            \
    template <class B>                                                                           \
    static auto simd_better(B const& a, B const& b) {                                            \
      return (a CMP b) || ((a != a) && (b == b));                                                \
    }                                                                                            \
    template <class A>                                                                           \
    static state<A> combine(state<A> a, state<A> b) {                                            \
      if (b.index < 0) return a;                                                                 \
      if (a.index < 0) return b;                                                                 \
      if (better(b.value, a.value)) return b;                                                    \
      if (better(a.value, b.value)) return a;                                                    \
      return a.index <= b.index ? a : b;                                                         \
    }                                                                                            \
    template <class A>                                                                           \
    static std::int64_t finalize(state<A> s, std::size_t) {                                      \
      return s.index < 0 ? 0 : s.index;                                                          \
    }                                                                                            \
  };
ZENITH_ARG_REDUCTION(argmax, >, lowest_value, "{lowest}")
ZENITH_ARG_REDUCTION(argmin, <, highest_value, "{highest}")
#undef ZENITH_ARG_REDUCTION

// log(sum(exp(x))), computed stably as m + log(sum(exp(x - m))) with m the max (taken as 0
// where it is not finite). combine is logaddexp; the CPU evaluator uses the two-pass form.
struct reduce_logsumexp : fold_defaults<reduce_logsumexp> {
  static constexpr std::string_view name = "reduce_logsumexp";
  static constexpr std::string_view cuda =
      "(max({0}, {1}) == -INFINITY ? {1} : max({0}, {1}) + log1p(exp(-fabs({0} - {1}))))";
  static constexpr std::string_view cuda_identity = "(-INFINITY)";
  static constexpr bool has_identity = true;  // log(0) = -inf
  template <class T>
  using input = float_of_t<T>;
  template <class A>
  static A identity() {
    return -std::numeric_limits<A>::infinity();
  }
  template <class A>
  static A combine(A a, A b) {
    using std::abs, std::exp, std::log1p;
    A m = maximum::apply(a, b);
    if (m == -std::numeric_limits<A>::infinity()) return b;
    if (m == std::numeric_limits<A>::infinity()) return m;
    return m + log1p(exp(-abs(a - b)));
  }
  template <class B>
  static B simd(B const& a, B const& b) {
    using A = typename B::value_type;
    B m = maximum::simd(a, b);
    B r = m + xsimd::log1p(detail::simd_exp(-xsimd::abs(a - b)));
    r = xsimd::select(m == B(-std::numeric_limits<A>::infinity()), b, r);
    return xsimd::select(m == B(std::numeric_limits<A>::infinity()), m, r);
  }
};

}  // namespace ops

// The catalogue the op test walks.
using reduction_ops =
    type_list<ops::reduce_sum, ops::reduce_mean, ops::reduce_prod, ops::reduce_max, ops::reduce_min,
              ops::argmax, ops::argmin, ops::reduce_logsumexp>;

template <class Op>
concept indexed_reduction = requires {
  requires Op::indexed;
};

// A reduction of child C over the axes in `axes` (bit k: axis k of C). A barrier: evaluated by
// eval_barrier (backend/cpu/reduce.hpp) into an array that the rest of an expression reads.
template <class Op, expression C>
struct reduce_node : expr_base<reduce_node<Op, C>> {
  using op_type = Op;
  using child_type = C;
  using value_type = typename Op::template result<value_t<C>>;
  static constexpr bool fixed = false;
  static constexpr bool barrier = true;

  C child;
  std::uint32_t axes = 0;
  bool keepdims = false;
  zenith::shape shape_;

  reduce_node(C c, std::uint32_t ax, bool keep) : child(std::move(c)), axes(ax), keepdims(keep) {
    zenith::shape in = child.shape();
    for (std::size_t k = 0; k < in.size(); ++k) {
      if (!(axes >> k & 1))
        shape_.push_back(in[k]);
      else if (keepdims)
        shape_.push_back(1);
    }
  }
  zenith::shape shape() const { return shape_; }
  std::tuple<C const&> operands() const { return {child}; }  // the node protocol (expr/node.hpp)
  template <class D>
  reduce_node<Op, D> with_operands(D d) const {
    return reduce_node<Op, D>(std::move(d), axes, keepdims);
  }
  bool reduces(std::size_t k) const { return axes >> k & 1; }
  // Number of child elements that go into each output element.
  std::size_t count() const {
    zenith::shape in = child.shape();
    std::size_t n = 1;
    for (std::size_t k = 0; k < in.size(); ++k)
      if (reduces(k)) n *= in[k];
    return n;
  }
  template <class F>
  void for_each_array(F&& f) const {
    child.for_each_array(f);
  }
};

template <class E>
inline constexpr bool is_reduce_node_v = false;
template <class Op, class C>
inline constexpr bool is_reduce_node_v<reduce_node<Op, C>> = true;

namespace detail {

inline std::uint32_t all_axes_mask(std::size_t rank) {
  return rank ? std::uint32_t((std::uint64_t(1) << rank) - 1) : 0u;
}

inline std::uint32_t axes_mask(std::vector<int> const& axes, zenith::shape const& s,
                               std::string_view op) {
  std::uint32_t m = 0;
  int r = int(s.size());
  for (int a : axes) {
    if (a < -r || a >= r)
      throw shape_error(std::string(op) + ": axis " + std::to_string(a) +
                        " out of range for shape " + s.str());
    std::size_t k = std::size_t(a < 0 ? a + r : a);
    if (m >> k & 1)
      throw shape_error(std::string(op) + ": axis " + std::to_string(a) + " repeated for shape " +
                        s.str());
    m |= 1u << k;
  }
  return m;
}

template <std::integral I>
std::uint32_t axis_mask(I axis, zenith::shape const& s, std::string_view op) {
  long long a = static_cast<long long>(axis), r = (long long)s.size();
  if constexpr (std::unsigned_integral<I>) {
    if (static_cast<unsigned long long>(axis) >= static_cast<unsigned long long>(r)) a = r;
  }
  if (a < -r || a >= r)
    throw shape_error(std::string(op) + ": axis " + std::to_string(axis) +
                      " out of range for shape " + s.str());
  return 1u << std::size_t(a < 0 ? a + r : a);
}

inline std::size_t reduced_count(zenith::shape const& s, std::uint32_t mask) {
  std::size_t n = 1;
  for (std::size_t k = 0; k < s.size(); ++k)
    if (mask >> k & 1) n *= s[k];
  return n;
}

inline std::string axes_str(std::uint32_t mask, std::size_t rank) {
  std::string out;
  for (std::size_t k = 0; k < rank; ++k)
    if (mask >> k & 1) out += (out.empty() ? "" : ", ") + std::to_string(k);
  return out;
}

// Builds reduce_node<Op, ...> over e converted to Op's input type. `fn` names the public
// function in errors.
template <class Op, expression E>
auto make_reduce(E const& e, std::uint32_t mask, bool keepdims, std::string_view fn) {
  if constexpr (!Op::has_identity) {
    zenith::shape s = e.shape();
    if (reduced_count(s, mask) == 0)
      throw value_error(std::string(fn) + ": zero-size reduction over axes (" +
                        axes_str(mask, s.size()) + ") of shape " + s.str() + " has no identity");
  }
  using In = typename Op::template input<value_t<E>>;
  auto x = convert<In>(e);
  return reduce_node<Op, decltype(x)>(std::move(x), mask, keepdims);
}

}  // namespace detail

// The public reductions. For each NAME:
//   NAME(e)                      all axes
//   NAME(e, keepdims)            all axes, keepdims a bool (not a number)
//   NAME(e, axis, keepdims)      one integer axis
//   NAME(e, {axes}, keepdims)    several axes (std::vector<int>; `{}` reduces none)
#define ZENITH_REDUCTION(NAME, OP)                                                                 \
  template <expression E>                                                                          \
  auto NAME(E const& e) {                                                                          \
    return detail::make_reduce<ops::OP>(e, detail::all_axes_mask(e.shape().size()), false, #NAME); \
  }                                                                                                \
  template <expression E, std::same_as<bool> B>                                                    \
  auto NAME(E const& e, B keepdims) {                                                              \
    return detail::make_reduce<ops::OP>(e, detail::all_axes_mask(e.shape().size()), keepdims,      \
                                        #NAME);                                                    \
  }                                                                                                \
  template <expression E, std::integral I, std::same_as<bool> B = bool>                            \
  requires(!std::same_as<I, bool>) auto NAME(E const& e, I axis, B keepdims = false) {             \
    return detail::make_reduce<ops::OP>(e, detail::axis_mask(axis, e.shape(), #NAME), keepdims,    \
                                        #NAME);                                                    \
  }                                                                                                \
  template <expression E, std::same_as<bool> B = bool>                                             \
  auto NAME(E const& e, std::vector<int> const& axes, B keepdims = false) {                        \
    return detail::make_reduce<ops::OP>(e, detail::axes_mask(axes, e.shape(), #NAME), keepdims,    \
                                        #NAME);                                                    \
  }
ZENITH_REDUCTION(sum, reduce_sum)
ZENITH_REDUCTION(mean, reduce_mean)
ZENITH_REDUCTION(prod, reduce_prod)
ZENITH_REDUCTION(max, reduce_max)
ZENITH_REDUCTION(min, reduce_min)
ZENITH_REDUCTION(logsumexp, reduce_logsumexp)
#undef ZENITH_REDUCTION

// argmax / argmin: the int64 index of the first best element along one axis, or in the
// flattened array when no axis is given. An empty axis is a value_error.
#define ZENITH_ARG_FN(NAME)                                                                       \
  template <expression E>                                                                         \
  auto NAME(E const& e) {                                                                         \
    return detail::make_reduce<ops::NAME>(e, detail::all_axes_mask(e.shape().size()), false,      \
                                          #NAME);                                                 \
  }                                                                                               \
  template <expression E, std::same_as<bool> B>                                                   \
  auto NAME(E const& e, B keepdims) {                                                             \
    return detail::make_reduce<ops::NAME>(e, detail::all_axes_mask(e.shape().size()), keepdims,   \
                                          #NAME);                                                 \
  }                                                                                               \
  template <expression E, std::integral I, std::same_as<bool> B = bool>                           \
  requires(!std::same_as<I, bool>) auto NAME(E const& e, I axis, B keepdims = false) {            \
    return detail::make_reduce<ops::NAME>(e, detail::axis_mask(axis, e.shape(), #NAME), keepdims, \
                                          #NAME);                                                 \
  }
ZENITH_ARG_FN(argmax)
ZENITH_ARG_FN(argmin)
#undef ZENITH_ARG_FN

namespace detail {
// Variance over the axes in mask: sum((x - mean(x))^2) / max(n - ddof, 0), two-pass, computed
// in float_of_t<T>'s compute type (float for integer and 16-bit input).
template <expression E>
auto var_compute(E const& e, std::uint32_t mask, bool keepdims, int ddof) {
  using W = compute_t<float_of_t<value_t<E>>>;
  auto x = convert<W>(e);
  auto mu = reduce_node<ops::reduce_mean, decltype(x)>(x, mask, true);
  auto dev = square(x - mu);
  auto ss = reduce_node<ops::reduce_sum, decltype(dev)>(std::move(dev), mask, keepdims);
  long long n = (long long)reduced_count(e.shape(), mask) - ddof;
  return ss / W(n > 0 ? n : 0);
}
template <expression E>
auto var_impl(E const& e, std::uint32_t mask, bool keepdims, int ddof) {
  return convert<float_of_t<value_t<E>>>(var_compute(e, mask, keepdims, ddof));
}
template <expression E>
auto std_impl(E const& e, std::uint32_t mask, bool keepdims, int ddof) {
  return convert<float_of_t<value_t<E>>>(sqrt(var_compute(e, mask, keepdims, ddof)));
}
}  // namespace detail

// var(e, ..., keepdims, ddof) and std(e, ..., keepdims, ddof): the axes as for sum; ddof (delta
// degrees of freedom, default 0) as in NumPy: the divisor is n - ddof. Integer input gives
// float32; bfloat16 / float16 input is computed in float and rounded at the end.
#define ZENITH_VAR_FN(NAME)                                                                   \
  template <expression E>                                                                     \
  auto NAME(E const& e) {                                                                     \
    return detail::NAME##_impl(e, detail::all_axes_mask(e.shape().size()), false, 0);         \
  }                                                                                           \
  template <expression E, std::same_as<bool> B>                                               \
  auto NAME(E const& e, B keepdims, int ddof = 0) {                                           \
    return detail::NAME##_impl(e, detail::all_axes_mask(e.shape().size()), keepdims, ddof);   \
  }                                                                                           \
  template <expression E, std::integral I, std::same_as<bool> B = bool>                       \
  requires(!std::same_as<I, bool>) auto NAME(E const& e, I axis, B keepdims = false,          \
                                             int ddof = 0) {                                  \
    return detail::NAME##_impl(e, detail::axis_mask(axis, e.shape(), #NAME), keepdims, ddof); \
  }                                                                                           \
  template <expression E, std::same_as<bool> B = bool>                                        \
  auto NAME(E const& e, std::vector<int> const& axes, B keepdims = false, int ddof = 0) {     \
    return detail::NAME##_impl(e, detail::axes_mask(axes, e.shape(), #NAME), keepdims, ddof); \
  }
ZENITH_VAR_FN(var)
ZENITH_VAR_FN(std)
#undef ZENITH_VAR_FN

}  // namespace zenith
