#pragma once
// The static reverse pass as data: collect(e, ct) returns, as nested aggregates, every (leaf,
// cotangent) pair that backward(e, ct, sink) (backward.hpp) would hand its sink, in the same order
// and with the same types. The gradient of a function's result then knows all its cotangents in one
// place, and computes them in one loop of the gradient's group (backend/cpu/group_paths.hpp)
// instead of compiling a loop, a joined sum and the sink's set-up for each path on its own.
//
// It covers the nodes whose rule only builds expressions (elementwise ops, sums and means,
// views, the reverse pass's own sharing nodes); collects_v<E> says whether every node of E is
// one. Any other node (a barrier, which evaluates its cotangent first; max, prod, slices) keeps
// the sink.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backward.hpp"

namespace zenith::autodiff {

// One pair: the leaf (inside the expression collected, which outlives the pair) and its
// cotangent.
template <class Leaf, class G>
struct path {
  using leaf_type = Leaf;
  using cotangent_type = G;
  Leaf const* leaf;
  G ct;
};

// The pairs, in order: a path, or a seq of the pairs of a node's children (seq_end: none). Nested
// aggregates rather than one flat tuple, so that a cotangent is built in its place and never
// moved again on the way up; flat_t lists their types, visit_paths walks them with their index.
struct seq_end {};
template <class H, class T>
struct seq {
  H head;
  T tail;
};

inline seq_end make_seq() { return {}; }
// The results of the thunks fs, called in order, each built in its place.
template <class F, class... Fs>
auto make_seq(F&& f, Fs&&... fs) {
  return seq<decltype(f()), decltype(make_seq(fs...))>{f(), make_seq(fs...)};
}

template <class... Ps>
struct path_list {};

namespace detail {
template <class A, class B>
struct concat_paths;
template <class... A, class... B>
struct concat_paths<path_list<A...>, path_list<B...>> {
  using type = path_list<A..., B...>;
};
template <class S>
struct flat {
  using type = path_list<S>;
};
template <>
struct flat<seq_end> {
  using type = path_list<>;
};
template <class H, class T>
struct flat<seq<H, T>> {
  using type = typename concat_paths<typename flat<H>::type, typename flat<T>::type>::type;
};
template <class L>
inline constexpr std::size_t list_size_v = 0;
template <class... Ps>
inline constexpr std::size_t list_size_v<path_list<Ps...>> = sizeof...(Ps);
}  // namespace detail

// The path types of S, in order, as a path_list.
template <class S>
using flat_t = typename detail::flat<std::remove_cvref_t<S>>::type;
template <class S>
inline constexpr std::size_t path_count_v = detail::list_size_v<flat_t<S>>;

// f(std::integral_constant<std::size_t, I>{}, path) for each path of s, I its index in flat_t.
template <std::size_t At = 0, class S, class F>
void visit_paths(S& s, F&& f) {
  using Sv = std::remove_cvref_t<S>;
  if constexpr (std::is_same_v<Sv, seq_end>) {
  } else if constexpr (requires { s.head; }) {
    visit_paths<At>(s.head, f);
    visit_paths<At + path_count_v<decltype(s.head)>>(s.tail, f);
  } else {
    f(std::integral_constant<std::size_t, At>{}, s);
  }
}

template <class E>
inline constexpr bool collectible_v = false;

// Whether collect() covers every node of E.
template <class E>
inline constexpr bool collects_v =
    std::remove_cvref_t<E>::fixed || collectible_v<std::remove_cvref_t<E>>;

template <element T>
inline constexpr bool collectible_v<array<T>> = true;
template <class T>
inline constexpr bool collectible_v<scalar_node<T>> = true;
template <class Op, class... Cs>
inline constexpr bool collectible_v<map_node<Op, Cs...>> = (collects_v<Cs> && ...);
template <class C>
inline constexpr bool collectible_v<reduce_node<ops::reduce_sum, C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<reduce_node<ops::reduce_mean, C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<memo_node<reduce_node<ops::reduce_sum, C>>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<memo_node<reduce_node<ops::reduce_mean, C>>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<view_node<views::transpose, C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<view_node<views::broadcast_to, C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<view_node<views::expand_dims, C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<view_node<views::squeeze, C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<reshape_node<C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<shared_node<C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<shared_ref<C>> = collects_v<C>;
template <class C>
inline constexpr bool collectible_v<reuse_node<C>> = collects_v<C>;

// collect_rule<E>::run(e, ct): the pairs of node type E, as reverse<E>::run would send them.
template <class E>
struct collect_rule;

template <class E, class G>
auto collect(E const& e, G&& ct) {
  using Gv = std::remove_cvref_t<G>;
  if constexpr (E::fixed)
    return seq_end{};
  else if constexpr (uniform_v<Gv> && !folded_uniform_v<Gv>)
    return collect_rule<E>::run(e, fold_uniform(ct));
  else
    return collect_rule<E>::run(e, std::forward<G>(ct));
}

template <element T>
struct collect_rule<array<T>> {
  template <class G>
  static auto run(array<T> const& a, G&& ct) {
    if constexpr (floating_element<T>)
      return path<array<T>, std::remove_cvref_t<G>>{&a, std::forward<G>(ct)};
    else
      return seq_end{};
  }
};
template <class T>
struct collect_rule<scalar_node<T>> {
  template <class G>
  static seq_end run(scalar_node<T> const&, G const&) {
    return {};
  }
};

template <class Op, class... Cs>
struct collect_rule<map_node<Op, Cs...>> {
  using R = reverse<map_node<Op, Cs...>>;

  template <class G>
  static auto run(map_node<Op, Cs...> const& e, G&& ct) {
    return run_as(e, e, std::forward<G>(ct));
  }
  // As R::run_as: y stands for e's value in the partials.
  template <class Y, class G>
  static auto run_as(Y const& y, map_node<Op, Cs...> const& e, G&& ct) {
    using Gv = std::remove_cvref_t<G>;
    if constexpr (piecewise_constant_op<Op>())
      return seq_end{};
    else if constexpr (R::takers >= 2 && costly_v<Gv> && std::is_floating_point_v<value_t<Gv>>)
      return each(y, e, reuse_node<Gv>(std::forward<G>(ct)));
    else if constexpr (R::takers >= 2 && tree_copy_v<Gv>)
      return each(y, e, shared_ref<Gv>(std::forward<G>(ct)));
    else
      return each(y, e, std::forward<G>(ct));
  }

 private:
  template <class Y, class G>
  static auto each(Y const& y, map_node<Op, Cs...> const& e, G&& ct) {
    auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      if constexpr (R::template takes_cotangent<J>) {
        auto const& c = zenith::get<J>(e.children);
        auto local = zenith::detail::apply(
            [&](auto const&... xs) { return Op::template partial<J>(y, xs...); }, e.children);
        if constexpr (J == R::last_taker)
          return collect(c, detail::to_child(c, std::forward<G>(ct) * std::move(local)));
        else
          return collect(c, detail::to_child(c, ct * std::move(local)));
      } else {
        return seq_end{};
      }
    };
    // The children's pairs are built in operand order, as the sink is called.
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return make_seq([&] { return one(std::integral_constant<std::size_t, I>{}); }...);
    }
    (std::index_sequence_for<Cs...>{});
  }
};

template <class Op, class C>
requires(std::is_same_v<Op, ops::reduce_sum> ||
         std::is_same_v<Op, ops::reduce_mean>) struct collect_rule<reduce_node<Op, C>> {
  template <class G>
  static auto run(reduce_node<Op, C> const& e, G&& ct) {
    if constexpr (!detail::differentiable_v<C>)
      return seq_end{};
    else if constexpr (std::is_same_v<Op, ops::reduce_sum>)
      return collect(e.child,
                     zenith::detail::convert<value_t<C>>(detail::spread(e, std::forward<G>(ct))));
    else
      return collect(e.child, zenith::detail::convert<value_t<C>>(
                                  detail::spread(e, std::forward<G>(ct)) / double(e.count())));
  }
};
template <class B>
struct collect_rule<memo_node<B>> {
  template <class G>
  static auto run(memo_node<B> const& e, G&& ct) {
    return collect(e.node, std::forward<G>(ct));
  }
};

template <class C>
struct collect_rule<shared_node<C>> {
  template <class G>
  static auto run(shared_node<C> const& e, G&& ct) {
    return collect(e.child, std::forward<G>(ct));
  }
};
template <class C>
struct collect_rule<shared_ref<C>> {
  template <class G>
  static auto run(shared_ref<C> const& e, G&& ct) {
    return collect(e.child(), std::forward<G>(ct));
  }
};
template <class C>
struct collect_rule<reuse_node<C>> {
  template <class G>
  static auto run(reuse_node<C> const& e, G&& ct) {
    if constexpr (detail::elementwise_node_v<C>)
      return collect_rule<C>::run_as(e, e.child(), std::forward<G>(ct));
    else
      return collect(e.child(), std::forward<G>(ct));
  }
};

template <class C>
struct collect_rule<view_node<views::transpose, C>> {
  template <class G>
  static auto run(view_node<views::transpose, C> const& e, G&& ct) {
    std::size_t r = e.shape().size();
    std::vector<int> inverse(r);
    for (std::size_t k = 0; k < r; ++k) inverse[e.view.perm[k]] = int(k);
    return collect(e.child, transpose(std::forward<G>(ct), inverse));
  }
};
template <class C>
struct collect_rule<view_node<views::broadcast_to, C>> {
  template <class G>
  static auto run(view_node<views::broadcast_to, C> const& e, G&& ct) {
    return collect(e.child, sum_to(std::forward<G>(ct), e.child.shape()));
  }
};
template <class V, class C>
requires(std::is_same_v<V, views::expand_dims> ||
         std::is_same_v<V, views::squeeze>) struct collect_rule<view_node<V, C>> {
  template <class G>
  static auto run(view_node<V, C> const& e, G&& ct) {
    return collect(e.child, reshape(std::forward<G>(ct), e.child.shape()));
  }
};
template <class C>
struct collect_rule<reshape_node<C>> {
  template <class G>
  static auto run(reshape_node<C> const& e, G&& ct) {
    return collect(e.child, reshape(std::forward<G>(ct), e.child.shape()));
  }
};

}  // namespace zenith::autodiff
