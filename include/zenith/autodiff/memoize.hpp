#pragma once
// memoize(e): the same expression with every barrier (reduction, matmul, softmax, concatenate)
// evaluated once and held as memo_node. The reverse pass reads a node's value in its rules
// (tanh's derivative is 1 - y * y, with y the node itself; softmax's reads its output); without
// this, each such read would evaluate the barriers below it again, a GEMM per read. The rebuilt
// expression keeps every node type's structure, so the reverse rules still see the barrier and its
// children.
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

namespace zenith {

// A barrier B and its value, evaluated once.
template <expression B>
struct memo_node : expr_base {
  using value_type = value_t<B>;
  static constexpr bool fixed = false;

  B node;
  array<value_type> value;

  explicit memo_node(B b) : node(std::move(b)), value(eval_barrier(node)) {}
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

// The structure-preserving rebuild, one specialization per node kind; anything else (leaves,
// and nodes with no reverse rule) is kept as it is.
template <class E>
struct memoizer {
  static E const& run(E const& e) { return e; }
};

template <class E>
decltype(auto) memoize(E const& e) {
  return memoizer<E>::run(e);
}
template <class E>
using memoized_t = std::remove_cvref_t<decltype(memoize(std::declval<E const&>()))>;

// The value of a memoized expression: a barrier at the root is already evaluated.
template <class M>
array<value_t<M>> memoized_value(M const& m) {
  if constexpr (requires { m.value; })
    return m.value;
  else
    return zenith::detail::evaluate_untraced<value_t<M>>(m);
}

template <class Op, class... Cs>
struct memoizer<map_node<Op, Cs...>> {
  static auto run(map_node<Op, Cs...> const& e) {
    return std::apply(
        [](auto const&... c) { return map_node<Op, memoized_t<Cs>...>(memoize(c)...); },
        e.children);
  }
};
template <class V, class C>
struct memoizer<view_node<V, C>> {
  static auto run(view_node<V, C> const& e) {
    return view_node<V, memoized_t<C>>(memoize(e.child), e.view);
  }
};
template <class C>
struct memoizer<reshape_node<C>> {
  static auto run(reshape_node<C> const& e) {
    return reshape_node<memoized_t<C>>(memoize(e.child), e.shape());
  }
};
template <class Op, class C>
struct memoizer<reduce_node<Op, C>> {
  static auto run(reduce_node<Op, C> const& e) {
    return memo_node(reduce_node<Op, memoized_t<C>>(memoize(e.child), e.axes, e.keepdims));
  }
};
template <class A, class B>
struct memoizer<matmul_node<A, B>> {
  static auto run(matmul_node<A, B> const& e) {
    return memo_node(matmul_node<memoized_t<A>, memoized_t<B>>(memoize(e.lhs()), memoize(e.rhs())));
  }
};

template <class Op, class E>
struct memoizer<softmax_node<Op, E>> {
  static auto run(softmax_node<Op, E> const& e) {
    return memo_node(softmax_node<Op, memoized_t<E>>(memoize(e.input()), int(e.axis)));
  }
};
template <class Op, class E>
struct memoizer<concat_node<Op, std::vector<E>>> {
  static auto run(concat_node<Op, std::vector<E>> const& e) {
    std::vector<memoized_t<E>> parts;
    parts.reserve(e.parts.size());
    for (auto const& p : e.parts) parts.push_back(memoize(p));
    return memo_node(concat_node<Op, std::vector<memoized_t<E>>>(std::move(parts), int(e.axis)));
  }
};
template <class Op, class... Es>
struct memoizer<concat_node<Op, std::tuple<Es...>>> {
  static auto run(concat_node<Op, std::tuple<Es...>> const& e) {
    return memo_node(std::apply(
        [&](auto const&... p) {
          return concat_node<Op, std::tuple<memoized_t<Es>...>>(
              std::tuple<memoized_t<Es>...>(memoize(p)...), int(e.axis));
        },
        e.parts));
  }
};

}  // namespace autodiff
}  // namespace zenith
