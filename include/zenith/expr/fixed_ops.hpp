#pragma once
// Ops on fixed-size expressions (tensors and expressions of tensors and scalars) that change the
// shape type. Their arguments are compile-time, they are eager, and they return tensors:
//
//   sum<Axes...>(t), sum(t)           and the same for mean, prod, max, min
//   reshape<M...>(t)                  same elements in row-major order
//   transpose(t), transpose<P...>(t)  all axes reversed, or result axis k = input axis P[k]
//   matmul(a, b), dot(a, b)           1-D / 2-D, NumPy semantics
//   cross(a, b), norm(t)              3-vectors; the 2-norm of all elements
//
// A whole-tensor reduction (and dot, norm, matmul of two vectors) gives a rank-0 tensor<T>,
// which converts to T. Shape mistakes are one-line static_asserts. Every overload here is
// constrained on fixed_expression, which subsumes expression, so a call on a tensor picks these
// over the lazy dynamic ops (reduce.hpp, views.hpp, matmul.hpp) of the same name.
// The unrolled loops are in backend/cpu/fixed_eval.hpp.
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../core/tensor.hpp"
#include "../core/tensor_ref.hpp"
#include "elementwise.hpp"
#include "fixed_shape.hpp"
#include "number_ops.hpp"  // the elementwise ops on tensors of dual numbers
#include "ops.hpp"
#include "staged.hpp"

namespace zenith {

namespace detail {

// tensor<T, N...> for T and fixed_shape<N...>.
template <class T, class S>
struct tensor_of;
template <class T, std::size_t... N>
struct tensor_of<T, fixed_shape<N...>> {
  using type = tensor<T, N...>;
};
template <class T, class S>
using tensor_of_t = typename tensor_of<T, S>::type;

// tensor<T, Dims[0], ..., Dims[R-1]> for a constexpr std::array Dims.
template <class T, auto Dims, class Seq = std::make_index_sequence<Dims.size()>>
struct tensor_from_dims;
template <class T, auto Dims, std::size_t... I>
struct tensor_from_dims<T, Dims, std::index_sequence<I...>> {
  using type = tensor<T, Dims[I]...>;
};

template <class E>
using shape_of_t = typename std::remove_cvref_t<E>::static_shape;

// Result element types. User types (dual numbers, ...) keep their own type throughout.
template <class T>
using fixed_sum_t = std::conditional_t<std::is_same_v<T, bool>, std::int32_t, T>;
template <class T>
using fixed_float_t = std::conditional_t<element<T>, float_of_t<T>, T>;
// Element types meet by promotion; a user number (a dual) with a plain number is the user
// number (core/dtype.hpp).
template <class A, class B>
struct fixed_common {
  using type = std::common_type_t<A, B>;
};
template <class A, class B>
requires requires { typename promote_t<A, B>; }
struct fixed_common<A, B> {
  using type = promote_t<A, B>;
};
template <class A, class B>
using fixed_common_t = typename fixed_common<A, B>::type;

// The tensor an expression evaluates to: a tensor itself by reference, else a fresh (inline)
// tensor. Used where elements are read more than once (matmul).
template <fixed_expression E>
ZENITH_FIXED_INLINE decltype(auto) fixed_materialize(E const& e) {
  if constexpr (is_tensor_v<E>)
    return (e);
  else if constexpr (is_tensor_ref_v<E>)
    return e.get();
  else
    return tensor_of_t<value_t<E>, shape_of_t<E>>(e);
}

// Axis template arguments: in range, not repeated; negative counts from the end.
template <std::size_t Rank, int... Axes>
struct fixed_axes {
  static constexpr bool in_range = ((Axes >= -int(Rank) && Axes < int(Rank)) && ...);
  static constexpr std::size_t norm(int a) { return std::size_t(a < 0 ? a + int(Rank) : a); }
  static constexpr std::uint32_t mask =
      in_range ? ((std::uint32_t(1) << norm(Axes)) | ... | 0u) : 0u;
  static constexpr bool unique = in_range && std::popcount(mask) == int(sizeof...(Axes));
};

// Which input elements go to which output element of a reduction over the axes in Mask.
template <class In, std::uint32_t Mask>
struct reduce_plan {
  static constexpr bool reduced(std::size_t k) { return (Mask >> k) & 1u; }
  static constexpr std::size_t out_rank = In::rank - std::size_t(std::popcount(Mask));
  static constexpr std::array<std::size_t, out_rank> out_dims = [] {
    std::array<std::size_t, out_rank> d{};
    std::size_t r = 0;
    for (std::size_t k = 0; k < In::rank; ++k)
      if (!reduced(k)) d[r++] = In::dims[k];
    return d;
  }();
  static constexpr std::size_t in_size = In::size;
  static constexpr std::size_t out_size = [] {
    std::size_t n = 1;
    for (std::size_t d : out_dims) n *= d;
    return n;
  }();
  static constexpr std::size_t group = out_size ? in_size / out_size : 0;  // inputs per output
  // members[o * group + g]: the input elements of output o, in row-major order.
  static constexpr std::array<std::size_t, out_size* group> members = [] {
    std::array<std::size_t, out_size * group> t{};
    std::array<std::size_t, out_size> filled{};
    for (std::size_t i = 0; i < in_size; ++i) {
      std::size_t o = 0;
      for (std::size_t k = 0; k < In::rank; ++k)
        if (!reduced(k)) o = o * In::dims[k] + (i / In::stride(k)) % In::dims[k];
      t[o * group + filled[o]++] = i;
    }
    return t;
  }();
  // Whether each output's inputs are one contiguous run (only trailing axes are reduced).
  static constexpr bool contiguous = [] {
    for (std::size_t k = 0; k < out_size * group; ++k)
      if (members[k] != k) return false;
    return true;
  }();
  template <class R>
  using result = typename tensor_from_dims<R, out_dims>::type;
};

// Output element o of a permutation of In's axes (output axis k = input axis Perm[k]) reads
// input element src[o].
template <class In, std::size_t... Perm>
struct transpose_plan {
  static constexpr std::array<std::size_t, In::rank> perm{Perm...};
  static constexpr std::array<std::size_t, In::rank> out_dims{In::dims[Perm]...};
  static constexpr std::size_t size = In::size;
  static constexpr std::array<std::size_t, size> src = [] {
    std::array<std::size_t, size> t{};
    for (std::size_t o = 0; o < size; ++o) {
      std::size_t rest = o, i = 0;
      for (std::size_t k = In::rank; k-- > 0;) {
        std::size_t c = rest % out_dims[k];
        rest /= out_dims[k];
        i += c * In::stride(perm[k]);
      }
      t[o] = i;
    }
    return t;
  }();
  template <class R>
  using result = typename tensor_from_dims<R, out_dims>::type;
};

template <std::size_t Rank, int... P>
struct fixed_perm {
  static constexpr bool valid = sizeof...(P) == Rank && fixed_axes<Rank, P...>::unique;
};

// matmul's operand shapes: 1-D or 2-D, inner dimensions equal.
template <class SA, class SB>
struct matmul_shapes {
  static constexpr bool ranks_ok = SA::rank >= 1 && SA::rank <= 2 && SB::rank >= 1 && SB::rank <= 2;
  static constexpr std::size_t ka = ranks_ok ? SA::dims[SA::rank - 1] : 0;
  static constexpr std::size_t kb = ranks_ok ? SB::dims[0] : 0;
  static constexpr bool inner_ok = ka == kb;
  static constexpr std::size_t m = ranks_ok && SA::rank == 2 ? SA::dims[0] : 1;
  static constexpr std::size_t k = ka;
  static constexpr std::size_t n = ranks_ok && SB::rank == 2 ? SB::dims[SB::rank - 1] : 1;
  template <class R>
  static auto result_type() {
    if constexpr (SA::rank == 2 && SB::rank == 2)
      return std::type_identity<tensor<R, m, n>>{};
    else if constexpr (SA::rank == 2)
      return std::type_identity<tensor<R, m>>{};
    else if constexpr (SB::rank == 2)
      return std::type_identity<tensor<R, n>>{};
    else
      return std::type_identity<tensor<R>>{};
  }
  template <class R>
  using result = typename decltype(result_type<R>())::type;
};

// What an op whose static_assert failed returns, so that no second error follows.
struct failed_fixed_op {};

// Reduction kinds.
struct fixed_sum_kind {
  using op = ops::add;
  static constexpr bool mean = false;
  template <class T>
  using result = fixed_sum_t<T>;
};
struct fixed_mean_kind {
  using op = ops::add;
  static constexpr bool mean = true;
  template <class T>
  using result = fixed_float_t<T>;
};
struct fixed_prod_kind {
  using op = ops::mul;
  static constexpr bool mean = false;
  template <class T>
  using result = fixed_sum_t<T>;
};
struct fixed_max_kind {
  using op = ops::maximum;
  static constexpr bool mean = false;
  template <class T>
  using result = T;
};
struct fixed_min_kind {
  using op = ops::minimum;
  static constexpr bool mean = false;
  template <class T>
  using result = T;
};

// Defined in backend/cpu/fixed_eval.hpp.
// out[o] = Op-fold of R-converted e.at(i) over the inputs i of output o (divided by the group
// size for mean), computed in compute_t<R>.
template <class Op, bool Mean, class Plan, class R, class E>
ZENITH_FIXED_INLINE void fixed_reduce(R* out, E const& e);
// out[o] = R(e.at(Plan::src[o])).
template <class Plan, class R, class E>
ZENITH_FIXED_INLINE void fixed_permute(R* out, E const& e);
// out (M x N) = x (M x K) * y (K x N), tensors, row-major, accumulated in compute_t of out's
// element type; also sets out's entry flags (tensor::entry_flags).
template <std::size_t M, std::size_t K, std::size_t N, class Out, class X, class Y>
ZENITH_FIXED_INLINE void fixed_matmul(Out& out, X const& x, Y const& y);

template <class Kind, class E, int... Axes>
ZENITH_FIXED_INLINE auto fixed_reduce_api(E const& e) {
  using S = shape_of_t<E>;
  using ax = fixed_axes<S::rank, Axes...>;
  static_assert(ax::in_range, "zenith: reduction axis out of range for the tensor's rank");
  static_assert(!ax::in_range || ax::unique, "zenith: reduction axis repeated");
  if constexpr (ax::unique) {
    constexpr std::uint32_t mask =
        sizeof...(Axes) == 0 ? std::uint32_t((std::uint64_t(1) << S::rank) - 1) : ax::mask;
    using plan = reduce_plan<S, mask>;
    using R = typename Kind::template result<value_t<E>>;
    constexpr bool has_identity =
        !std::is_same_v<Kind, fixed_max_kind> && !std::is_same_v<Kind, fixed_min_kind>;
    static_assert(plan::out_size == 0 || plan::group > 0 || has_identity,
                  "zenith: max/min over an empty axis of a fixed-size tensor");
    using Out = typename plan::template result<R>;
    if constexpr (staged_expression<E>) {  // under jit: a node of the staged graph
      return staged_reduce<Kind, plan, typename Out::static_shape, R, E>(e);
    } else {
      Out out;
      fixed_reduce<typename Kind::op, Kind::mean, plan>(out.data(), e);
      return out;
    }
  } else {
    return failed_fixed_op{};  // the static_assert above says why
  }
}

}  // namespace detail

namespace detail {

// The public ops below come in two forms, `E const&` and a forwarding `E&&`, so that whichever
// form the dynamic op of the same name uses, these are as good a match for every argument and
// more constrained (fixed_expression subsumes expression): a call on tensors picks them.

template <int... P, class E>
ZENITH_FIXED_INLINE auto fixed_transpose_impl(E const& e) {
  using S = shape_of_t<E>;
  static_assert(fixed_perm<S::rank, P...>::valid,
                "zenith: transpose<P...> needs a permutation of the tensor's axes");
  if constexpr (fixed_perm<S::rank, P...>::valid) {
    using plan = transpose_plan<S, fixed_axes<S::rank, P...>::norm(P)...>;
    using Out = typename plan::template result<value_t<E>>;
    if constexpr (staged_expression<E>) {
      return staged_gather<permuted_order<plan>, typename Out::static_shape, E>(e);
    } else {
      Out out;
      fixed_permute<plan>(out.data(), e);
      return out;
    }
  } else {
    return failed_fixed_op{};  // the static_assert above says why
  }
}

template <class E>
ZENITH_FIXED_INLINE auto fixed_reverse_impl(E const& e) {
  using S = shape_of_t<E>;
  return [&]<std::size_t... K>(std::index_sequence<K...>) ZENITH_FIXED_LAMBDA {
    using plan = transpose_plan<S, (S::rank - 1 - K)...>;
    using Out = typename plan::template result<value_t<E>>;
    if constexpr (staged_expression<E>) {
      return staged_gather<permuted_order<plan>, typename Out::static_shape, E>(e);
    } else {
      Out out;
      fixed_permute<plan>(out.data(), e);
      return out;
    }
  }
  (std::make_index_sequence<S::rank>{});
}

template <class A, class B>
ZENITH_FIXED_INLINE auto fixed_matmul_impl(A const& a, B const& b) {
  using sh = matmul_shapes<shape_of_t<A>, shape_of_t<B>>;
  static_assert(sh::ranks_ok, "zenith: fixed-size matmul takes 1-D or 2-D tensors");
  static_assert(!sh::ranks_ok || sh::inner_ok, "zenith: matmul inner dimensions differ");
  if constexpr (sh::ranks_ok && sh::inner_ok) {
    using R = fixed_common_t<value_t<A>, value_t<B>>;
    using Out = typename sh::template result<R>;
    if constexpr (staged_expression<A> || staged_expression<B>) {
      return staged_matmul<sh, typename Out::static_shape, R, A, B>(a, b);
    } else {
      Out out;
      fixed_matmul<sh::m, sh::k, sh::n>(out, fixed_materialize(a), fixed_materialize(b));
      return out;
    }
  } else {
    return failed_fixed_op{};  // the static_assert above says why
  }
}

template <class A, class B>
ZENITH_FIXED_INLINE auto fixed_dot_impl(A const& a, B const& b) {
  using SA = shape_of_t<A>;
  using SB = shape_of_t<B>;
  static_assert(SA::rank == 1 && SB::rank == 1, "zenith: fixed-size dot takes two 1-D tensors");
  static_assert(SA::size == SB::size, "zenith: dot of vectors of different lengths");
  if constexpr (SA::rank == 1 && SB::rank == 1 && SA::size == SB::size)
    return fixed_matmul_impl(a, b);
  else
    return failed_fixed_op{};
}

template <class A, class B>
ZENITH_FIXED_INLINE auto fixed_cross_impl(A const& a, B const& b) {
  static_assert(std::is_same_v<shape_of_t<A>, fixed_shape<3>> &&
                    std::is_same_v<shape_of_t<B>, fixed_shape<3>>,
                "zenith: cross takes two tensors of shape (3,)");
  using R = fixed_common_t<value_t<A>, value_t<B>>;
  if constexpr (staged_expression<A> || staged_expression<B>) {
    // x[[1, 2, 0]] * y[[2, 0, 1]] - x[[2, 0, 1]] * y[[1, 2, 0]], as staged gathers
    using S = fixed_shape<3>;
    return staged_gather<rotated_order<1>, S, A>(a) * staged_gather<rotated_order<2>, S, B>(b) -
           staged_gather<rotated_order<2>, S, A>(a) * staged_gather<rotated_order<1>, S, B>(b);
  } else if constexpr (user_number<R>) {
    decltype(auto) x = fixed_materialize(a);
    decltype(auto) y = fixed_materialize(b);  // a plain operand stays plain: it scales
    auto const x0 = x.at(0), x1 = x.at(1), x2 = x.at(2);
    auto const y0 = y.at(0), y1 = y.at(1), y2 = y.at(2);
    return tensor<R, 3>(R(x1 * y2 - x2 * y1), R(x2 * y0 - x0 * y2), R(x0 * y1 - x1 * y0));
  } else {
    decltype(auto) x = fixed_materialize(a);
    decltype(auto) y = fixed_materialize(b);
    using C = compute_t<R>;
    C const x0 = C(x.at(0)), x1 = C(x.at(1)), x2 = C(x.at(2));
    C const y0 = C(y.at(0)), y1 = C(y.at(1)), y2 = C(y.at(2));
    return tensor<R, 3>(R(x1 * y2 - x2 * y1), R(x2 * y0 - x0 * y2), R(x0 * y1 - x1 * y0));
  }
}

template <class E>
ZENITH_FIXED_INLINE auto fixed_norm_impl(E const& e) {
  using R = fixed_float_t<value_t<E>>;
  using C = compute_t<R>;
  constexpr std::size_t n = shape_of_t<E>::size;
  if constexpr (staged_expression<E>) {
    return sqrt(fixed_reduce_api<fixed_sum_kind>(square(e)));
  } else {
    tensor<R, n> v;  // the elements as one vector
    fixed_assign<R, n>(v.data(), e);
    C ss = C(R(fixed_matmul_impl(v, v)));
    using std::sqrt;
    return tensor<R>(R(sqrt(ss)));
  }
}

}  // namespace detail

#define ZENITH_FIXED_UNARY(NAME, ...)         \
  template <fixed_expression E>               \
  ZENITH_FIXED_INLINE auto NAME(E const& e) { \
    return __VA_ARGS__(e);                    \
  }                                           \
  template <fixed_expression E>               \
  ZENITH_FIXED_INLINE auto NAME(E&& e) {      \
    return __VA_ARGS__(std::as_const(e));     \
  }
#define ZENITH_FIXED_BINARY(NAME, IMPL)                   \
  template <fixed_expression A, fixed_expression B>       \
  ZENITH_FIXED_INLINE auto NAME(A const& a, B const& b) { \
    return IMPL(a, b);                                    \
  }                                                       \
  template <fixed_expression A, fixed_expression B>       \
  ZENITH_FIXED_INLINE auto NAME(A&& a, B&& b) {           \
    return IMPL(std::as_const(a), std::as_const(b));      \
  }

// Reductions. sum(t): all axes, a rank-0 tensor; sum<1>(t), sum<0, -1>(t): those axes.
#define ZENITH_FIXED_REDUCTION(NAME, KIND)                                   \
  ZENITH_FIXED_UNARY(NAME, detail::fixed_reduce_api<detail::KIND>)           \
  template <int... Axes, fixed_expression E>                                 \
  requires(sizeof...(Axes) >= 1) ZENITH_FIXED_INLINE auto NAME(E const& e) { \
    return detail::fixed_reduce_api<detail::KIND, E, Axes...>(e);            \
  }
ZENITH_FIXED_REDUCTION(sum, fixed_sum_kind)
ZENITH_FIXED_REDUCTION(mean, fixed_mean_kind)
ZENITH_FIXED_REDUCTION(prod, fixed_prod_kind)
ZENITH_FIXED_REDUCTION(max, fixed_max_kind)
ZENITH_FIXED_REDUCTION(min, fixed_min_kind)
#undef ZENITH_FIXED_REDUCTION

// The same elements in row-major order under a new fixed shape.
template <std::size_t... M, fixed_expression E>
requires(sizeof...(M) >= 1) ZENITH_FIXED_INLINE auto reshape(E const& e) {
  using S = detail::shape_of_t<E>;
  static_assert((M * ... * std::size_t(1)) == S::size,
                "zenith: reshape<...> must keep the number of elements");
  if constexpr ((M * ... * std::size_t(1)) == S::size && staged_expression<E>) {
    return staged_gather<detail::same_order, fixed_shape<M...>, E>(e);
  } else if constexpr ((M * ... * std::size_t(1)) == S::size) {
    tensor<value_t<E>, M...> out;
    if constexpr (is_tensor_like_v<E>)
      out.values() = e.values();
    else
      detail::fixed_assign<value_t<E>, S::size>(out.data(), e);  // row-major order is kept
    return out;
  } else {
    return detail::failed_fixed_op{};  // the static_assert above says why
  }
}

// Result axis k is input axis P[k] (negative axes count from the end).
template <int... P, fixed_expression E>
requires(sizeof...(P) >= 1) ZENITH_FIXED_INLINE auto transpose(E const& e) {
  return detail::fixed_transpose_impl<P...>(e);
}
// All axes reversed.
ZENITH_FIXED_UNARY(transpose, detail::fixed_reverse_impl)

// NumPy matmul of 1-D / 2-D fixed-size operands; a vector times a vector is a rank-0 tensor.
ZENITH_FIXED_BINARY(matmul, detail::fixed_matmul_impl)
// Inner product of two vectors of one length: a rank-0 tensor.
ZENITH_FIXED_BINARY(dot, detail::fixed_dot_impl)
// Cross product of two 3-vectors.
ZENITH_FIXED_BINARY(cross, detail::fixed_cross_impl)
// The 2-norm of all elements (Frobenius for a matrix): a rank-0 tensor of a floating type.
ZENITH_FIXED_UNARY(norm, detail::fixed_norm_impl)

#undef ZENITH_FIXED_UNARY
#undef ZENITH_FIXED_BINARY

}  // namespace zenith
