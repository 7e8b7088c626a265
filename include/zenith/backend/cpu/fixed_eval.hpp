#pragma once
// Evaluation of fixed-size expressions: every loop runs over compile-time bounds and is unrolled
// (an index_sequence fold) up to fixed_unroll_limit iterations, so `r = sin(q) * 2.0 + q` on a
// tensor<double, 3> compiles to three straight-line statements. Nothing here allocates.
// Element types that are not built-in numbers (the dual numbers of autodiff/dual.hpp) take the
// scalar unrolled paths: they bring their own (vectorised) arithmetic, and the vector folds
// below are for float and double only.
//
// The fixed-size evaluation protocol: a node with `fixed == true` has `static_shape` and
// `at(i)`, the value (in the compute type) at flat row-major index i of its static shape.
// tensor, scalar_node and map_node implement it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../../core/tensor.hpp"
#include "../../expr/fixed_ops.hpp"

namespace zenith {

// Loops over at most this many iterations are unrolled at compile time.
inline constexpr std::size_t fixed_unroll_limit = 64;

namespace detail {

// f(i) for i in [0, N): with std::integral_constant indices (unrolled) up to the limit, else a
// plain loop with std::size_t.
template <std::size_t N, class F>
ZENITH_FIXED_INLINE void static_for(F&& f) {
  if constexpr (N <= fixed_unroll_limit) {
    [&]<std::size_t... I>(std::index_sequence<I...>) ZENITH_FIXED_LAMBDA {
      (f(std::integral_constant<std::size_t, I>{}), ...);
    }
    (std::make_index_sequence<N>{});
  } else {
    for (std::size_t i = 0; i < N; ++i) f(i);
  }
}

template <class T, std::size_t Size, class E>
ZENITH_FIXED_INLINE void fixed_assign(T* dst, E const& e) {
  if constexpr (Size == 0) {
    (void)dst;
    (void)e;
  } else if constexpr (Size <= fixed_unroll_limit) {
    [&]<std::size_t... I>(std::index_sequence<I...>) ZENITH_FIXED_LAMBDA {
      // Every read before any write: the compiler need not prove dst and e apart.
      T const values[] = {static_cast<T>(e.at(I))...};
      ((dst[I] = values[I]), ...);
    }
    (std::make_index_sequence<Size>{});
  } else {
    for (std::size_t i = 0; i < Size; ++i) dst[i] = static_cast<T>(e.at(i));
  }
}

// Folds v[0 .. N) into v[0] pairwise: v[k] = op(v[k], v[k + h]) with h = ceil(N / 2), then
// the first h. Depth log2(N) instead of N (latency), and each step is a contiguous vector op.
template <class Op, std::size_t N, class V>
ZENITH_FIXED_INLINE void fold_halves(V& v) {
  if constexpr (N > 1) {
    constexpr std::size_t h = (N + 1) / 2;
    static_for<N - h>([&](auto k) ZENITH_FIXED_LAMBDA { v[k] = Op::apply(v[k], v[k + h]); });
    fold_halves<Op, h>(v);
  }
}

// The widest vector register of the target. A wider GCC vector would be split into several,
// and passing one by value changes the ABI (GCC's -Wpsabi).
inline constexpr std::size_t max_vector_bytes =
#if defined(__AVX512F__)
    64;
#elif defined(__AVX__)
    32;
#else
    16;
#endif

// Lanes of the vector that folds a contiguous group of G values of C: the widest power of two
// (at most max_vector_bytes) that fits twice in G; 1 where no vector applies.
template <class Op, class C, std::size_t G>
constexpr std::size_t fold_lanes() {
  constexpr bool vector_op = std::is_same_v<Op, ops::add> || std::is_same_v<Op, ops::mul>;
  if constexpr (!vector_op || !std::is_arithmetic_v<C> || std::is_same_v<C, bool>) {
    return 1;
  } else {
    std::size_t w = 1;
    while (4 * w <= G && 2 * w * sizeof(C) <= max_vector_bytes) w *= 2;
    return w;
  }
}

// Folds the G values elem(0 .. G) with W-lane vectors: chunk by chunk into Acc vectors (chunk c
// into accumulator c % Acc: independent chains, so a long fold is not bound by the latency of
// one add), those pairwise into one, then its lanes and the tail pairwise. A chunk's W values
// are computed into a small buffer, so an expression's elementwise part vectorizes chunk by
// chunk and nothing of size G is written. (The compiler's SLP pass does not find this by
// itself: a reduction to one scalar has no adjacent stores to start from.)
// Values already in memory (Data: a pointer to them) are loaded as whole vectors: copied through
// a buffer, a vector wider than the compiler's preferred width is moved in halves and read back
// whole, which stalls every load (GCC's default for AVX-512 targets prefers 256-bit moves).
template <class Op, std::size_t G, std::size_t W, class C, class Elem, class Data = std::nullptr_t>
ZENITH_FIXED_INLINE C fold_vector(Elem const& elem, [[maybe_unused]] Data data = nullptr) {
  typedef C vec __attribute__((vector_size(W * sizeof(C))));
  typedef C unaligned_vec
      __attribute__((vector_size(W * sizeof(C)), aligned(alignof(C)), may_alias));
  constexpr std::size_t chunks = G / W;
  constexpr std::size_t Acc = chunks >= 16 ? 4 : chunks >= 8 ? 2 : 1;
  auto load = [&](std::size_t c) ZENITH_FIXED_LAMBDA {
    if constexpr (std::is_pointer_v<Data>) {
      return vec(*reinterpret_cast<unaligned_vec const*>(data + c * W));
    } else {
      C buf[W];
      static_for<W>([&](auto l) ZENITH_FIXED_LAMBDA { buf[l] = C(elem(c * W + l)); });
      vec t;
      std::memcpy(&t, buf, sizeof(vec));
      return t;
    }
  };
  vec acc[Acc];  // not std::array: a template argument drops the vector attribute
  static_for<Acc>([&](auto a) ZENITH_FIXED_LAMBDA { acc[a] = load(a); });
  constexpr std::size_t rounds = chunks / Acc;
  auto step = [&](std::size_t c, std::size_t a)
                  ZENITH_FIXED_LAMBDA { acc[a] = Op::apply(acc[a], load(c)); };
  if constexpr (rounds * Acc <= fixed_unroll_limit) {
    static_for<rounds - 1>([&](auto r) ZENITH_FIXED_LAMBDA {
      static_for<Acc>([&](auto a) ZENITH_FIXED_LAMBDA { step((r + 1) * Acc + a, a); });
    });
  } else {
    for (std::size_t r = 1; r < rounds; ++r)
      static_for<Acc>([&](auto a) ZENITH_FIXED_LAMBDA { step(r * Acc + a, a); });
  }
  static_for<chunks - rounds * Acc>(
      [&](auto c) ZENITH_FIXED_LAMBDA { step(rounds * Acc + c, c); });  // chunks left over
  fold_halves<Op, Acc>(acc);
  constexpr std::size_t tail = G % W;
  std::array<C, W + tail> v;
  static_for<W>([&](auto l) ZENITH_FIXED_LAMBDA { v[l] = acc[0][std::size_t(l)]; });
  static_for<tail>([&](auto r) ZENITH_FIXED_LAMBDA { v[W + r] = C(elem(G - tail + r)); });
  fold_halves<Op, W + tail>(v);
  return v[0];
}

template <class Op, bool Mean, class Plan, class R, class E>
ZENITH_FIXED_INLINE void fixed_reduce(R* out, E const& e) {
  using C = compute_t<R>;
  constexpr std::size_t n_out = Plan::out_size, group = Plan::group;
  if constexpr (n_out == 0) {
    (void)out;
    (void)e;
  } else if constexpr (group == 0) {  // an empty reduced axis: the identity (mean: 0 / 0)
    (void)e;
    C v = std::is_same_v<Op, ops::mul> ? C(1) : C(0);
    if constexpr (Mean) v = v / C(0.0);
    for (std::size_t o = 0; o < n_out; ++o) out[o] = static_cast<R>(v);
  } else if constexpr (Plan::contiguous && fold_lanes<Op, C, group>() > 1) {
    constexpr std::size_t lanes = fold_lanes<Op, C, group>();
    static_for<n_out>([&](auto o) ZENITH_FIXED_LAMBDA {
      std::size_t const base = o * group;
      C r;
      if constexpr (is_tensor_like_v<E> && std::is_same_v<value_t<E>, C>)
        r = fold_vector<Op, group, lanes, C>([x = e.data() + base](std::size_t k)
                                                 ZENITH_FIXED_LAMBDA { return x[k]; },
                                             e.data() + base);
      else
        r = fold_vector<Op, group, lanes, C>([&](std::size_t k)
                                                 ZENITH_FIXED_LAMBDA { return e.at(base + k); });
      if constexpr (Mean)
        out[o] = static_cast<R>(r / C(double(group)));
      else
        out[o] = static_cast<R>(r);
    });
  } else {
    static_for<n_out>([&](auto o) ZENITH_FIXED_LAMBDA {
      std::array<C, group> v;
      static_for<group>([&](auto g)
                            ZENITH_FIXED_LAMBDA { v[g] = C(e.at(Plan::members[o * group + g])); });
      fold_halves<Op, group>(v);
      if constexpr (Mean && user_number<C>)
        out[o] = static_cast<R>(v[0] / double(group));  // scales: the count is a constant
      else if constexpr (Mean)
        out[o] = static_cast<R>(v[0] / C(double(group)));
      else
        out[o] = static_cast<R>(v[0]);
    });
  }
}

template <class Plan, class R, class E>
ZENITH_FIXED_INLINE void fixed_permute(R* out, E const& e) {
  static_for<Plan::size>([&](auto o)
                             ZENITH_FIXED_LAMBDA { out[o] = static_cast<R>(e.at(Plan::src[o])); });
}

// out (M x N) = a (M x K) * b (K x N) on element pointers; flags_a / flags_b: the entry flags
// to act on (detail::constant_entries), or null.
template <std::size_t M, std::size_t K, std::size_t N, class R, class A, class B>
ZENITH_FIXED_INLINE void matmul_elements(R* out, A const* a, B const* b,
                                         [[maybe_unused]] std::uint8_t const* flags_a,
                                         [[maybe_unused]] std::uint8_t const* flags_b) {
  using C = compute_t<R>;
  if constexpr (std::is_same_v<A, R> && std::is_same_v<B, R> &&
                requires { R::template matmul_kernel<M, K, N>(out, a, b, flags_a, flags_b); }) {
    // a number type's own kernel (duals)
    R::template matmul_kernel<M, K, N>(out, a, b, flags_a, flags_b);
  } else if constexpr (user_number<R>) {
    // User numbers (duals): each operand in its own type, so a plain matrix times a matrix of
    // duals scales the duals instead of multiplying duals.
    static_for<M * N>([&](auto o) ZENITH_FIXED_LAMBDA {
      std::size_t const i = o / N, j = o % N;
      if constexpr (K == 0) {
        out[o] = R(0);
      } else {
        R acc = a[i * K] * b[j];
        static_for<K - 1>(
            [&](auto k) ZENITH_FIXED_LAMBDA { acc = acc + a[i * K + k + 1] * b[(k + 1) * N + j]; });
        out[o] = acc;
      }
    });
  } else {
    static_for<M * N>([&](auto o) ZENITH_FIXED_LAMBDA {
      std::size_t const i = o / N, j = o % N;
      if constexpr (K == 0) {
        out[o] = static_cast<R>(C(0));
      } else {
        C acc = C(compute_t<A>(a[i * K])) * C(compute_t<B>(b[j]));
        static_for<K - 1>([&](auto k) ZENITH_FIXED_LAMBDA {
          acc = acc + C(compute_t<A>(a[i * K + k + 1])) * C(compute_t<B>(b[(k + 1) * N + j]));
        });
        out[o] = static_cast<R>(acc);
      }
    });
  }
}

// The flags of x's entries (tensor::entry_flags) that the compiler can see, 0 for the others:
// what the matmul of duals may act on without a branch at run time.
template <class X>
ZENITH_FIXED_INLINE std::array<std::uint8_t, X::count> known_flags(X const& x) {
  std::array<std::uint8_t, X::count> f{};
  static_for<X::count>([&](auto i) ZENITH_FIXED_LAMBDA { f[i] = if_known(x.entry_flags(i)); });
  return f;
}

// The flags of a product's entries: (i, j) is a constant where every term a(i, k) b(k, j) has a
// zero factor or two constant ones, and a zero where every term has a zero factor.
template <std::size_t M, std::size_t K, std::size_t N>
ZENITH_FIXED_INLINE constexpr std::array<std::uint8_t, M * N> product_flags(
    std::uint8_t const* fa, std::uint8_t const* fb) {
  std::array<std::uint8_t, M * N> out{};
  static_for<M * N>([&](auto o) ZENITH_FIXED_LAMBDA {
    std::size_t const i = o / N, j = o % N;
    bool constant = true, zero = true;
    static_for<K>([&](auto k) ZENITH_FIXED_LAMBDA {
      std::uint8_t const x = fa[i * K + k], y = fb[k * N + j];
      bool const term_zero = (x | y) & zero_flag;
      zero = zero && term_zero;
      constant = constant && (term_zero || (x & y & constant_flag));
    });
    out[o] = std::uint8_t((constant ? constant_flag : 0) | (zero ? zero_flag : 0));
  });
  return out;
}

template <std::size_t M, std::size_t K, std::size_t N, class Out, class X, class Y>
ZENITH_FIXED_INLINE void fixed_matmul(Out& out, X const& x, Y const& y) {
  if constexpr (Out::tracks_entry_flags && X::count <= fixed_unroll_limit &&
                Y::count <= fixed_unroll_limit) {
    auto const fa = known_flags(x);
    auto const fb = known_flags(y);  // another type: a declaration of its own
    matmul_elements<M, K, N>(out.data(), x.data(), y.data(), fa.data(), fb.data());
    auto const fo = product_flags<M, K, N>(fa.data(), fb.data());
    static_for<Out::count>([&](auto o) ZENITH_FIXED_LAMBDA { out.set_entry_flags(o, fo[o]); });
  } else {
    matmul_elements<M, K, N>(out.data(), x.data(), y.data(), nullptr, nullptr);
  }
}

}  // namespace detail
}  // namespace zenith
