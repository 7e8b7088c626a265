#pragma once
// The cotangents of a function's result, given as the pairs collect() returns
// (autodiff/collect.hpp), taken into the gradient's store: what backward() would do with a sink
// (autodiff/tape.hpp, fused_value.hpp), with every path's loop in one paths_loop
// (backend/cpu/group_paths.hpp) instead of a store loop, an addition and a joined sum compiled
// per path. A path that sums to its leaf's shape is stored whole by that loop and summed after
// it. Where a path cannot join the loop (a leaf on a device, a layout that is not one row: an
// operand broadcast or read transposed) it is computed apart by a loop of its own, and added as
// an array (the addition compiled once per element type). Results are bitwise those of the sink:
// the same loops compute the same paths and add them to a buffer in the same order.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../backend/cpu/group_paths.hpp"
#include "collect.hpp"
#include "fused_value.hpp"
#include "tape.hpp"

namespace zenith::autodiff {

namespace detail {
// What a path's loop computes: the cotangent, or what its sum_to sums when it sums nothing.
template <class G>
struct path_expr {
  using type = G;
};
template <class C>
struct path_expr<sum_to_node<C>> {
  using type = C;
};
template <class P>
using path_store_t =
    zenith::detail::path_store<value_t<typename P::leaf_type>,
                               typename path_expr<typename P::cotangent_type>::type>;
template <class L>
struct paths_loop_for;
template <class... Ps>
struct paths_loop_for<path_list<Ps...>> {
  using type = zenith::detail::paths_loop<path_store_t<Ps>...>;
};

// Whether a path's cotangent type can be computed by the paths loop at all.
template <class G>
inline constexpr bool loop_path_v = !is_array_v<G> && !barrier_expression<G>;
template <class C>
inline constexpr bool loop_path_v<sum_to_node<C>> = !is_array_v<C> && !barrier_expression<C>;

// ct as an array for leaf, computed on its own: on the leaf's device where it is on one.
template <element T, class G>
array<T> path_apart(array<T> const& leaf, G const& ct) {
  if constexpr (std::is_same_v<G, array<T>>) {
    return ct;
  } else {
    if (device d = leaf.device(); d != cpu) return zenith::detail::evaluate_on<T>(d, ct);
    return zenith::detail::evaluate_fresh<T>(ct);
  }
}
// Whether the sink's held total took ct into its loop (value_fusing_sink::join); a sink that
// holds none takes nothing.
template <class Sink, class Leaf, class G>
bool join(Sink& sink, Leaf const& leaf, G const& ct) {
  if constexpr (requires { sink.join(leaf, ct); })
    return sink.join(leaf, ct);
  else
    return false;
}
}  // namespace detail

// Takes every path into cts. sink: cts itself, or a value_fusing_sink whose held total may share
// its loop with the first path (as the first cotangent the sink would get).
template <class Sink, class S>
void take_paths(cotangents& cts, Sink& sink, S&& paths) {
  if constexpr (path_count_v<S> == 0) return;
  if (zenith::detail::active_trace()) {
    // An outer transform traces this pass: each cotangent is recorded where it is computed.
    auto one = [&](auto, auto const& p) {
      using T = value_t<std::remove_cvref_t<decltype(*p.leaf)>>;
      if (!cts.accepts(p.leaf->storage().get())) return;
      cts.template add_nested<1>(*p.leaf, zenith::detail::reads_traced(p.ct)
                                              ? zenith::detail::record_materialization<T, 1>(p.ct)
                                              : detail::path_apart(*p.leaf, p.ct));
    };
    visit_paths(paths, one);
    return;
  }
  using M = typename detail::paths_loop_for<flat_t<S>>::type;
  decltype(cts.template make_loop<M>()) loop(nullptr, {});  // made when a path first needs it
  auto submit = [&] {
    if (!loop || loop->empty()) return;
    std::int64_t n = loop->size();
    cts.submit(std::move(loop), n);
  };
  auto one = [&]<std::size_t I, class P>(std::integral_constant<std::size_t, I>, P& p) {
    using T = value_t<typename P::leaf_type>;
    using G = typename P::cotangent_type;
    auto const& leaf = *p.leaf;
    buffer const* b = leaf.storage().get();
    if (!cts.accepts(b)) return;
    if constexpr (I == 0)
      if (detail::join(sink, leaf, p.ct)) return;
    if constexpr (detail::loop_path_v<G>) {
      // The expression the loop computes, and whether it is summed to the leaf's shape after.
      auto& x = [&]() -> auto& {
        if constexpr (is_sum_to_node_v<G>)
          return p.ct.child;
        else
          return p.ct;
      }
      ();
      bool sums = false;
      if constexpr (is_sum_to_node_v<G>) sums = p.ct.reduces();
      if (leaf.device() == cpu && !zenith::detail::on_a_device(x)) {
        zenith::shape const xs = x.shape();  // x is moved into the loop when taken
        if (!loop) loop = cts.template make_loop<M>();
        bool taken = loop->template take<I>(x);
        if (!taken && !loop->empty() && std::int64_t(xs.numel()) != loop->size()) {
          submit();  // another size: a loop of its own, after this one
          loop = cts.template make_loop<M>();
          taken = loop->template take<I>(x);
        }
        if (taken && (sums || cts.template has_deferred<T>(b))) {
          // Stored whole, then summed as an array once the group has run (and added in turn
          // after the leaf's other deferred ones).
          auto full = array<T>::empty(xs);
          loop->template set_output<I>(full.data(), false);
          cts.defer_add(leaf, std::move(full),
                        sums ? std::optional<zenith::shape>(p.ct.shape()) : std::nullopt);
          return;
        }
        if (taken) {
          if (auto d = cts.template claim<T>(b, xs, M::template can_accumulate<I>)) {
            loop->template set_output<I>(d->first, d->second);
            return;
          }
          loop->template drop<I>(x);
        }
      }
    }
    // Apart: after the loop so far, which may write this buffer.
    submit();
    cts.add_array(leaf, detail::path_apart(leaf, p.ct));
  };
  visit_paths(paths, one);
  submit();
}

}  // namespace zenith::autodiff
