#pragma once
// zenith::rvar<T>: a reverse-mode derivative scalar. A value and the index of its node on a
// thread-local tape; each node holds up to two parent indices and the local partial derivatives
// with respect to them. jacrev and the tensor form of grad (transforms/jacrev.hpp) record a
// function's scalar operations this way and then sweep the tape backwards once per output
// component, so a function of many inputs and few outputs costs one recording plus a few sweeps.
//
//   zn::tensor<double, 7> q{...};
//   zn::tensor<double, 3, 7> J = zn::jacrev(fk)(q);    // fk sees a tensor<rvar<double>, 7>
//
// - A plain number is a constant and never becomes a tape variable. An rvar built from a
//   number (`rvar<double> c = 0.5`, or the 0.0 in `tensor<rvar<double>, 4, 4>{c, -s, 0.0, ...}`)
//   has no node either, and operations whose operands are all constants record nothing.
// - Recording, with x a variable and c a constant:
//     x * c, c * x, x / c, c / x, c - x, -x, unary math   one node, one parent
//     x + c, x - c, c + x, x * 1, x / 1                   no node (the result shares x's node:
//                                                         its derivative is 1)
//     x * 0, 0 * x, 0 / x                                 no node (a constant: its derivative
//                                                         is 0)
//     x op y                                              one node, two parents
// - Comparisons compare values.
// - The math functions (sin, exp, pow, atan2, ...) take their value and partial derivatives
//   from the op tags in expr/ops.hpp (`apply` and `partial<I>`): one op, one place. + - * / are
//   written out. Piecewise-constant ops (floor, sign, ...) give constants, as in JAX.
// - zenith::tensor<rvar<T>, M...> works with the fixed-size ops (matmul, reductions, cross,
//   norm, elementwise math) through number_traits and promote (core/dtype.hpp), as dual does.
// - The tape is a thread-local array per T that grows by doubling and is cut back (not freed)
//   when a transform returns or throws: once it has grown to a function's size, recording
//   allocates nothing.
//   An rvar is only meaningful while the transform that made it runs; keep plain values.
#include <cmath>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <ostream>
#include <type_traits>

#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/tensor.hpp"       // ZENITH_FIXED_INLINE
#include "../expr/elementwise.hpp"  // detail::apply_op, which the op tags' rules call
#include "../expr/ops.hpp"

namespace zenith {

template <std::floating_point T>
struct rvar;

template <class T>
inline constexpr bool is_rvar_v = false;
template <class T>
inline constexpr bool is_rvar_v<rvar<T>> = true;

template <class T>
struct number_traits<rvar<T>> {
  using value_type = T;
  static constexpr int depth = 1;
};

namespace detail {

// The index of a value with no node: a constant.
inline constexpr std::uint32_t rvar_none = 0xffffffffu;

// One recorded operation: d(this) / d(a) = pa, d(this) / d(b) = pb. A node with one parent
// names itself as b with pb = 0: the reverse sweep handles every node alike, and a node's own
// adjoint is never read again once it has been passed on. Input nodes (leaves) have no parent
// and are never swept.
template <class T>
struct rnode {
  std::uint32_t a, b;
  T pa, pb;
};

[[noreturn]] inline void rvar_tape_full() {
  throw value_error("rvar: the reverse-mode tape is full (2^32 - 1 nodes)");
}

// The tape: nodes [0, size()), and scratch adjoints for the reverse sweeps. Plain pointers in
// a trivially destructible thread_local, so that recording an operation is an inline store and
// a compare with no initialisation guard; the memory grows by doubling, is never shrunk, and
// is freed when the thread exits (tape_memory).
template <class T>
struct reverse_tape {
  rnode<T>* nodes = nullptr;
  T* adjoints = nullptr;
  std::uint32_t count = 0;
  std::uint32_t cap = 0;
  std::uint32_t adjoint_cap = 0;

  std::uint32_t size() const { return count; }
  bool empty() const { return count == 0; }
  std::uint32_t capacity() const { return cap; }
  rnode<T> const* data() const { return nodes; }
  rnode<T> const& back() const { return nodes[count - 1]; }
  rnode<T> const& operator[](std::size_t i) const { return nodes[i]; }
  // Back to n nodes; the memory stays.
  void truncate(std::uint32_t n) { count = n; }
  // Adjoint scratch for every node recorded so far (grows only).
  T* adjoints_for_all() {
    if (adjoint_cap < count) grow_adjoints();
    return adjoints;
  }

  // An input variable.
  std::uint32_t leaf() { return push_node({rvar_none, rvar_none, T(0), T(0)}); }
  // d(new) / d(a) = pa: the node names itself as its second parent, with partial 0.
  ZENITH_FIXED_INLINE std::uint32_t push(std::uint32_t a, T pa) {
    return push_node({a, count, pa, T(0)});
  }
  ZENITH_FIXED_INLINE std::uint32_t push(std::uint32_t a, T pa, std::uint32_t b, T pb) {
    return push_node({a, b, pa, pb});
  }

 private:
  ZENITH_FIXED_INLINE std::uint32_t push_node(rnode<T> const& n) {
    if (count == cap) [[unlikely]]
      grow();
    nodes[count] = n;
    return count++;
  }
  void grow();
  void grow_adjoints();
  void own_memory();
};

// Owns the calling thread's tape memory: frees it when the thread exits. Created by the first
// growth, so that the recording path never sees its initialisation guard.
template <class T>
struct tape_memory {
  reverse_tape<T>* tape;
  ~tape_memory() {
    std::free(tape->nodes);
    std::free(tape->adjoints);
    *tape = reverse_tape<T>{};
  }
};

template <class T>
inline thread_local reverse_tape<T> rtape_instance{};

// The calling thread's tape for T.
template <class T>
ZENITH_FIXED_INLINE reverse_tape<T>& rtape() {
  return rtape_instance<T>;
}

template <class T>
void reverse_tape<T>::own_memory() {
  static thread_local tape_memory<T> owner{this};
  (void)owner;
}

template <class T>
[[gnu::noinline]] void reverse_tape<T>::grow() {
  own_memory();
  if (cap == rvar_none) rvar_tape_full();
  std::uint32_t const n = cap == 0 ? 256u : (cap > rvar_none / 2 ? rvar_none : 2 * cap);
  void* p = std::realloc(nodes, std::size_t(n) * sizeof(rnode<T>));
  if (!p) throw std::bad_alloc();
  nodes = static_cast<rnode<T>*>(p);
  cap = n;
}

template <class T>
[[gnu::noinline]] void reverse_tape<T>::grow_adjoints() {
  own_memory();
  void* p = std::realloc(adjoints, std::size_t(cap) * sizeof(T));  // as many as nodes can be
  if (!p) throw std::bad_alloc();
  adjoints = static_cast<T*>(p);
  adjoint_cap = cap;
}

// While a transform records: on exit (return or exception) the tape is cut back to where it
// was, keeping its memory. Nested transforms on the same tape stack.
template <class T>
class rtape_scope {
 public:
  explicit rtape_scope(reverse_tape<T>& t) : t_(t), mark_(t.size()) {}
  rtape_scope(rtape_scope const&) = delete;
  rtape_scope& operator=(rtape_scope const&) = delete;
  ~rtape_scope() { t_.truncate(mark_); }
  std::uint32_t mark() const { return mark_; }

 private:
  reverse_tape<T>& t_;
  std::uint32_t mark_;
};

}  // namespace detail

template <std::floating_point T>
struct rvar {
  using value_type = T;

  T v{};                                // the value
  std::uint32_t i = detail::rvar_none;  // the tape node, or rvar_none for a constant

  constexpr rvar() = default;
  // A constant. Implicit, so that `tensor<rvar, 4, 4>{c, -s, 0, a, ...}` and `rvar x = 1.0`
  // read as they do for double.
  template <scalar S>
  constexpr rvar(S const& c) : v(static_cast<T>(c)) {}  // NOLINT
  // A value whose derivative flows into node `node` (rvar_none: a constant).
  static constexpr rvar from_node(T const& value, std::uint32_t node) {
    rvar r(value);
    r.i = node;
    return r;
  }
  // A new input variable on the calling thread's tape.
  static rvar variable(T const& x) { return from_node(x, detail::rtape<T>().leaf()); }

  constexpr T const& value() const { return v; }
  constexpr std::uint32_t node() const { return i; }
  constexpr bool is_constant() const { return i == detail::rvar_none; }

  template <class U>
  ZENITH_FIXED_INLINE rvar& operator+=(U const& o) {
    return *this = *this + o;
  }
  template <class U>
  ZENITH_FIXED_INLINE rvar& operator-=(U const& o) {
    return *this = *this - o;
  }
  template <class U>
  ZENITH_FIXED_INLINE rvar& operator*=(U const& o) {
    return *this = *this * o;
  }
  template <class U>
  ZENITH_FIXED_INLINE rvar& operator/=(U const& o) {
    return *this = *this / o;
  }
};

namespace detail {

// The value of an rvar, a constant as it is.
template <class X>
ZENITH_FIXED_INLINE constexpr auto const& rprimal(X const& x) {
  if constexpr (is_rvar_v<X>)
    return x.v;
  else
    return x;
}
// The node of an rvar; none for a plain number.
template <class X>
ZENITH_FIXED_INLINE constexpr std::uint32_t rindex(X const& x) {
  if constexpr (is_rvar_v<X>)
    return x.i;
  else
    return rvar_none;
}

// y with derivative pa with respect to node a (a constant when a is none).
template <class T>
ZENITH_FIXED_INLINE rvar<T> rvar_unary_node(T const& y, std::uint32_t a, T const& pa) {
  if (a == rvar_none) return rvar<T>(y);
  return rvar<T>::from_node(y, rtape<T>().push(a, pa));
}

// A unary op on an rvar, from its tag: value Op::apply(x), partial Op::partial<0>(y, x).
template <class Op, class T>
ZENITH_FIXED_INLINE rvar<T> rvar_unary(rvar<T> const& x) {
  T const y = static_cast<T>(Op::apply(x.v));
  if constexpr (piecewise_constant_op<Op>()) {
    return rvar<T>(y);
  } else {
    if (x.i == rvar_none) return rvar<T>(y);
    return rvar<T>::from_node(
        y, rtape<T>().push(x.i, static_cast<T>(Op::template partial<0>(y, x.v))));
  }
}

// A binary op on an rvar and an rvar or constant, from its tag; partials are computed only for
// operands that are variables.
template <class Op, class T, class A, class B>
ZENITH_FIXED_INLINE rvar<T> rvar_binary(A const& a, B const& b) {
  T const av = static_cast<T>(rprimal(a));
  T const bv = static_cast<T>(rprimal(b));
  T const y = static_cast<T>(Op::apply(av, bv));
  if constexpr (piecewise_constant_op<Op>()) {
    return rvar<T>(y);
  } else {
    std::uint32_t const ia = rindex(a), ib = rindex(b);
    auto pa = [&] { return static_cast<T>(Op::template partial<0>(y, av, bv)); };
    auto pb = [&] { return static_cast<T>(Op::template partial<1>(y, av, bv)); };
    if (ia == rvar_none && ib == rvar_none) return rvar<T>(y);
    if (ib == rvar_none) return rvar<T>::from_node(y, rtape<T>().push(ia, pa()));
    if (ia == rvar_none) return rvar<T>::from_node(y, rtape<T>().push(ib, pb()));
    return rvar<T>::from_node(y, rtape<T>().push(ia, pa(), ib, pb()));
  }
}

}  // namespace detail

// Operands of a binary rvar operation: two rvars of one type, or an rvar and a plain number.
template <class A, class B>
concept rvar_operands = (is_rvar_v<A> && is_rvar_v<B> && std::is_same_v<A, B>) ||
                        (is_rvar_v<A> && scalar<B>) || (scalar<A> && is_rvar_v<B>);

// ---- arithmetic (written out: these are the hot path) ----

template <class T>
ZENITH_FIXED_INLINE constexpr rvar<T> operator+(rvar<T> const& a) {
  return a;
}
template <class T>
ZENITH_FIXED_INLINE rvar<T> operator-(rvar<T> const& a) {
  return detail::rvar_unary_node(T(-a.v), a.i, T(-1));
}

template <class A, class B>
requires rvar_operands<A, B> ZENITH_FIXED_INLINE auto operator+(A const& a, B const& b) {
  using R = promote_t<A, B>;
  using T = typename R::value_type;
  if constexpr (std::is_same_v<A, B>) {
    T const y = a.v + b.v;
    if (a.i == detail::rvar_none) return R::from_node(y, b.i);  // shares b's node (or none)
    if (b.i == detail::rvar_none) return R::from_node(y, a.i);
    return R::from_node(y, detail::rtape<T>().push(a.i, T(1), b.i, T(1)));
  } else if constexpr (std::is_same_v<A, R>) {
    return R::from_node(a.v + static_cast<T>(b), a.i);
  } else {
    return R::from_node(static_cast<T>(a) + b.v, b.i);
  }
}

template <class A, class B>
requires rvar_operands<A, B> ZENITH_FIXED_INLINE auto operator-(A const& a, B const& b) {
  using R = promote_t<A, B>;
  using T = typename R::value_type;
  if constexpr (std::is_same_v<A, B>) {
    T const y = a.v - b.v;
    if (b.i == detail::rvar_none) return R::from_node(y, a.i);
    if (a.i == detail::rvar_none) return detail::rvar_unary_node(y, b.i, T(-1));
    return R::from_node(y, detail::rtape<T>().push(a.i, T(1), b.i, T(-1)));
  } else if constexpr (std::is_same_v<A, R>) {
    return R::from_node(a.v - static_cast<T>(b), a.i);
  } else {
    return detail::rvar_unary_node(T(static_cast<T>(a) - b.v), b.i, T(-1));
  }
}

namespace detail {
// x * c for a variable (or constant) x and a constant c: c == 0 gives a constant, c == 1
// shares x's node, anything else records one node.
template <class T>
ZENITH_FIXED_INLINE rvar<T> rvar_scale(rvar<T> const& x, T const& c, T const& y) {
  if (c == T(0)) return rvar<T>(y);
  if (c == T(1)) return rvar<T>::from_node(y, x.i);
  return rvar_unary_node(y, x.i, c);
}
}  // namespace detail

template <class A, class B>
requires rvar_operands<A, B> ZENITH_FIXED_INLINE auto operator*(A const& a, B const& b) {
  using R = promote_t<A, B>;
  using T = typename R::value_type;
  if constexpr (std::is_same_v<A, B>) {
    T const y = a.v * b.v;
    if (a.i == detail::rvar_none) return detail::rvar_scale(b, a.v, y);
    if (b.i == detail::rvar_none) return detail::rvar_scale(a, b.v, y);
    return R::from_node(y, detail::rtape<T>().push(a.i, b.v, b.i, a.v));
  } else if constexpr (std::is_same_v<A, R>) {
    T const c = static_cast<T>(b);
    return detail::rvar_scale(a, c, T(a.v * c));
  } else {
    T const c = static_cast<T>(a);
    return detail::rvar_scale(b, c, T(c * b.v));
  }
}

template <class A, class B>
requires rvar_operands<A, B> ZENITH_FIXED_INLINE auto operator/(A const& a, B const& b) {
  using R = promote_t<A, B>;
  using T = typename R::value_type;
  if constexpr (std::is_same_v<A, B>) {
    T const y = a.v / b.v;
    if (b.i == detail::rvar_none) {
      if (b.v == T(1)) return R::from_node(y, a.i);
      return detail::rvar_unary_node(y, a.i, T(T(1) / b.v));
    }
    // d(a / b) / db = -(a / b) / b; a constant 0 numerator gives a constant.
    if (a.i == detail::rvar_none)
      return a.v == T(0) ? R(y) : detail::rvar_unary_node(y, b.i, T(-(y / b.v)));
    return R::from_node(y, detail::rtape<T>().push(a.i, T(T(1) / b.v), b.i, T(-(y / b.v))));
  } else if constexpr (std::is_same_v<A, R>) {
    T const c = static_cast<T>(b);
    T const y = a.v / c;
    if (c == T(1)) return R::from_node(y, a.i);
    return detail::rvar_unary_node(y, a.i, T(T(1) / c));
  } else {
    T const c = static_cast<T>(a);
    T const y = c / b.v;
    if (c == T(0)) return R(y);
    return detail::rvar_unary_node(y, b.i, T(-(y / b.v)));
  }
}

// ---- comparisons: on values ----

template <class A, class B>
requires rvar_operands<A, B> ZENITH_FIXED_INLINE constexpr bool operator==(A const& a, B const& b) {
  return detail::rprimal(a) == detail::rprimal(b);
}
template <class A, class B>
requires rvar_operands<A, B> ZENITH_FIXED_INLINE constexpr auto operator<=>(A const& a,
                                                                            B const& b) {
  return detail::rprimal(a) <=> detail::rprimal(b);
}

// ---- math: value and partials from the op tags ----

#define ZENITH_RVAR_UNARY(NAME, OP)                    \
  template <class T>                                   \
  ZENITH_FIXED_INLINE rvar<T> NAME(rvar<T> const& x) { \
    return detail::rvar_unary<ops::OP>(x);             \
  }
ZENITH_RVAR_UNARY(abs, abs)
ZENITH_RVAR_UNARY(sign, sign)
ZENITH_RVAR_UNARY(exp, exp)
ZENITH_RVAR_UNARY(log, log)
ZENITH_RVAR_UNARY(log1p, log1p)
ZENITH_RVAR_UNARY(expm1, expm1)
ZENITH_RVAR_UNARY(sqrt, sqrt)
ZENITH_RVAR_UNARY(rsqrt, rsqrt)
ZENITH_RVAR_UNARY(square, square)
ZENITH_RVAR_UNARY(sin, sin)
ZENITH_RVAR_UNARY(cos, cos)
ZENITH_RVAR_UNARY(tan, tan)
ZENITH_RVAR_UNARY(tanh, tanh)
ZENITH_RVAR_UNARY(sigmoid, sigmoid)
ZENITH_RVAR_UNARY(relu, relu)
ZENITH_RVAR_UNARY(gelu, gelu_tanh)
ZENITH_RVAR_UNARY(gelu_tanh, gelu_tanh)
ZENITH_RVAR_UNARY(gelu_erf, gelu_erf)
ZENITH_RVAR_UNARY(erf, erf)
ZENITH_RVAR_UNARY(floor, floor)
ZENITH_RVAR_UNARY(ceil, ceil)
ZENITH_RVAR_UNARY(round, round)
ZENITH_RVAR_UNARY(reciprocal, reciprocal)
ZENITH_RVAR_UNARY(stop_gradient, stop_gradient)  // the value, as a constant
#undef ZENITH_RVAR_UNARY

#define ZENITH_RVAR_BINARY(NAME, OP)                                                   \
  template <class A, class B>                                                          \
  requires rvar_operands<A, B> ZENITH_FIXED_INLINE auto NAME(A const& a, B const& b) { \
    using R = promote_t<A, B>;                                                         \
    return detail::rvar_binary<ops::OP, typename R::value_type>(a, b);                 \
  }
ZENITH_RVAR_BINARY(pow, pow)
ZENITH_RVAR_BINARY(atan2, atan2)
ZENITH_RVAR_BINARY(maximum, maximum)
ZENITH_RVAR_BINARY(minimum, minimum)
#undef ZENITH_RVAR_BINARY

// The value of an rvar.
template <class T>
constexpr T value_of(rvar<T> const& x) {
  return x.v;
}

template <class T>
std::ostream& operator<<(std::ostream& os, rvar<T> const& x) {
  return os << x.v;
}

// The hook the fixed-size elementwise nodes (expr/fixed_ops.hpp) call for a math function whose
// operands include an rvar (they apply + - * / and comparisons through the operators above).
template <class Op, class... X>
requires(is_rvar_v<X> || ...) ZENITH_FIXED_INLINE auto number_op(Op, X const&... x) {
  if constexpr (sizeof...(X) == 1)
    return detail::rvar_unary<Op>(x...);
  else if constexpr (sizeof...(X) == 2)
    return [](auto const& a, auto const& b) ZENITH_FIXED_LAMBDA {
      using R = promote_t<std::remove_cvref_t<decltype(a)>, std::remove_cvref_t<decltype(b)>>;
      return detail::rvar_binary<Op, typename R::value_type>(a, b);
    }(x...);
  else
    static_assert(sizeof...(X) <= 2, "zenith: this op has no rvar rule");
}

}  // namespace zenith
