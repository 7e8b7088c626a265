#pragma once
// Lowering an expression for a device kernel: every node that is not elementwise is replaced by
// its value, computed on the device first. What remains (arrays, numbers, elementwise ops,
// views) is what a generated elementwise kernel computes in one pass, and make_device_plan
// records it as data (device_plan.hpp) as it goes.
//
//   exp(x - max(x, 1, true))  ->  exp(x - m), with m = max(x, 1, true) run as a reduction kernel
//   memo_node (a barrier the reverse pass already evaluated)  ->  its value
//
// Each node type of the layers below that is not elementwise says how its value is computed with
// a specialization of lowering<E> (a static lower(device, e)); a barrier's lowering reads its
// operands through value_on_device, array_on_device or evaluate_on_device. The nodes of the
// layers above (the autodiff layer's) never specialize it: they expose one of four
// members, which the lowerings under "Nodes of the layers above" read. A node with none of these
// has no device implementation: evaluating it on a device is a device_error that names it, never
// host code reading device memory.
#include <array>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/apply.hpp"
#include "../../core/array.hpp"
#include "../../core/creation.hpp"
#include "../../expr/node.hpp"
#include "../../expr/reduce.hpp"
#include "../../expr/reshape.hpp"
#include "../../expr/views.hpp"
#include "device_plan.hpp"
#include "reduce_kernel.hpp"

namespace zenith::cuda_backend {

template <class E>
struct lowering;  // static array<value_t<E>> lower(device d, E const& e): e's value, computed on d

// Nodes of the layers above. Each exposes what its value is, in terms a backend already knows:
//   e.decomposed()   the same value as an expression of the nodes below (a node that only wraps
//                    its child; a barrier whose value was computed);
//   e.summed_axes()  e.child summed over those axes (kept as 1), viewed as e.shape();
//   e.once(f)        a value its readers share, computed as f(e.child) by the first of them;
//   e.placement()    zeros of e.shape() with e.child written at that window of the buffer.
template <class E>
using decomposed_t = std::remove_cvref_t<decltype(std::declval<E const&>().decomposed())>;
template <class E>
using child_t = std::remove_cvref_t<decltype(std::declval<E const&>().child)>;

// The node protocol (expr/node.hpp): a node's operands, as types (a vector of parts read as its
// element type).
template <class X>
struct operand_type {
  using type = X;
};
template <class X>
struct operand_type<std::vector<X>> {
  using type = X;
};
template <class E>
struct operand_types {};
template <class E>
requires requires(E const& e) { e.operands(); }
struct operand_types<E> {
  template <class... Xs>
  static auto of(std::tuple<Xs...> const*)
      -> std::tuple<typename operand_type<std::remove_cvref_t<Xs>>::type...>;
  using type = decltype(of(static_cast<decltype(std::declval<E const&>().operands()) const*>(0)));
};

namespace detail {

template <class E>
constexpr bool lowerable_v();
template <class Tuple>
inline constexpr bool all_lowerable = false;
template <class... Xs>
inline constexpr bool all_lowerable<std::tuple<Xs...>> = (lowerable_v<Xs>() && ...);

template <class E>
constexpr bool lowerable_v() {
  if constexpr (is_array_v<E> || is_scalar_node_v<E>)
    return true;
  else if constexpr (is_map_node_v<E> || is_view_node_v<E>)
    return all_lowerable<typename operand_types<E>::type>;
  else if constexpr (requires { typename decomposed_t<E>; })
    return lowerable_v<decomposed_t<E>>();
  else
    return requires { sizeof(lowering<E>); };
}

}  // namespace detail

// Whether e runs on a device: arrays, numbers, elementwise ops and views over what runs there
// (one kernel computes them), and nodes with a lowering (barriers, reductions, reshapes, the
// layers above's nodes) whose operands run there. A check of types alone: it instantiates no
// lowering.
template <class E>
concept lowerable = detail::lowerable_v<std::remove_cvref_t<E>>();

// Defined by launch.hpp: out (T) = e on device d (evaluate_on_device); e written into a strided
// slice at out (run_into_on_device). A node's lowering evaluates what it needs with these, on d,
// even where that reads no array (a cotangent seed is a broadcast number).
template <element T, expression E>
array<T> evaluate_on_device(device d, E const& e);
template <element T, expression E>
void run_into_on_device(device d, T* out, std::array<std::int64_t, max_rank> const& stride,
                        zenith::shape const& s, E const& e);

// Whether e's value is an array without an elementwise kernel: an array, or a node whose
// lowering computes it (a barrier, a reduction, a reshape, a node of the layers above), or one
// that decomposes to such.
template <class E>
constexpr bool has_value_on_device() {
  if constexpr (is_array_v<E>)
    return true;
  else if constexpr (is_map_node_v<E> || is_view_node_v<E> || is_scalar_node_v<E>)
    return false;
  else if constexpr (requires { typename decomposed_t<E>; })
    return has_value_on_device<decomposed_t<E>>();
  else
    return lowerable<E>;
}

// That value, on d.
template <class E>
requires(has_value_on_device<E>()) array<value_t<E>> value_on_device(device d, E const& e) {
  if constexpr (is_array_v<E>)
    return e;
  else if constexpr (requires { typename decomposed_t<E>; })
    return value_on_device(d, e.decomposed());
  else
    return lowering<E>::lower(d, e);
}

// e as an array of T on d: its value where it has one of type T (an array read as it is),
// else computed. What a node that reads its operand as a contiguous array starts from.
template <element T, class E>
array<T> array_on_device(device d, E const& e) {
  if constexpr (has_value_on_device<E>() && std::is_same_v<value_t<E>, T>)
    return value_on_device(d, e);
  else
    return evaluate_on_device<T>(d, e);
}

// e computed on d, summed over axes (kept as 1) and viewed as shape s: what the reverse pass's
// sums to a broadcast shape (sum_to_node, fold_to_node) lower to.
template <element T, expression E>
array<T> summed_on_device(device d, E const& e, std::vector<int> const& axes,
                          zenith::shape const& s) {
  array<T> r = evaluate_on_device<T>(d, e);
  if (!axes.empty()) r = evaluate_on_device<T>(d, sum(r, axes, true));
  return array<T>::from_buffer(r.storage(), r.data(), s);
}

// A reshape reads its child as a contiguous array: the child computed first where it is not one.
template <class C>
requires lowerable<C>
struct lowering<reshape_node<C>> {
  static auto lower(device d, reshape_node<C> const& e) {
    using T = value_t<C>;
    array<T> a = array_on_device<T>(d, e.child);
    return array<T>::from_buffer(a.storage(), a.data(), e.shape());
  }
};

// A reduction inside a larger expression: run as its own kernel first (reduce_kernel.hpp), its
// child fused in.
template <class Op, class C>
requires(device_reduction<Op>&& lowerable<C>) struct lowering<reduce_node<Op, C>> {
  static auto lower(device d, reduce_node<Op, C> const& e) {
    return evaluate_on_device<value_t<reduce_node<Op, C>>>(d, e);
  }
};

// A node of the layers above that reads its child through one of the last three.
template <class E>
concept reads_child = requires(E const& e, array<value_t<E>> (*f)(child_t<E> const&)) {
  requires(
      requires { e.summed_axes(); } || requires { e.once(f); } || requires { e.placement(); });
};

template <class E>
requires(reads_child<E>&& requires(E const& e) { e.summed_axes(); } &&
         lowerable<child_t<E>>) struct lowering<E> {
  static array<value_t<E>> lower(device d, E const& e) {
    return summed_on_device<value_t<E>>(d, e.child, e.summed_axes(), e.shape());
  }
};

template <class E>
requires(reads_child<E>&& requires(E const& e, array<value_t<E>> (*f)(child_t<E> const&)) {
  e.once(f);
} && lowerable<child_t<E>>) struct lowering<E> {
  static array<value_t<E>> lower(device d, E const& e) {
    return e.once([d](child_t<E> const& c) { return evaluate_on_device<value_t<E>>(d, c); });
  }
};

// The window is written by one strided kernel; zeros only where it leaves gaps.
template <class E>
requires(reads_child<E>&& requires(E const& e) { e.placement(); } &&
         lowerable<child_t<E>>) struct lowering<E> {
  static array<value_t<E>> lower(device d, E const& e) {
    using T = value_t<E>;
    zenith::shape in = e.shape(), part = e.child.shape();
    auto out = part == in ? array<T>::empty(in, d) : zeros<T>(in, d);
    if (part.numel() == 0) return out;
    placement w = e.placement();
    run_into_on_device<T>(d, out.data() + w.offset, w.stride, part, e.child);
    return out;
  }
};

namespace detail {

template <class E>
constexpr std::string_view name_of() {
  if constexpr (requires { E::name; })
    return E::name;
  else if constexpr (requires { E::op_type::name; })
    return E::op_type::name;
  else
    return "an operation";
}

// The name of the first node in E (depth first) with no device implementation, for errors.
template <class E>
constexpr std::string_view off_device_name();
template <class E>
struct off_device {
  // A node of the layers above names what it reads that has no device implementation.
  static constexpr std::string_view name = [] {
    if constexpr (requires { typename decomposed_t<E>; })
      return off_device_name<decomposed_t<E>>();
    else if constexpr (reads_child<E>)
      return off_device_name<child_t<E>>();
    else
      return name_of<E>();
  }();
};
template <class E>
constexpr std::string_view off_device_name() {
  if constexpr (lowerable<E>)
    return {};
  else
    return off_device<E>::name;
}
// A node with operands: the first operand that has no device implementation, else the node.
template <class E>
requires requires { typename operand_types<E>::type; }
struct off_device<E> {
  static constexpr std::string_view name = [] {
    std::string_view r = []<class... Xs>(std::tuple<Xs...> const*) {
      std::string_view first;
      ((first = first.empty() ? off_device_name<Xs>() : first), ...);
      return first;
    }(static_cast<typename operand_types<E>::type const*>(nullptr));
    return r.empty() ? name_of<E>() : r;
  }();
};

[[noreturn]] inline void leaf_elsewhere(device d, device where, zenith::shape const& s) {
  throw device_error("zenith: a kernel on " + d.str() + " reads an array of shape " + s.str() +
                     " on " + where.str() + "; bring it to " + d.str() + " with .to(" + d.str() +
                     ")");
}

// A read of array a; with keep, a value computed for the plan, which the plan keeps alive.
// Per element type, out of line: every expression's walk calls it.
template <element T>
[[gnu::noinline]] void plan_leaf(device_plan& p, device d, array<T> const& a, bool keep) {
  if (a.storage() && a.storage()->where() != d) leaf_elsewhere(d, a.storage()->where(), a.shape());
  p.add_leaf(a.data(), a.shape());
  if (keep) p.keep(a.storage());
}

// Appends e (lowerable) to p: its elementwise part as steps, each node below it that is not
// elementwise computed on d first and read as a leaf (kept alive by p), in operand order.
template <class E>
void plan_into(device_plan& p, device d, E const& e) {
  if constexpr (is_array_v<E>) {
    plan_leaf(p, d, e, false);
  } else if constexpr (is_scalar_node_v<E>) {
    p.add_literal(e.value);
  } else if constexpr (is_map_node_v<E>) {
    zenith::shape s = e.shape();
    zenith::detail::apply(
        [&](auto const&... c) {
          // Each operand broadcast to the node's shape.
          auto one = [&](auto const& x) {
            std::size_t first = p.leaves();
            plan_into(p, d, x);
            p.broadcast(x.shape(), s, first);
          };
          (one(c), ...);
        },
        e.children);
    p.add_op(E::op_type::cuda, device_type<compute_t<value_t<E>>>(),
             std::tuple_size_v<decltype(e.children)>);
  } else if constexpr (is_view_node_v<E>) {
    std::size_t first = p.leaves();
    plan_into(p, d, e.child);
    p.apply(e.view.map(e.child.shape()), first);
  } else if constexpr (requires { e.decomposed(); }) {
    plan_into(p, d, e.decomposed());
  } else {
    // A reduction, a reshape, a barrier, a node of the layers above that computes its value.
    plan_leaf(p, d, value_on_device(d, e), true);
  }
}

}  // namespace detail

// The device plan of e (lowerable) for a kernel on device d: its barriers computed on d first.
template <class E>
device_plan make_device_plan(E const& e, device d) {
  static_assert(lowerable<std::remove_cvref_t<E>>,
                "zenith CUDA: a kernel reads a lowerable expression (backend/cuda/lower.hpp)");
  device_plan p;
  detail::plan_into(p, d, e);
  return p;
}

}  // namespace zenith::cuda_backend
