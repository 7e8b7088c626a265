#pragma once
// custom_vjp: a function with a reverse-mode rule supplied by the user.
//
//   auto softplus = zn::custom_vjp(
//       [](auto const& x) { return zn::log1p(zn::exp(x)); },                        // f
//       [](zn::array<double> const& x) { return std::pair{zn::eval(zn::log1p(zn::exp(x))), x}; },
//       [](zn::array<double> const& x, zn::array<double> const& ct) {               // bwd
//         return std::make_tuple(zn::sigmoid(x) * ct);
//       });
//   zn::array<double> y = softplus(x);
//
// Outside a trace (or when none of its arguments is traced) the function is f, evaluated to an
// array. Under grad or vjp, fwd(args...) runs instead and returns {output, residuals}; the output
// gets a traced buffer of its own and one tape entry, whose pull takes the output's cotangent
// and calls bwd(residuals, ct). bwd returns a std::tuple with one cotangent per argument, in the
// argument's structure (an expression of its shape for an array argument, the same tree type
// for a tree; anything, ignored, for a non-differentiable argument). The cotangents go to the
// arguments through the reverse pass's sink, so they add up with every other use of the
// arguments.
//
// fwd runs with nothing traced but arrays it closes over: one of those read by fwd (whose
// gradient the rule would silently drop) is an error; pass it as an argument instead. Under jvp a
// custom_vjp function is an error too: it has no forward-mode rule.
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/ir_tape.hpp"
#include "../autodiff/tape.hpp"
#include "../core/apply.hpp"
#include "../core/trace.hpp"
#include "../core/tree.hpp"
#include "../expr/fixed_ops.hpp"  // tensor_of_t, shape_of_t
#include "../expr/staged.hpp"

namespace zenith {

namespace detail {

// An argument as custom_vjp and checkpoint keep it: an array expression that is not an array is
// evaluated (recorded on the tape when it reads a traced array, like any materialization);
// arrays, trees and anything else are taken as given.
template <class A>
decltype(auto) stored_arg(A const& a) {
  if constexpr (expression<A> && !is_array_v<A> && !fixed_expression<A>)
    return evaluate_as<value_t<A>>(a);
  else
    return (a);
}
template <class A>
using stored_arg_t = std::remove_cvref_t<decltype(stored_arg(std::declval<A const&>()))>;

// Calls f on every array of a, when a is a tree of arrays.
template <class A, class F>
void for_each_arg_leaf(A const& a, F&& f) {
  if constexpr (tree_node<A>::known) for_each_leaf(a, f);
}

template <class... A>
bool any_arg_traced(trace_state const& st, A const&... args) {
  bool hit = false;
  (for_each_arg_leaf(args, [&](auto const& l) { hit = hit || st.reads_traced(l.storage().get()); }),
   ...);
  return hit;
}

// Swaps the trace's tape with an empty one for its lifetime: what runs meanwhile records into a
// private sub-tape, handed over by release() (or dropped with the guard). The tape vector being
// pulled may be swapped away: std::vector::swap keeps its elements and iterators valid.
class sub_tape {
 public:
  explicit sub_tape(trace_state& st) : st_(&st) { st_->tape.swap(saved_); }
  ~sub_tape() { restore(); }
  sub_tape(sub_tape const&) = delete;
  sub_tape& operator=(sub_tape const&) = delete;

  std::vector<std::unique_ptr<tape_entry>> release() {
    restore();
    return std::move(saved_);
  }

 private:
  void restore() {
    if (!st_) return;
    st_->tape.swap(saved_);
    st_ = nullptr;
  }
  trace_state* st_;
  std::vector<std::unique_ptr<tape_entry>> saved_;
};

// Destroys recorded entries that will never be pulled, first unmarking their outputs (except
// keep) so that a buffer later allocated at a freed address is not taken for a traced one.
inline void drop_entries(trace_state& st, std::vector<std::unique_ptr<tape_entry>>& entries,
                         buffer const* keep = nullptr) {
  for (auto& e : entries) e->forget(st, keep);
  entries.clear();
}

// Sends bwd's cotangent ct for argument arg (the k-th) to the sink.
template <class A, class G>
void send_custom_cotangent(A const& arg, G const& ct, autodiff::cotangents& cts, std::size_t k) {
  using C = std::remove_cvref_t<G>;
  if constexpr (is_array_v<A>) {
    static_assert(expression<C> && !fixed_expression<C>,
                  "zenith::custom_vjp: bwd must return an array expression as the cotangent of "
                  "an array argument");
    if (ct.shape() != arg.shape())
      throw shape_error("custom_vjp: bwd returned a cotangent of shape " + ct.shape().str() +
                        " for argument " + std::to_string(k) + " of shape " + arg.shape().str());
    if constexpr (floating_element<value_t<A>>) cts(arg, convert<value_t<A>>(ct));
  } else if constexpr (tree_node<A>::known) {
    static_assert(std::is_same_v<C, A>,
                  "zenith::custom_vjp: bwd must return the cotangent of a tree argument as a "
                  "tree of the argument's type");
    std::vector<void const*> leaves;  // ct's leaves in order; same tree type, so same leaf types
    for_each_leaf(ct, [&](auto const& l) { leaves.push_back(&l); });
    std::size_t n = 0;
    for_each_leaf(arg, [&](auto const&) { ++n; });
    if (n != leaves.size())
      throw shape_error("custom_vjp: bwd returned a cotangent tree with " +
                        std::to_string(leaves.size()) + " arrays for argument " +
                        std::to_string(k) + ", which has " + std::to_string(n));
    std::size_t i = 0;
    for_each_leaf(arg, [&](auto const& a) {
      using L = std::remove_cvref_t<decltype(a)>;
      send_custom_cotangent(a, *static_cast<L const*>(leaves[i++]), cts, k);
    });
  }
  // Anything else is not differentiable: its cotangent is ignored.
}

// Under a recording (transforms/jit.hpp) the user's fwd and bwd become steps that call them
// again on a replay: they may run loops of their own, which no recording sees. The arrays they
// read and write are reached through raw pointers (pointers()), so a replay can move them.

// a's arrays made to read the memory at ps (in order) where they do not already: borrowed views.
template <class A>
void point_args_at(A& a, std::vector<void const*> const& ps, std::size_t& k) {
  if constexpr (tree_node<A>::known)
    for_each_leaf(a, [&](auto& l) {
      using L = std::remove_cvref_t<decltype(l)>;
      using V = value_t<L>;
      void const* p = ps[k++];
      if (p == l.data()) return;
      V* q = static_cast<V*>(const_cast<void*>(p));
      l = L::from_buffer(buffer::borrow(q, l.size() * sizeof(V)), q, l.shape());
    });
}

// v (of shape s) written into out, row-major: an array of T (always dense and row-major) by a
// plain copy, which on the few elements of a replayed rule costs a tenth of building and
// running a fused loop; anything else by the fused loop.
template <class T, class V>
void write_into(T* out, V const& v, zenith::shape const& s) {
  if constexpr (std::is_same_v<std::remove_cvref_t<V>, array<T>>) {
    if (v.data() != out) std::memmove(out, v.data(), v.size() * sizeof(T));
  } else {
    auto x = convert<T>(v);
    auto ev = make_evaluator(x);
    run_fused(dest_view<T>{out, row_major_strides(s)}, ev, s);
  }
}

// fwd(args...) as a step: its output is written into the recording's buffer out, its residuals
// are kept in `result` for the rule's step.
template <class T, class Fwd, class R, class... A>
struct custom_fwd_step {
  std::shared_ptr<Fwd const> fwd;
  std::tuple<A...> args;
  std::vector<void const*> reads;  // the arrays of args, in order
  T* out;
  zenith::shape shape;
  std::shared_ptr<std::optional<R>> result;

  void run() {
    std::size_t k = 0;
    zenith::detail::apply([&](auto&... a) { (point_args_at(a, reads, k), ...); }, args);
    result->emplace(zenith::detail::apply(*fwd, std::as_const(args)));
    auto const& value = std::get<0>(**result);
    if (value.shape() != shape)
      throw shape_error("custom_vjp: fwd returned an output of shape " + value.shape().str() +
                        " where it had returned " + shape.str());
    write_into(out, value, shape);
  }
  void pointers(pointer_list& l) {
    l.writes(out);
    for (auto& p : reads) l.reads(p);
  }
};

// Evaluates a cotangent bwd returned into the memory at ps (the argument's arrays, in order).
template <class A, class G>
void write_custom_cotangent(A const& arg, G const& ct, std::vector<void*> const& ps,
                            std::size_t& k) {
  if constexpr (is_array_v<A>) {
    using V = value_t<A>;
    if (ct.shape() != arg.shape())
      throw shape_error("custom_vjp: bwd returned a cotangent of shape " + ct.shape().str() +
                        " for an argument of shape " + arg.shape().str());
    write_into(static_cast<V*>(ps[k++]), ct, arg.shape());
  } else if constexpr (tree_node<A>::known) {
    std::vector<void const*> leaves;
    for_each_leaf(ct, [&](auto const& l) { leaves.push_back(&l); });
    std::size_t i = 0;
    for_each_leaf(arg, [&](auto const& a) {
      using L = std::remove_cvref_t<decltype(a)>;
      write_custom_cotangent(a, *static_cast<L const*>(leaves.at(i++)), ps, k);
    });
  }
}

// bwd(residuals, ct) as a step: each floating array argument's cotangent is written into a
// buffer of the recording (grads: the arguments' trees with those buffers as arrays).
template <class T, class Bwd, class R, class Args>
struct custom_bwd_step {
  std::shared_ptr<Bwd const> bwd;
  std::shared_ptr<std::optional<R>> result;
  array<T> ct;
  T const* ct_at;
  Args grads;
  std::vector<void*> writes;  // the arrays of grads, in order

  void run() {
    if (ct_at != ct.data()) {
      T* q = const_cast<T*>(ct_at);
      ct = array<T>::from_buffer(buffer::borrow(q, ct.size() * sizeof(T)), q, ct.shape());
    }
    auto g = (*bwd)(std::as_const(std::get<1>(**result)), std::as_const(ct));
    std::size_t k = 0;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (write_custom_cotangent(std::get<K>(grads), std::get<K>(g), writes, k), ...);
    }
    (std::make_index_sequence<std::tuple_size_v<Args>>{});
  }
  void pointers(pointer_list& l) {
    l.reads(ct_at);
    for (auto& p : writes) l.writes(p);
  }
};

// Fresh arrays shaped as a's floating arrays (a's tree, those arrays replaced); a itself for
// anything else (it gets no cotangent).
template <class A>
A cotangent_buffers(A const& a, std::vector<void*>& ps) {
  A out = a;
  if constexpr (tree_node<A>::known)
    for_each_leaf(out, [&](auto& l) {
      using L = std::remove_cvref_t<decltype(l)>;
      if constexpr (floating_element<value_t<L>>) {
        l = L::empty(l.shape());
        ps.push_back(l.data());
      }
    });
  return out;
}

// The tape entry of one call: pulls the output's cotangent through the user's rule.
template <class T, class Bwd, class R, class Args>
struct custom_vjp_entry final : tape_entry {
  std::shared_ptr<Bwd const> bwd;
  std::shared_ptr<std::optional<R>> result;  // fwd's {output, residuals}
  Args args;  // the arguments (array handles): where the cotangents go
  custom_vjp_entry(std::shared_ptr<Bwd const> b, std::shared_ptr<std::optional<R>> r, Args a)
      : bwd(std::move(b)), result(std::move(r)), args(std::move(a)) {}

  void pull(autodiff::cotangents& cts) override {
    auto ct = cts.template take<T>(out.get());
    if (!ct) return;
    if (active_recording()) return pull_recorded(cts, std::move(*ct));
    auto g = (*bwd)(std::as_const(std::get<1>(**result)), std::as_const(*ct));
    send(cts, g);
  }

 private:
  // The rule as a recorded step (custom_bwd_step); its cotangents are the recording's buffers.
  void pull_recorded(autodiff::cotangents& cts, array<T> ct) {
    std::vector<void*> writes;
    Args grads = zenith::detail::apply(
        [&](auto const&... a) { return Args{cotangent_buffers(a, writes)...}; }, args);
    T const* at = ct.data();
    custom_bwd_step<T, Bwd, R, Args> step{bwd, result, std::move(ct), at, grads, std::move(writes)};
    run_step(step);
    send(cts, grads);
  }

  template <class G0>
  void send(autodiff::cotangents& cts, G0 const& g) {
    using G = std::remove_cvref_t<G0>;
    constexpr std::size_t n = std::tuple_size_v<Args>;
    if constexpr (requires { std::tuple_size<G>::value; }) {
      static_assert(std::tuple_size_v<G> == n,
                    "zenith::custom_vjp: bwd must return a std::tuple with one cotangent per "
                    "argument");
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (send_custom_cotangent(std::get<K>(args), std::get<K>(g), cts, K), ...);
      }
      (std::make_index_sequence<n>{});
    } else {
      static_assert(sizeof(G) == 0,
                    "zenith::custom_vjp: bwd must return a std::tuple with one cotangent per "
                    "argument");
    }
  }
};

template <class F, class Fwd, class Bwd>
struct custom_vjp_fn {
  std::shared_ptr<F const> f;
  std::shared_ptr<Fwd const> fwd;
  std::shared_ptr<Bwd const> bwd;

  template <class... Args>
  auto operator()(Args const&... args) const {
    if constexpr ((staged_expression<Args> || ...))
      return staged(args...);
    else if constexpr ((fixed_expression<Args> || ...))
      return (*f)(args...);  // tensors: f as it is (their gradients are staged or rvars)
    else
      return call(stored_arg(args)...);
  }

 private:
  // In a staged tensor function (jit of grad on tensors): a node of the staged expression that
  // calls fwd and bwd when the gradient is evaluated (autodiff/staged_custom.hpp).
  template <class... Args>
  auto staged(Args const&... args) const {
    static_assert((fixed_expression<Args> && ...),
                  "zenith::custom_vjp: in a staged tensor function every argument of a custom "
                  "rule must be a tensor or a tensor expression");
    using R = std::remove_cvref_t<
        std::invoke_result_t<Fwd const&, tensor_of_t<value_t<Args>, shape_of_t<Args>> const&...>>;
    using O = std::remove_cvref_t<decltype(std::get<0>(std::declval<R const&>()))>;
    static_assert(fixed_expression<O>,
                  "zenith::custom_vjp: on tensors, fwd must return std::pair{output tensor, "
                  "residuals}");
    using Out = tensor_of_t<value_t<O>, shape_of_t<O>>;
    return staged_custom<Fwd, Bwd, R, Out, Args...>(fwd.get(), bwd.get(), args...);
  }

  template <class... A>
  auto call(A const&... args) const {
    using Out = std::remove_cvref_t<std::invoke_result_t<F const&, A const&...>>;
    static_assert(expression<Out> && !fixed_expression<Out>,
                  "zenith::custom_vjp: f must return an array expression");
    using T = value_t<Out>;
    trace_state* st = active_trace();
    if (!st || !any_arg_traced(*st, args...)) {
      // f may run loops of its own, which a recording cannot see (transforms/jit.hpp).
      note_unreplayable("a custom_vjp function outside a gradient");
      return evaluate_as<T>((*f)(args...));
    }
    if (st->forward)
      throw value_error("custom_vjp under " + st->transform +
                        ": the function has no forward-mode rule (custom_vjp defines its vjp "
                        "only)");
    if (st->parent)
      throw value_error("custom_vjp under " + st->transform + " inside " + st->parent->transform +
                        ": a user rule cannot be differentiated again (higher-order "
                        "derivatives through custom_vjp are not supported)");

    // fwd with the arguments untraced and a private tape: all it may record is a read of an
    // array traced through a closure, which the rule would miss.
    using R = std::remove_cvref_t<std::invoke_result_t<Fwd const&, A const&...>>;
    static_assert(
        requires(R r) {
          std::get<0>(r);
          std::get<1>(r);
        },
        "zenith::custom_vjp: fwd must return std::pair{output, residuals}");
    std::vector<buffer const*> untraced;
    (for_each_arg_leaf(args,
                       [&](auto const& l) {
                         if (st->traced.erase(l.storage().get()))
                           untraced.push_back(l.storage().get());
                       }),
     ...);
    std::vector<std::unique_ptr<tape_entry>> recorded;
    auto r = std::make_shared<std::optional<R>>();
    array<T> out;
    recording* rec = active_recording();
    {
      recording_scope pause(nullptr);  // a recording keeps fwd as one step (custom_fwd_step)
      struct retrace {
        trace_state* st;
        std::vector<buffer const*> const& bs;
        ~retrace() {
          for (auto b : bs) st->traced.insert(b);
        }
      } back{st, untraced};
      sub_tape sub(*st);
      r->emplace((*fwd)(args...));
      out = evaluate_as<T>(std::get<0>(**r));
      recorded = sub.release();
    }
    if (!recorded.empty()) {
      drop_entries(*st, recorded);
      throw value_error("custom_vjp under " + st->transform +
                        ": fwd reads a traced array that is not one of its arguments (captured "
                        "by a closure?), whose gradient the rule would drop; pass it as an "
                        "argument");
    }

    if (rec && out.device() != cpu) {
      // Replayed steps write host memory: such a recording is called afresh instead.
      note_unreplayable("a custom_vjp rule over device arrays");
    } else if (rec) {  // the output in a buffer of the recording, which fwd's step writes on a
                       // replay
      array<T> kept = array<T>::empty(out.shape());
      std::vector<void const*> reads;
      (for_each_arg_leaf(args, [&](auto const& l) { reads.push_back(l.data()); }), ...);
      custom_fwd_step<T, Fwd, R, A...> step{
          fwd, std::tuple<A...>(args...), std::move(reads), kept.data(), out.shape(), r};
      {
        recording_scope pause(nullptr);  // this time fwd has run already: its output copied
        auto copy = make_evaluator(out);
        run_fused(contiguous_dest(kept), copy, out.shape());
      }
      rec->steps.push_back(std::make_unique<step_of<decltype(step)>>(std::move(step)));
      out = kept;
    }
    // The output under an identity of its own (fwd may return an argument, or share a buffer).
    out = array<T>::from_buffer(buffer::alias(out.storage()), out.data(), out.shape());
    using Entry = custom_vjp_entry<T, Bwd, R, std::tuple<A...>>;
    auto entry = std::make_unique<Entry>(bwd, std::move(r), std::tuple<A...>(args...));
    entry->out = out.storage();
    st->traced.insert(out.storage().get());
    std::vector<any_array> from;
    (for_each_arg_leaf(args, [&](auto const& l) { from.emplace_back(l); }), ...);
    bind_opaque(*st, "custom_vjp_call", from, out);
    st->tape.push_back(std::move(entry));
    return out;
  }
};

}  // namespace detail

// custom_vjp(f, fwd, bwd): f with the reverse-mode rule given by fwd and bwd (see the top of
// this file). f(args...) returns an array expression; fwd(args...) returns std::pair{output,
// residuals}; bwd(residuals, ct) returns a std::tuple of cotangents, one per argument.
template <class F, class Fwd, class Bwd>
auto custom_vjp(F f, Fwd fwd, Bwd bwd) {
  return detail::custom_vjp_fn<F, Fwd, Bwd>{std::make_shared<F const>(std::move(f)),
                                            std::make_shared<Fwd const>(std::move(fwd)),
                                            std::make_shared<Bwd const>(std::move(bwd))};
}

}  // namespace zenith
