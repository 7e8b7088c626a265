#pragma once
// A loss and its gradient in one pass: the sum in value_and_grad(-0.5 * sum(square(x - mu)) / s2)
// and x's cotangent -(x - mu) / s2 read the same x, so one loop computes both, in the same SIMD
// iteration (backend/cpu/group_total.hpp, reduce_loop with a store_part), instead of two loops of
// the gradient's group each reading x.
//
// The two come from different frames: memoize queues the sum (autodiff/memoize.hpp) before the
// reverse pass exists, and the cotangent reaches its leaf deep in that pass. A shared loop needs
// both types in one place, so the type of the sum to hold back is found on the function's
// expression type alone (first_queued_total_t, which follows memoize's rules for queueing), and
// value_fusing_sink stands in both roles: memoize's queue, which holds that sum back instead of
// queueing it, and the reverse pass's sink, which gives the first cotangent that can share its
// loop to the held sum. A sum no cotangent took is queued alone at the end, as before.
#include <optional>
#include <type_traits>

#include "memoize.hpp"
#include "tape.hpp"

namespace zenith::autodiff {

// The sum or mean (Op) of all of a C, as value type T: what memoize may queue.
template <class Op, class T, class C>
struct total_target {
  using op = Op;
  using value_type = T;
  using child = C;
};

// The first total that memoize(E, queue) hands its queue, in type order (void: none). The queue
// goes down only through elementwise nodes, to children whose value no rule reads.
template <class E>
struct first_queued_total {
  using type = void;
};
template <class E>
using first_queued_total_t = typename first_queued_total<std::remove_cvref_t<E>>::type;

template <class Op, class C>
requires memoizer<reduce_node<Op, C>>::queueable struct first_queued_total<reduce_node<Op, C>> {
  using P = reduce_node<Op, C>;
  using type = total_target<Op, value_t<P>, memoized_child_t<P, C>>;
};

template <class P, class C>
using queued_below_t =
    std::conditional_t<kept_in_v<P, C> || parent_reads_v<P, C>, void, first_queued_total_t<C>>;

template <class Op, class... Cs>
struct first_queued_total<map_node<Op, Cs...>> {
  template <class A, class B>
  using first_of = std::conditional_t<std::is_void_v<A>, B, A>;
  template <class... Ts>
  struct fold {
    using type = void;
  };
  template <class T, class... Ts>
  struct fold<T, Ts...> {
    using type = first_of<T, typename fold<Ts...>::type>;
  };
  using type = typename fold<queued_below_t<map_node<Op, Cs...>, Cs>...>::type;
};

template <class Target>
class value_fusing_sink;

// Both roles for Target = total_target<Op, T, E>.
template <class Op, class T, class E>
class value_fusing_sink<total_target<Op, T, E>> {
 public:
  explicit value_fusing_sink(cotangents& cts) : cts_(cts) {}

  // As memoize's queue: the first total of type E is held back, its value allocated and filled
  // when the cotangents are flushed; any other goes to cts.
  template <class Op2, element T2, expression E2>
  std::optional<array<T2>> queue_total(E2 const& e, zenith::shape const& s) {
    if constexpr (std::is_same_v<Op2, Op> && std::is_same_v<T2, T> && std::is_same_v<E2, E>) {
      if (!held_ && s.numel() == 1 && e.shape().numel() > 0 && !zenith::detail::on_a_device(e)) {
        held_.emplace(e);
        value_ = array<T>::empty(s);
        return value_;
      }
    }
    return cts_.template queue_total<Op2, T2>(e, s);
  }

  // As the reverse pass's sink: a cotangent that can share the held total's loop takes it.
  template <class Leaf, class G>
  void operator()(Leaf const& leaf, G const& ct) {
    if (!join(leaf, ct)) cts_(leaf, ct);
  }

  // Whether ct took the held total's loop (or was taken apart trying): then it is done.
  template <class Leaf, class G>
  bool join(Leaf const& leaf, G const& ct) {
    if (!held_) return false;
    switch (cts_.template add_with_total<Op>(leaf, ct, *held_, value_)) {
      case cotangents::joined::with_total:
        held_.reset();
        return true;
      case cotangents::joined::apart:
        return true;
      case cotangents::joined::no:
        break;
    }
    return false;
  }

  // After the reverse pass: a total that no cotangent took joins the group alone, or, where it
  // cannot, is computed now.
  void finish() {
    if (!held_) return;
    if (!cts_.template queue_total_into<Op>(*held_, value_)) {
      // Into value_'s buffer, which memoize's node holds.
      std::uint32_t all = (std::uint32_t(1) << held_->shape().size()) - 1;
      zenith::detail::red::reduce_into<Op>(value_, *held_, all);
    }
    held_.reset();
  }

 private:
  // memoize hands every sum to queue_total before the reverse pass starts: at most one is held.
  cotangents& cts_;
  std::optional<E> held_;
  array<T> value_;
};

}  // namespace zenith::autodiff
