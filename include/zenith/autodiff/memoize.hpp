#pragma once
// memoize<Level>(e): the same expression with every barrier (reduction, matmul, softmax,
// concatenate) evaluated once and held as memo_node. Under a trace (a nested transform's outer
// level), a barrier that reads traced arrays is recorded there like any materialization, so that
// the rules that read its value stay differentiable; Level is the expression's derivative level
// (backend/cpu/evaluate.hpp). The reverse pass reads a node's value in its rules
// (tanh's derivative is 1 - y * y, with y the node itself; softmax's reads its output); without
// this, each such read would evaluate the barriers below it again, a GEMM per read. The rebuilt
// expression keeps every node type's structure, so the reverse rules still see the barrier and its
// children.
//
// Below the root, an elementwise node whose op is costly (exp, log, sin, ...; float or double) is
// kept too, as a reuse_node (autodiff/reuse.hpp): the value and the rules that read it (exp's
// partial is its own value, the partial of x in x * exp(h) is exp(h)) share one evaluation where
// it fits in cache, instead of each loop computing the transcendental again. The root is not
// kept: its value is the output itself.
#include <tuple>
#include <utility>
#include <vector>

#include "../backend/cpu/concat.hpp"
#include "../backend/cpu/evaluate.hpp"
#include "../backend/cpu/softmax.hpp"
#include "../expr/concat.hpp"
#include "../expr/matmul.hpp"
#include "../expr/reduce.hpp"
#include "../expr/reshape.hpp"
#include "../expr/softmax.hpp"
#include "../expr/views.hpp"
#include "reuse.hpp"

namespace zenith {

// A barrier B and its value, evaluated once.
template <expression B>
struct memo_node : expr_base {
  using value_type = value_t<B>;
  static constexpr bool fixed = false;

  B node;
  array<value_type> value;

  memo_node(B b, array<value_type> v) : node(std::move(b)), value(std::move(v)) {}
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

// Whether memoize keeps e below the root (a costly elementwise node of a float type).
template <class E>
inline constexpr bool kept_v = false;
template <class Op, class... Cs>
inline constexpr bool kept_v<map_node<Op, Cs...>> =
    costly_op<Op>() && !map_node<Op, Cs...>::fixed
    && std::is_floating_point_v<value_t<map_node<Op, Cs...>>>;

// The memoized form of a child node: kept, or as at the root.
template <class E>
using memoized_child_t =
    std::conditional_t<kept_v<std::remove_cvref_t<E>>, reuse_node<memoized_t<E>>, memoized_t<E>>;

template <class Op, class... Cs>
struct memoized<map_node<Op, Cs...>> {
  using type = map_node<Op, memoized_child_t<Cs>...>;
};
template <class V, class C>
struct memoized<view_node<V, C>> {
  using type = view_node<V, memoized_child_t<C>>;
};
template <class C>
struct memoized<reshape_node<C>> {
  using type = reshape_node<memoized_child_t<C>>;
};
template <class Op, class C>
struct memoized<reduce_node<Op, C>> {
  using type = memo_node<reduce_node<Op, memoized_child_t<C>>>;
};
template <class A, class B>
struct memoized<matmul_node<A, B>> {
  using type = memo_node<matmul_node<memoized_child_t<A>, memoized_child_t<B>>>;
};
template <class Op, class E>
struct memoized<softmax_node<Op, E>> {
  using type = memo_node<softmax_node<Op, memoized_child_t<E>>>;
};
template <class Op, class E>
struct memoized<concat_node<Op, std::vector<E>>> {
  using type = memo_node<concat_node<Op, std::vector<memoized_child_t<E>>>>;
};
template <class Op, class... Es>
struct memoized<concat_node<Op, std::tuple<Es...>>> {
  using type = memo_node<concat_node<Op, std::tuple<memoized_child_t<Es>...>>>;
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

// e memoized as a child node: kept when kept_v, else as memoize gives it.
template <int Level = 0, class E>
decltype(auto) memoize_child(E const& e) {
  if constexpr (kept_v<E>)
    return memoized_child_t<E>(memoize<Level>(e));
  else
    return memoize<Level>(e);
}

template <class Op, class... Cs>
struct memoizer<map_node<Op, Cs...>> {
  using M = memoized_t<map_node<Op, Cs...>>;
  template <int Level>
  static M run(map_node<Op, Cs...> const& e) {
    return std::apply([](auto const&... c) { return M(memoize_child<Level>(c)...); }, e.children);
  }
};
template <class V, class C>
struct memoizer<view_node<V, C>> {
  template <int Level>
  static memoized_t<view_node<V, C>> run(view_node<V, C> const& e) {
    return memoized_t<view_node<V, C>>(memoize_child<Level>(e.child), e.view);
  }
};
template <class C>
struct memoizer<reshape_node<C>> {
  template <int Level>
  static memoized_t<reshape_node<C>> run(reshape_node<C> const& e) {
    return memoized_t<reshape_node<C>>(memoize_child<Level>(e.child), e.shape());
  }
};
template <class Op, class C>
struct memoizer<reduce_node<Op, C>> {
  template <int Level>
  static memoized_t<reduce_node<Op, C>> run(reduce_node<Op, C> const& e) {
    return memo<Level>(
        reduce_node<Op, memoized_child_t<C>>(memoize_child<Level>(e.child), e.axes, e.keepdims));
  }
};
template <class A, class B>
struct memoizer<matmul_node<A, B>> {
  template <int Level>
  static memoized_t<matmul_node<A, B>> run(matmul_node<A, B> const& e) {
    return memo<Level>(matmul_node<memoized_child_t<A>, memoized_child_t<B>>(
        memoize_child<Level>(e.lhs()), memoize_child<Level>(e.rhs())));
  }
};
template <class Op, class E>
struct memoizer<softmax_node<Op, E>> {
  template <int Level>
  static memoized_t<softmax_node<Op, E>> run(softmax_node<Op, E> const& e) {
    return memo<Level>(
        softmax_node<Op, memoized_child_t<E>>(memoize_child<Level>(e.input()), int(e.axis)));
  }
};
template <class Op, class E>
struct memoizer<concat_node<Op, std::vector<E>>> {
  template <int Level>
  static memoized_t<concat_node<Op, std::vector<E>>> run(concat_node<Op, std::vector<E>> const& e) {
    std::vector<memoized_child_t<E>> parts;
    parts.reserve(e.parts.size());
    for (auto const& p : e.parts) parts.push_back(memoize_child<Level>(p));
    return memo<Level>(
        concat_node<Op, std::vector<memoized_child_t<E>>>(std::move(parts), int(e.axis)));
  }
};
template <class Op, class... Es>
struct memoizer<concat_node<Op, std::tuple<Es...>>> {
  template <int Level>
  static memoized_t<concat_node<Op, std::tuple<Es...>>> run(
      concat_node<Op, std::tuple<Es...>> const& e) {
    return memo<Level>(std::apply(
        [&](auto const&... p) {
          return concat_node<Op, std::tuple<memoized_child_t<Es>...>>(
              std::tuple<memoized_child_t<Es>...>(memoize_child<Level>(p)...), int(e.axis));
        },
        e.parts));
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
