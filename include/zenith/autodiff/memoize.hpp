#pragma once
// memoize<Level>(e): the same expression with every barrier (reduction, matmul, softmax,
// layer_norm, concatenate) evaluated once and held as memo_node. Under a trace (a nested
// transform's outer level), a barrier that reads traced arrays is recorded there like any
// materialization, so that the rules that read its value stay differentiable; Level is the
// expression's derivative level (backend/cpu/evaluate.hpp). The reverse pass reads a node's value
// in its rules (tanh's derivative is 1 - y * y, with y the node itself; softmax's reads its
// output); without this, each such read would evaluate the barriers below it again, a GEMM per
// read. The rebuilt expression keeps every node type's structure, so the reverse rules still see
// the barrier and its children.
//
// Below the root, an elementwise node whose op is costly (exp, log, sin, ...; float or double) and
// whose value a rule reads is kept too, as a reuse_node (autodiff/reuse.hpp): the value and the
// rules that read it (exp's partial is its own value, the partial of x in x * exp(h) is exp(h))
// share one evaluation where it fits in cache, instead of each loop computing the
// transcendental again. The root is not kept: its value is the output itself. Neither is a node
// only the value reads (log in sum(log(x))): keeping it would cost a buffer and a pass.
#include <tuple>
#include <utility>
#include <vector>

#include "../backend/cpu/concat.hpp"
#include "../backend/cpu/conv.hpp"
#include "../backend/cpu/evaluate.hpp"
#include "../backend/cpu/layer_norm.hpp"
#include "../backend/cpu/softmax.hpp"
#include "../core/apply.hpp"
#include "../expr/concat.hpp"
#include "../expr/conv.hpp"
#include "../expr/layer_norm.hpp"
#include "../expr/matmul.hpp"
#include "../expr/reduce.hpp"
#include "../expr/reshape.hpp"
#include "../expr/softmax.hpp"
#include "../expr/views.hpp"
#include "reuse.hpp"

namespace zenith {

// A barrier B and its value, evaluated once.
template <expression B>
struct memo_node : expr_base<memo_node<B>> {
  using value_type = value_t<B>;
  static constexpr bool fixed = false;

  B node;
  array<value_type> value;

  memo_node(B b, array<value_type> v) : node(std::move(b)), value(std::move(v)) {}
  // What a backend that does not read the barrier evaluates (backend/cuda/lower.hpp): its value,
  // computed where the arrays live.
  array<value_type> const& decomposed() const { return value; }
  zenith::shape shape() const { return value.shape(); }
  template <class F>
  void for_each_array(F&& f) const {
    node.for_each_array(f);
    f(value);
  }
};

template <class B>
struct evaluator_for<memo_node<B>> {
  using type = leaf_eval<value_t<B>>;
  static type build(memo_node<B> const& e) { return type::owning(e.value); }
};

namespace autodiff {

// memoized_t<E>: the type memoize gives E, computed on types alone (the functions below are
// instantiated per derivative level, and only where they run).
template <class E>
struct memoized {
  using type = E;
};
template <class E>
using memoized_t = typename memoized<std::remove_cvref_t<E>>::type;

// Whether e may be kept below the root: a costly elementwise node of a float type.
template <class E>
inline constexpr bool kept_v = false;
template <class Op, class... Cs>
inline constexpr bool kept_v<map_node<Op, Cs...>> =
    costly_op<Op>() && !map_node<Op, Cs...>::fixed
    && std::is_floating_point_v<value_t<map_node<Op, Cs...>>>;

// Which rules read a node's value, decided on types: an op's partials are called (unevaluated)
// with value_marker standing for the node's own value, and the result's type is searched for
// the marker or for an operand's type.
template <class T>
struct value_marker : expr_base<value_marker<T>> {
  using value_type = T;
  static constexpr bool fixed = false;
  zenith::shape shape() const { return {}; }
  template <class F>
  void for_each_array(F&&) const {}
};

// Whether type M occurs in T (T itself, or any type argument of T, recursively).
template <class M, class T>
struct mentions : std::is_same<M, T> {};
template <class M, template <class...> class Tpl, class... As>
struct mentions<M, Tpl<As...>>
    : std::bool_constant<std::is_same_v<M, Tpl<As...>> || (mentions<M, As>::value || ...)> {};

// Whether some partial of map_node<Op, Cs...> that the reverse pass takes mentions M (only
// operands that take a cotangent: where's condition, say, has no partial to call).
template <class M, class Op, class... Cs>
constexpr bool partials_mention() {
  using Y = value_marker<value_t<map_node<Op, Cs...>>>;
  return []<std::size_t... I>(std::index_sequence<I...>) {
    auto one = []<std::size_t J>(std::integral_constant<std::size_t, J>) {
      if constexpr (!operand_differentiable_v<Op, J, Cs...>)
        return false;
      else if constexpr (requires(Y const& y, Cs const&... xs) {
                           Op::template partial<J>(y, xs...);
                         })
        return mentions<M, decltype(Op::template partial<J>(std::declval<Y const&>(),
                                                            std::declval<Cs const&>()...))>::value;
      else
        return false;
    };
    return (one(std::integral_constant<std::size_t, I>{}) || ...);
  }
  (std::index_sequence_for<Cs...>{});
}

// Whether e's own rule reads its value (exp's partial is exp itself; log's reads only its operand).
template <class E>
inline constexpr bool reads_itself_v = false;
template <class Op, class... Cs>
inline constexpr bool reads_itself_v<map_node<Op, Cs...>> =
    partials_mention<value_marker<value_t<map_node<Op, Cs...>>>, Op, Cs...>();

// Whether parent P's rule reads its child C's value. A sum or mean never does; an elementwise
// parent does when a partial mentions C, or its own value (which, recomputed, reads C again);
// any other node is assumed to.
template <class P, class C>
inline constexpr bool parent_reads_v = true;
template <class C, class Op, class C2>
requires(
    std::is_same_v<Op, ops::reduce_sum> ||
    std::is_same_v<Op, ops::reduce_mean>) inline constexpr bool parent_reads_v<reduce_node<Op, C2>,
                                                                               C> = false;
template <class C, class Op, class... Cs>
inline constexpr bool parent_reads_v<map_node<Op, Cs...>, C> =
    partials_mention<C, Op, Cs...>() || reads_itself_v<map_node<Op, Cs...>>;

// Whether memoize keeps child C of parent P: a costly node that some rule reads besides the
// value's own loop (kept only for that one read, it would cost a buffer and a pass).
template <class P, class C>
inline constexpr bool kept_in_v = kept_v<C> && (reads_itself_v<C> || parent_reads_v<P, C>);

// The memoized form of child C of P: kept, or as at the root.
template <class P, class C>
using memoized_child_t = std::conditional_t<kept_in_v<P, std::remove_cvref_t<C>>,
                                            reuse_node<memoized_t<C>>, memoized_t<C>>;

// Every node with children exposes them one way (operands(), a tuple) and can be rebuilt over new
// ones (with_operands), the node protocol of expr/node.hpp; so this pass is written once: each
// operand memoized (kept where a rule reads it), the node rebuilt over them, and a barrier then
// evaluated and held (memo_node). A vector of parts (concatenate's, its count known at run time
// only) is one operand, memoized part by part.
template <class E>
concept has_operands = requires(E const& e) {
  e.operands();
};
template <class E>
inline constexpr bool elementwise_v = false;
template <class Op, class... Cs>
inline constexpr bool elementwise_v<map_node<Op, Cs...>> = true;
template <class E>
inline constexpr bool barrier_v = requires {
  requires E::barrier;
};

template <class P, class X>
struct memoized_operand {
  using type = memoized_child_t<P, X>;
};
template <class P, class E>
struct memoized_operand<P, std::vector<E>> {
  using type = std::vector<memoized_child_t<P, E>>;
};
template <class P, class X>
using memoized_operand_t = typename memoized_operand<P, std::remove_cvref_t<X>>::type;

// P over its memoized operands, before a barrier is evaluated.
template <class P, class Operands = decltype(std::declval<P const&>().operands())>
struct rebuilt;
template <class P, class... Xs>
struct rebuilt<P, std::tuple<Xs...>> {
  using type = decltype(std::declval<P const&>().with_operands(
      std::declval<memoized_operand_t<P, Xs>>()...));
};

template <has_operands E>
struct memoized<E> {
  using R = typename rebuilt<E>::type;
  using type = std::conditional_t<barrier_v<E>, memo_node<R>, R>;
};

// Barrier b held with its value, evaluated as a level-Level expression.
template <int Level, class B>
memo_node<B> memo(B b) {
  auto v = zenith::detail::evaluate_for_rules<value_t<B>, Level>(b);
  return memo_node<B>(std::move(b), std::move(v));
}

// The structure-preserving rebuild of a level-Level expression into memoized_t<E>; anything
// else (leaves, and nodes with no reverse rule) is kept as it is. The return types are spelled
// out, so that naming one instantiates nothing.
template <class E>
struct memoizer {
  template <int Level>
  static E const& run(E const& e) {
    return e;
  }
};

template <int Level = 0, class E>
decltype(auto) memoize(E const& e) {
  return memoizer<E>::template run<Level>(e);
}

// Child c of parent P memoized: kept when kept_in_v, else as memoize gives it.
template <class P, int Level = 0, class E>
decltype(auto) memoize_child(E const& e) {
  if constexpr (kept_in_v<P, E>)
    return memoized_child_t<P, E>(memoize<Level>(e));
  else
    return memoize<Level>(e);
}

// The same, with a place where a sum or mean may be queued instead of evaluated now: passed down
// only while no rule reads the child's value (the queue runs after the reverse pass is built),
// and only through elementwise parents (any other parent is assumed to read it).
template <class P, int Level = 0, class E, class Queue>
decltype(auto) memoize_child(E const& e, Queue& queue) {
  if constexpr (kept_in_v<P, E> || parent_reads_v<P, E> ||
                !requires { memoizer<E>::template run<Level>(e, queue); })
    return memoize_child<P, Level>(e);
  else
    return memoizer<E>::template run<Level>(e, queue);
}

// memoize(e, queue): memoize for value_and_grad, whose total sums and means that no rule reads
// (the sum in -0.5 * sum(square(x - mu)) / s2) are queued with the gradients (queue's
// queue_total, a cotangent store) instead of evaluated first: one pass over the inputs computes
// both. Their values are final once the queue is flushed, and only then may e's value be
// evaluated.
template <class E, class Queue>
memoized_t<E> memoize(E const& e, Queue& queue) {
  if constexpr (requires { memoizer<E>::template run<0>(e, queue); })
    return memoizer<E>::template run<0>(e, queue);
  else
    return memoize(e);
}

// Operand x of parent P memoized (memoize_child, with the queue where given; a vector part by
// part).
template <class P, int Level, class X, class... Queue>
decltype(auto) memoize_operand(X const& x, Queue&... queue) {
  if constexpr (requires {
                  typename X::value_type;
                  x.size();
                  x.begin();
                }) {
    std::vector<memoized_child_t<P, typename X::value_type>> parts;
    parts.reserve(x.size());
    for (auto const& p : x) parts.push_back(memoize_child<P, Level>(p));
    return parts;
  } else {
    return memoize_child<P, Level>(x, queue...);
  }
}

// The pass for any node with operands: rebuilt over its memoized operands, then held with its
// value if it is a barrier.
template <class P>
struct memoize_node {
  template <int Level, class... Queue>
  static typename rebuilt<P>::type rebuild(P const& e, Queue&... queue) {
    return zenith::detail::apply(
        [&](auto const&... c) {
          return e.with_operands(memoize_operand<P, Level>(c, queue...)...);
        },
        e.operands());
  }
  template <int Level>
  static memoized_t<P> run(P const& e) {
    if constexpr (barrier_v<P>)
      return memo<Level>(rebuild<Level>(e));
    else
      return rebuild<Level>(e);
  }
};

template <has_operands P>
struct memoizer<P> : memoize_node<P> {
  using memoize_node<P>::run;
  // The queue passes through elementwise parents only (see memoize_child).
  template <int Level, class Queue>
  requires elementwise_v<P>
  static memoized_t<P> run(P const& e, Queue& queue) {
    return memoize_node<P>::template rebuild<Level>(e, queue);
  }
};

template <class Op, class C>
struct memoizer<reduce_node<Op, C>> : memoize_node<reduce_node<Op, C>> {
  using P = reduce_node<Op, C>;
  using memoize_node<P>::run;
  // A floating-point sum or mean of everything, queued when the queue takes it. Its child is
  // memoized without the queue: a queued sum reads what is below it in the same pass.
  static constexpr bool queueable =
      floating_element<value_t<P>> &&
      (std::is_same_v<Op, ops::reduce_sum> || std::is_same_v<Op, ops::reduce_mean>);
  template <int Level, class Queue>
  requires queueable static memoized_t<P> run(P const& e, Queue& queue) {
    auto r = memoize_node<P>::template rebuild<Level>(e);
    zenith::shape s = r.shape();
    if (auto v = queue.template queue_total<Op, value_t<P>>(r.child, s))
      return memoized_t<P>(std::move(r), std::move(*v));
    return memo<Level>(std::move(r));
  }
};

// The value of a memoized expression: a barrier at the root is already evaluated.
template <int Level = 0, class M>
array<value_t<M>> memoized_value(M const& m) {
  if constexpr (requires { m.value; })
    return m.value;
  else
    return zenith::detail::evaluate_for_rules<value_t<M>, Level>(m);
}

}  // namespace autodiff
}  // namespace zenith
