#pragma once
// The reverse pass of a staged fixed-size expression, part 2: the barriers (reductions and
// matmul), whose outputs and adjoints live in arrays of their own (staged_eval.hpp has the
// protocol).
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../backend/cpu/fixed_eval.hpp"
#include "staged_eval.hpp"

namespace zenith::autodiff::staged {

// The barrier protocol shared by reductions and matmul: the output and its adjoint in arrays.
template <class C, std::size_t Size>
struct barrier_values {
  std::array<C, Size> out;
  std::array<C, Size> adj;
  ZENITH_FIXED_INLINE C value(std::size_t i) const { return out[i]; }
  ZENITH_FIXED_INLINE C again(std::size_t i) const { return out[i]; }
  template <class A>
  ZENITH_FIXED_INLINE void back(std::size_t i, A const& a) {
    adj[i] += C(a);
  }
  static constexpr bool batches = batch_type<C>;
  template <class B>
  ZENITH_FIXED_INLINE B batch(std::size_t j) const {
    return B::load_unaligned(out.data() + j);
  }
};

// Reads a child evaluator's forward values through the fixed-size `at` protocol, so that the
// reductions of backend/cpu/fixed_eval.hpp (vector folds) compute the barrier's output.
template <class Ev>
struct forward_reader {
  using value_type = std::remove_cvref_t<decltype(std::declval<Ev&>().value(0))>;
  Ev* ev;
  ZENITH_FIXED_INLINE auto at(std::size_t i) const { return ev->value(i); }
};

// sum, mean, prod, max, min over the axes of Plan.
template <class Kind, class Plan, class Shape, class T, class E, class Ctx>
struct eval<staged_reduce<Kind, Plan, Shape, T, E>, Ctx>
    : barrier_values<compute_t<T>, Plan::out_size> {
  using C = compute_t<T>;
  static constexpr std::size_t n_out = Plan::out_size, group = Plan::group;
  eval<E, Ctx> kid;

  template <class Slots>
  eval(built_from<staged_reduce<Kind, Plan, Shape, T, E>, Slots> b)  // NOLINT
      : kid(build(b.node.child, b.slots)) {}

  ZENITH_FIXED_INLINE void forward() {
    kid.forward();
    if constexpr (requires { *kid.values; })  // an argument itself: read where it is
      zenith::detail::fixed_reduce<typename Kind::op, Kind::mean, Plan>(this->out.data(),
                                                                        *kid.values);
    else if constexpr (folds_batches())
      fold_batches();
    else
      zenith::detail::fixed_reduce<typename Kind::op, Kind::mean, Plan>(
          this->out.data(), forward_reader<eval<E, Ctx>>{&kid});
    this->adj.fill(C(0));
  }

  // A sum or mean of an expression that batches, over contiguous groups of at least one batch
  // (fold_batch_t): folded batch by batch (four accumulators), the tail element by element.
  static constexpr bool folds_batches() {
    using KV = std::remove_cvref_t<decltype(std::declval<eval<E, Ctx>&>().value(0))>;
    if constexpr (!std::is_same_v<KV, C> || !batch_type<C>)
      return false;
    else
      return eval<E, Ctx>::batches && Plan::contiguous &&
             std::is_same_v<typename Kind::op, ops::add> && !std::is_void_v<fold_batch_t<C, group>>;
  }
  // The accumulators start at the first batches, not at zero: x + 0.0 is not x when x is -0.0,
  // so the compiler keeps every add of a zero accumulator, a chain of three dependent adds on a
  // sum of one batch (a density over 4 time steps).
  ZENITH_FIXED_INLINE void fold_batches() {
    using B = fold_batch_t<C, group>;
    constexpr std::size_t w = B::size, batches_in_group = group / w;
    constexpr std::size_t na = batches_in_group < 4 ? batches_in_group : 4;
    for (std::size_t o = 0; o < n_out; ++o) {
      std::size_t const base = o * group;
      std::array<B, na> acc;
      for (std::size_t a = 0; a < na; ++a) acc[a] = kid.template batch<B>(base + a * w);
      std::size_t j = na * w;
      if constexpr (na == 4)
        for (; j + 4 * w <= group; j += 4 * w)
          for (std::size_t a = 0; a < 4; ++a) acc[a] += kid.template batch<B>(base + j + a * w);
      for (; j + w <= group; j += w) acc[0] += kid.template batch<B>(base + j);
      B folded = acc[0];
      if constexpr (na == 4)
        folded = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      else if constexpr (na == 3)
        folded = (acc[0] + acc[1]) + acc[2];
      else if constexpr (na == 2)
        folded = acc[0] + acc[1];
      C r = xsimd::hadd(folded);
      for (; j < group; ++j) r += C(kid.value(base + j));
      this->out[o] = Kind::mean ? r / C(double(group)) : r;
    }
  }

  ZENITH_FIXED_INLINE void finish() {
    if constexpr (zenith::detail::staged_node<E>() && group > 0) {
      using KV = std::remove_cvref_t<decltype(kid.again(0))>;
      for (std::size_t o = 0; o < n_out; ++o) {
        C const a = this->adj[o];
        if constexpr (std::is_same_v<Kind, zenith::detail::fixed_sum_kind>) {
          member_loop(o,
                      [&](std::size_t j, std::size_t) ZENITH_FIXED_LAMBDA { kid.back(j, KV(a)); });
        } else if constexpr (std::is_same_v<Kind, zenith::detail::fixed_mean_kind>) {
          C const s = a / C(double(group));
          member_loop(o,
                      [&](std::size_t j, std::size_t) ZENITH_FIXED_LAMBDA { kid.back(j, KV(s)); });
        } else if constexpr (std::is_same_v<Kind, zenith::detail::fixed_prod_kind>) {
          // d prod / d x_g = the product of the others: prefix times suffix products, exact
          // when some x are zero.
          std::array<C, group> x, before;
          member_loop(
              o, [&](std::size_t j, std::size_t g) ZENITH_FIXED_LAMBDA { x[g] = C(kid.again(j)); });
          C run = C(1);
          for (std::size_t g = 0; g < group; ++g) {
            before[g] = run;
            run = run * x[g];
          }
          C after = C(1);
          for (std::size_t g = group; g-- > 0;) {
            kid.back(member(o, g), KV(a * before[g] * after));
            after = after * x[g];
          }
        } else {  // max, min: the adjoint split evenly between the elements that tie
          C const y = this->out[o];
          std::size_t ties = 0;
          member_loop(o, [&](std::size_t j, std::size_t)
                             ZENITH_FIXED_LAMBDA { ties += C(kid.again(j)) == y; });
          C const s = a / C(double(ties ? ties : 1));
          member_loop(o, [&](std::size_t j, std::size_t) ZENITH_FIXED_LAMBDA {
            if (C(kid.again(j)) == y) kid.back(j, KV(s));
          });
        }
      }
    }
    kid.finish();
  }

 private:
  // f(j, g) for the g-th input element j of output o.
  template <class F>
  ZENITH_FIXED_INLINE static void member_loop(std::size_t o, F&& f) {
    backward_loop<group>([&](std::size_t g) ZENITH_FIXED_LAMBDA { f(member(o, g), g); });
  }
  ZENITH_FIXED_INLINE static constexpr std::size_t member(std::size_t o, std::size_t g) {
    if constexpr (Plan::contiguous)  // the usual case: no table lookup, so the loops vectorize
      return o * group + g;
    else
      return Plan::members[o * group + g];
  }
};

// out (M x N) = a (M x K) b (K x N), row-major. Small products take the fixed-size kernel (a
// dot product per entry, unrolled); wider ones go row by row (out[i, :] += a[i, k] b[k, :]),
// whose inner loop runs along contiguous rows and vectorizes, instead of one dependency chain
// of K multiply-adds per entry.
template <std::size_t M, std::size_t K, std::size_t N, class C>
ZENITH_FIXED_INLINE void staged_product(C* __restrict out, C const* __restrict a,
                                        C const* __restrict b) {
  if constexpr (N < 10 || K < 4) {
    zenith::detail::matmul_elements<M, K, N>(out, a, b, nullptr, nullptr);
  } else {
    for (std::size_t i = 0; i < M; ++i) {
      C* o = out + i * N;
      for (std::size_t j = 0; j < N; ++j) o[j] = C(0);
      for (std::size_t k = 0; k < K; ++k) {
        C const aik = a[i * K + k];
        C const* bk = b + k * N;
        for (std::size_t j = 0; j < N; ++j) o[j] += aik * bk[j];
      }
    }
  }
}

// matmul of 1-D / 2-D operands, as (m x k) times (k x n): the adjoints are adj B^T and A^T adj.
template <class Dims, class Shape, class T, class A, class B, class Ctx>
struct eval<staged_matmul<Dims, Shape, T, A, B>, Ctx>
    : barrier_values<compute_t<T>, Dims::m * Dims::n> {
  using C = compute_t<T>;
  static constexpr std::size_t m = Dims::m, k = Dims::k, n = Dims::n;
  eval<A, Ctx> ka;
  eval<B, Ctx> kb;
  std::array<C, m * k> av;
  std::array<C, k * n> bv;

  template <class Slots>
  eval(built_from<staged_matmul<Dims, Shape, T, A, B>, Slots> b)  // NOLINT
      : ka(build(b.node.a, b.slots)), kb(build(b.node.b, b.slots)) {}

  ZENITH_FIXED_INLINE void forward() {
    ka.forward();
    kb.forward();
    zenith::detail::static_for<m * k>([&](auto j) ZENITH_FIXED_LAMBDA { av[j] = C(ka.value(j)); });
    zenith::detail::static_for<k * n>([&](auto j) ZENITH_FIXED_LAMBDA { bv[j] = C(kb.value(j)); });
    staged_product<m, k, n>(this->out.data(), av.data(), bv.data());
    this->adj.fill(C(0));
  }

  ZENITH_FIXED_INLINE void finish() {
    if constexpr (zenith::detail::staged_node<A>()) {  // dA (m x k) = adj (m x n) * B^T (n x k)
      using KV = std::remove_cvref_t<decltype(ka.again(0))>;
      std::array<C, n * k> bt;
      for (std::size_t r = 0; r < k; ++r)
        for (std::size_t c = 0; c < n; ++c) bt[c * k + r] = bv[r * n + c];
      std::array<C, m * k> da;
      staged_product<m, n, k>(da.data(), this->adj.data(), bt.data());
      backward_loop<m * k>([&](std::size_t j) ZENITH_FIXED_LAMBDA { ka.back(j, KV(da[j])); });
      ka.finish();
    }
    if constexpr (zenith::detail::staged_node<B>()) {  // dB (k x n) = A^T (k x m) * adj (m x n)
      using KV = std::remove_cvref_t<decltype(kb.again(0))>;
      std::array<C, k * m> at;
      for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c < k; ++c) at[c * m + r] = av[r * k + c];
      std::array<C, k * n> db;
      staged_product<k, m, n>(db.data(), at.data(), this->adj.data());
      backward_loop<k * n>([&](std::size_t j) ZENITH_FIXED_LAMBDA { kb.back(j, KV(db[j])); });
      kb.finish();
    }
  }
};

}  // namespace zenith::autodiff::staged
