#pragma once
// Evaluators: the "how" for each expression node (Eigen's split: the expression says what).
// An evaluator tree mirrors the expression tree, except that views and reshapes disappear:
// they are pushed down into the strides of the leaves. Barriers (reductions, matmul, ...) are
// computed into a buffer when the evaluator is built and then read as leaves.
//
// Every evaluator offers
//   for_each_leaf(f)       f(leaf) for every strided leaf below it
//   start_row(idx, rank)   position on the row whose outer indices are idx[0 .. rank-2]
//   scalar(j)              the value at inner index j of that row (compute type)
//   simd<A>(j)             xsimd batch of the values at j .. j+W-1, for row_access A
//   vectorizable<Lane>()   whether simd() works with batches of Lane's width
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>

#include "../../core/apply.hpp"
#include "../../core/array.hpp"
#include "../../expr/node.hpp"  // and xsimd, through expr/ops.hpp
#include "../../expr/op_support.hpp"
#include "../../expr/reshape.hpp"
#include "../../expr/views.hpp"

namespace zenith {

template <class E>
concept dense_leaf = expression<E> && requires {
  requires std::remove_cvref_t<E>::dense;
};

// Element types xsimd has batches for.
template <class T>
inline constexpr bool simd_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> ||
#if defined(__AVX512BW__) && !defined(__OPTIMIZE__)
    // Unoptimised AVX-512 builds: GCC turns some intrinsics into macros that xsimd 8.1's integer
    // select cannot compile, so integer expressions take the scalar path there.
    false;
#else
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;
#endif

namespace detail {

// Copies a strided view of `rank` dims into a fresh contiguous array.
template <class T>
struct gather_step {
  T const* base;
  zenith::shape s;
  std::array<std::int64_t, max_rank> st;
  T* out;
  void run() {
    std::size_t n = s.numel(), r = s.size();
    std::array<std::size_t, max_rank> idx{};
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t off = 0;
      for (std::size_t k = 0; k < r; ++k) off += std::int64_t(idx[k]) * st[k];
      out[i] = base[off];
      for (std::size_t k = r; k-- > 0;) {
        if (++idx[k] < s[k]) break;
        idx[k] = 0;
      }
    }
  }
  void pointers(pointer_list& l) {
    l.writes(out);
    l.reads(base);
  }
};

template <class T>
array<T> gather_strided(T const* base, zenith::shape const& s,
                        std::array<std::int64_t, max_rank> const& st) {
  auto out = array<T>::empty(s);
  gather_step<T> step{base, s, st, out.data()};
  run_step(step);
  return out;
}

// NumPy's no-copy reshape: new strides for the same memory, if the layout allows.
inline bool restride(zenith::shape const& old_s, std::array<std::int64_t, max_rank> const& old_st,
                     zenith::shape const& new_s, std::array<std::int64_t, max_rank>& new_st) {
  // Drop size-1 axes of the old layout; they carry no stride information.
  std::size_t od[max_rank], on = 0;
  std::int64_t os[max_rank];
  for (std::size_t i = 0; i < old_s.size(); ++i)
    if (old_s[i] != 1) {
      od[on] = old_s[i];
      os[on++] = old_st[i];
    }
  std::size_t nn = new_s.size();
  std::size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nn && oi < on) {
    std::size_t np = new_s[ni], op = od[oi];
    while (np != op) {
      if (np < op) {
        if (nj >= nn) return false;
        np *= new_s[nj++];
      } else {
        if (oj >= on) return false;
        op *= od[oj++];
      }
    }
    for (std::size_t ok = oi; ok + 1 < oj; ++ok)
      if (os[ok] != os[ok + 1] * std::int64_t(od[ok + 1])) return false;
    new_st[nj - 1] = os[oj - 1];
    for (std::size_t nk = nj - 1; nk > ni; --nk)
      new_st[nk - 1] = new_st[nk] * std::int64_t(new_s[nk]);
    ni = nj++;
    oi = oj++;
  }
  for (; ni < nn; ++ni) new_st[ni] = 0;  // trailing size-1 axes
  return oi >= on;
}

}  // namespace detail

// What a loop knows of its leaves' inner strides, for simd<A>(j): nothing (strided), that every
// one is 1 (unit), or that every one is 1 or 0 (unit_or_broadcast: a broadcast value, such as a
// sum's cotangent, costs one predictable branch per batch instead of sending the whole loop down
// the strided path). The kept_ forms read leaves as unit or unit_or_broadcast do, and every
// reuse_node's values from its group piece or buffer (autodiff/reuse.hpp), never recomputing them:
// a gradient's grouped loop whose only costly ops are kept values then compiles as a cheap body.
enum class row_access { strided, unit, unit_or_broadcast, kept_unit, kept_unit_or_broadcast };
template <bool Unit>
inline constexpr row_access unit_access = Unit ? row_access::unit : row_access::strided;
// How A reads a leaf.
constexpr row_access leaf_access(row_access a) {
  if (a == row_access::kept_unit) return row_access::unit;
  if (a == row_access::kept_unit_or_broadcast) return row_access::unit_or_broadcast;
  return a;
}
constexpr bool kept_access(row_access a) { return a != leaf_access(a); }
// The kept_ form of a unit or unit_or_broadcast access.
constexpr row_access kept_form(row_access a) {
  if (a == row_access::unit) return row_access::kept_unit;
  if (a == row_access::unit_or_broadcast) return row_access::kept_unit_or_broadcast;
  return a;
}

// A strided read of T elements: the one kind of leaf.
template <class T>
struct leaf_eval {
  using value_type = T;
  using compute_type = compute_t<T>;

  T const* base = nullptr;
  std::size_t rank = 0;
  std::array<std::int64_t, max_rank> stride{};
  void const* source = nullptr;  // the buffer read, for alias checks
  std::shared_ptr<void> hold;    // keeps a materialized copy alive
  T const* row = nullptr;
  std::int64_t inner = 0;

  leaf_eval() = default;
  leaf_eval(T const* p, zenith::shape const& s, void const* src)
      : base(p), rank(s.size()), stride(leaf_strides(s)), source(src) {}
  // A leaf that keeps a's buffer alive (a barrier's or a kept value's result): out of line, as
  // array_leaf below.
  template <class U>
  [[gnu::noinline]] static leaf_eval owning(array<U> const& a) {
    leaf_eval l(a.data(), a.shape(), a.storage().get());
    l.hold = a.storage();
    return l;
  }

  template <class F>
  void for_each_leaf(F&& f) {
    f(*this);
  }

  void apply(affine_map const& m) {
    base += map_strides(m, stride);
    rank = m.out_rank;
  }

  void reshape(zenith::shape const& from, zenith::shape const& to) {
    std::array<std::int64_t, max_rank> st{};
    if (!detail::restride(from, stride, to, st)) {
      auto copy = detail::gather_strided(base, from, stride);
      hold = copy.storage();
      base = copy.data();
      st = row_major_strides(to);
    }
    stride = st;
    rank = to.size();
  }

  void start_row(std::int64_t const* idx, std::size_t r) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k + 1 < r; ++k) off += idx[k] * stride[k];
    row = base + off;
    inner = r ? stride[r - 1] : 0;
  }

  compute_type scalar(std::int64_t j) const { return compute_type(row[j * inner]); }

  template <row_access A>
  auto simd(std::int64_t j) const {
    using B = xsimd::batch<compute_type>;
    if constexpr (std::is_same_v<T, compute_type>) {
      if constexpr (leaf_access(A) == row_access::unit) return B::load_unaligned(row + j);
      if constexpr (leaf_access(A) == row_access::unit_or_broadcast)
        return inner ? B::load_unaligned(row + j) : B(*row);
      if (inner == 1) return B::load_unaligned(row + j);
      if (inner == 0) return B(*row);
    }
    alignas(64) compute_type tmp[B::size];
    for (std::size_t i = 0; i < B::size; ++i)
      tmp[i] = compute_type(row[(j + std::int64_t(i)) * inner]);
    return B::load_aligned(tmp);
  }

  template <class Lane>
  static constexpr bool vectorizable() {
    return !std::is_same_v<T, bool> && simd_type_v<compute_type> &&
           sizeof(compute_type) == sizeof(Lane);
  }
};

template <class T>
struct scalar_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  compute_type value;
  template <class F>
  void for_each_leaf(F&&) {}
  void start_row(std::int64_t const*, std::size_t) {}
  compute_type scalar(std::int64_t) const { return value; }
  template <row_access A>
  auto simd(std::int64_t) const {
    return xsimd::batch<compute_type>(value);
  }
  template <class Lane>
  static constexpr bool vectorizable() {
    return !std::is_same_v<T, bool> && simd_type_v<compute_type> &&
           sizeof(compute_type) == sizeof(Lane);
  }
};

// map_eval's members expand the children over an index pack of the class instead of through
// apply and a generic lambda: a test file instantiates thousands of node types, and each member
// then costs one instantiation instead of four.
template <class Op, class Indices, class... Es>
struct map_eval_members;

template <class Op, std::size_t... I, class... Es>
struct map_eval_members<Op, std::index_sequence<I...>, Es...> {
  using value_type = op_result_t<Op, typename Es::value_type...>;
  using compute_type = compute_t<value_type>;
  std::tuple<Es...> children;

  template <class F>
  void for_each_leaf(F&& f) {
    (std::get<I>(children).for_each_leaf(f), ...);
  }
  void start_row(std::int64_t const* idx, std::size_t r) {
    (std::get<I>(children).start_row(idx, r), ...);
  }
  compute_type scalar(std::int64_t j) const {
    return compute_type(Op::apply(std::get<I>(children).scalar(j)...));
  }
  template <row_access A>
  auto simd(std::int64_t j) const {
    return Op::simd(std::get<I>(children).template simd<A>(j)...);
  }
  template <class Lane>
  static constexpr bool vectorizable() {
    // bool results are fine inside the tree (batch_bool), but only ops that declare it take a
    // mask as an operand (where's condition, cast); a bool leaf is never vectorized.
    return (Es::template vectorizable<Lane>() && ...) &&
           ((!std::is_same_v<typename Es::compute_type, bool> || takes_mask<Op>(I)) && ...) &&
           (std::is_same_v<compute_type, bool> ||
            (simd_type_v<compute_type> && sizeof(compute_type) == sizeof(Lane)));
  }
};

template <class Op, class... Es>
struct map_eval : map_eval_members<Op, std::index_sequence_for<Es...>, Es...> {};

// Whether one batch of Ev runs a costly op (a transcendental: Op::costly in expr/ops.hpp). Each
// copy of such a body inlines the ops' whole SIMD kernels (hundreds of instructions for sin or
// tanh), and the body is long enough to keep the core busy alone: an elementwise loop or a
// reduction over it is compiled once per iteration rather than unrolled, for one kind of row
// access. Evaluators that inline a child's batch are costly when their child is.
template <class Ev>
inline constexpr bool costly_batch_v = false;
template <class Op, class... Es>
inline constexpr bool costly_batch_v<map_eval<Op, Es...>> = costly_op<Op>() ||
                                                            (costly_batch_v<Es> || ...);
// The same under a kept_ row access, where a reuse_node's batch is a load (reuse.hpp).
template <class Ev>
inline constexpr bool costly_kept_v = costly_batch_v<Ev>;
template <class Op, class... Es>
inline constexpr bool costly_kept_v<map_eval<Op, Es...>> = costly_op<Op>() ||
                                                           (costly_kept_v<Es> || ...);

// The xsimd lane type of an evaluator: its compute type, except that a bool-valued node (a
// comparison) computes batch_bool masks of its operands' lane type.
template <class Ev>
struct simd_lane {
  using type = typename Ev::compute_type;
};
template <class Op, class E0, class... Es>
requires std::is_same_v < typename map_eval<Op, E0, Es...>::compute_type,
bool > struct simd_lane<map_eval<Op, E0, Es...>> { using type = typename simd_lane<E0>::type; };
template <class Ev>
using simd_lane_t = typename simd_lane<Ev>::type;

// evaluator_for<E>: the evaluator type of an expression type and how to build one.
template <class E>
struct evaluator_for;

template <class E>
using evaluator_t = typename evaluator_for<std::remove_cvref_t<E>>::type;

template <class E>
evaluator_t<E> make_evaluator(E const& e) {
  return evaluator_for<std::remove_cvref_t<E>>::build(e);
}

namespace detail {

// The CPU backend reads host memory only.
[[noreturn]] inline void not_on_cpu(device d, zenith::shape const& s) {
  throw device_error("zenith: an expression reads an array of shape " + s.str() + " on " + d.str() +
                     "; the CPU backend reads arrays on the CPU only, and this operation does "
                     "not run on " +
                     d.str() +
                     " yet (bring the array back with "
                     ".to(zenith::cpu))");
}

// The leaf reading an array's memory at data (of shape s, in buffer b): out of line, compiled
// once per element type rather than in every evaluator that reads an array.
template <class T>
[[gnu::noinline]] leaf_eval<T> array_leaf(T const* data, zenith::shape const& s, buffer const* b) {
  if (b && b->where() != cpu) not_on_cpu(b->where(), s);
  return leaf_eval<T>(data, s, b);
}

// How a leaf of shape `from` broadcast to `to` is read (views::broadcast_to's map), out of line.
[[gnu::noinline]] inline affine_map broadcast_map(zenith::shape const& from,
                                                  zenith::shape const& to) {
  return views::broadcast_to{to}.map(from);
}

}  // namespace detail

template <class E>
requires dense_leaf<E>
struct evaluator_for<E> {
  using type = leaf_eval<value_t<E>>;
  static type build(E const& e) {
    if constexpr (requires { e.storage(); }) {
      return detail::array_leaf<value_t<E>>(e.data(), e.shape(), e.storage().get());
    } else {
      // A leaf without a buffer (a fixed-size tensor) lives in the expression, which a
      // recording outlives: the recording reads a copy of it instead (core/recording.hpp).
      if (detail::active_recording()) return type::owning(copy_from(e.data(), e.shape()));
      return type(e.data(), e.shape(), e.data());
    }
  }
};

template <class T>
struct evaluator_for<scalar_node<T>> {
  using type = scalar_eval<T>;
  static type build(scalar_node<T> const& e) { return type{compute_t<T>(e.value)}; }
};

// Broadcasts every leaf below ev from shape `from` to shape `to`.
template <class Ev>
void broadcast_leaves(Ev& ev, zenith::shape const& from, zenith::shape const& to) {
  if (from == to) return;
  affine_map m = detail::broadcast_map(from, to);
  ev.for_each_leaf([&](auto& leaf) { leaf.apply(m); });
}

template <class Op, class... Cs>
struct evaluator_for<map_node<Op, Cs...>> {
  using type = map_eval<Op, evaluator_t<Cs>...>;
  static type build(map_node<Op, Cs...> const& e) {
    zenith::shape s = e.shape();
    return zenith::detail::apply(
        [&](auto const&... c) { return type{{std::tuple<evaluator_t<Cs>...>{child(c, s)...}}}; },
        e.children);
  }
  template <class C>
  static evaluator_t<C> child(C const& c, zenith::shape const& s) {
    auto ev = make_evaluator(c);
    broadcast_leaves(ev, c.shape(), s);
    return ev;
  }
};

// The child's evaluator with the view's map applied to every leaf below it.
template <class V, class C>
evaluator_t<C> view_mapped(view_node<V, C> const& e) {
  auto ev = make_evaluator(e.child);
  affine_map m = e.view.map(e.child.shape());
  ev.for_each_leaf([&](auto& leaf) { leaf.apply(m); });
  return ev;
}

template <class V, class C>
struct evaluator_for<view_node<V, C>> {
  using type = evaluator_t<C>;
  static type build(view_node<V, C> const& e) { return view_mapped(e); }
};

// A broadcast of a computed value (the cotangent of a sum, 1 / s, reaching every element;
// exp(y) for y of shape (n, 1) added to x of shape (n, m)) is constant along a row wherever
// every leaf below it has inner stride 0. There it is computed once per row, when the row
// starts, instead of once per batch: a division per batch was a fifth of log_sum_exp's gradient
// (bench/fastad_suite). The per-row value is computed the way the loop would (SIMD batch or
// scalar), so results are bitwise unchanged. Every loop takes one predictable branch per batch:
// in a unit-stride loop the only constant child is one with no leaf at all (the cotangent of a
// sum scaled by numbers, in the loop that computes the sum with its gradient).
template <class Ev>
struct row_constant_eval {
  using value_type = typename Ev::value_type;
  using compute_type = typename Ev::compute_type;
  Ev child;
  bool constant = false;  // on the current row
  compute_type value{};   // the child's scalar value there
  compute_type lane{};    // and its SIMD one

  template <class F>
  void for_each_leaf(F&& f) {
    child.for_each_leaf(f);
  }
  void start_row(std::int64_t const* idx, std::size_t r) {
    child.start_row(idx, r);
    constant = true;
    child.for_each_leaf([&](auto const& leaf) { constant = constant && leaf.inner == 0; });
    if (!constant) return;
    value = child.scalar(0);
    lane = value;
    if constexpr (simd_type_v<compute_type> && Ev::template vectorizable<compute_type>())
      lane = child.template simd<row_access::unit_or_broadcast>(0).get(0);
  }
  compute_type scalar(std::int64_t j) const { return constant ? value : child.scalar(j); }
  template <row_access A>
  auto simd(std::int64_t j) const {
    if (constant) return xsimd::batch<compute_type>(lane);
    return child.template simd<A>(j);
  }
  template <class Lane>
  static constexpr bool vectorizable() {
    return Ev::template vectorizable<Lane>();
  }
};

template <class Ev>
inline constexpr bool costly_batch_v<row_constant_eval<Ev>> = costly_batch_v<Ev>;
template <class Ev>
inline constexpr bool costly_kept_v<row_constant_eval<Ev>> = costly_kept_v<Ev>;

// Whether an evaluator's scalar(j) and simd(j) take any j of the row it started: true of the
// evaluators built from leaves and elementwise ops, not of one that reads a piece of a group
// pass (reuse_eval), whose j must lie in its piece. Other evaluators opt in where they hold.
template <class Ev>
inline constexpr bool any_position_v = false;
template <class T>
inline constexpr bool any_position_v<leaf_eval<T>> = true;
template <class T>
inline constexpr bool any_position_v<scalar_eval<T>> = true;
template <class Op, class... Es>
inline constexpr bool any_position_v<map_eval<Op, Es...>> = (any_position_v<Es> && ...);
template <class Ev>
inline constexpr bool any_position_v<row_constant_eval<Ev>> = any_position_v<Ev>;

// A broadcast child worth the check: computed (a leaf's or a literal's value costs one load),
// not a mask, and readable at the row's first position.
template <class C>
concept computed_broadcast =
    !dense_leaf<C> && !std::is_same_v<C, scalar_node<value_t<C>>> &&
    !std::is_same_v<typename evaluator_t<C>::compute_type, bool> && any_position_v<evaluator_t<C>>;

template <computed_broadcast C>
struct evaluator_for<view_node<views::broadcast_to, C>> {
  using type = row_constant_eval<evaluator_t<C>>;
  static type build(view_node<views::broadcast_to, C> const& e) { return type{view_mapped(e)}; }
};

template <class C>
struct evaluator_for<reshape_node<C>> {
  using type = evaluator_t<C>;
  static type build(reshape_node<C> const& e) {
    auto ev = make_evaluator(e.child);
    zenith::shape from = e.child.shape(), to = e.shape();
    ev.for_each_leaf([&](auto& leaf) { leaf.reshape(from, to); });
    return ev;
  }
};

// Barriers: nodes with `static constexpr bool barrier = true` are computed into a buffer by
// eval_barrier(node) (found by ADL; each barrier's kernel header defines it), then read as a leaf.
template <class E>
requires requires { requires E::barrier; }
struct evaluator_for<E> {
  using type = leaf_eval<value_t<E>>;
  static type build(E const& e) { return type::owning(eval_barrier(e)); }
};

}  // namespace zenith
