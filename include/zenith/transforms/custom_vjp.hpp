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
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/tape.hpp"
#include "../core/trace.hpp"
#include "../core/tree.hpp"

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
  for (auto& e : entries)
    if (e->out.get() != keep) st.traced.erase(e->out.get());
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

// The tape entry of one call: pulls the output's cotangent through the user's rule.
template <class T, class Bwd, class Res, class Args>
struct custom_vjp_entry final : tape_entry {
  std::shared_ptr<Bwd const> bwd;
  Res residuals;
  Args args;  // the arguments (array handles): where the cotangents go
  custom_vjp_entry(std::shared_ptr<Bwd const> b, Res r, Args a)
      : bwd(std::move(b)), residuals(std::move(r)), args(std::move(a)) {}

  void pull(autodiff::cotangents& cts) override {
    auto ct = cts.template take<T>(out.get());
    if (!ct) return;
    auto g = (*bwd)(std::as_const(residuals), std::as_const(*ct));
    using G = std::remove_cvref_t<decltype(g)>;
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
    // The rule may run loops of its own, which a recording cannot see (transforms/jit.hpp).
    note_unreplayable("a custom_vjp function");
    return call(stored_arg(args)...);
  }

 private:
  template <class... A>
  auto call(A const&... args) const {
    using Out = std::remove_cvref_t<std::invoke_result_t<F const&, A const&...>>;
    static_assert(expression<Out> && !fixed_expression<Out>,
                  "zenith::custom_vjp: f must return an array expression");
    using T = value_t<Out>;
    trace_state* st = active_trace();
    if (!st || !any_arg_traced(*st, args...)) return evaluate_as<T>((*f)(args...));
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
    std::optional<R> r;
    array<T> out;
    {
      struct retrace {
        trace_state* st;
        std::vector<buffer const*> const& bs;
        ~retrace() {
          for (auto b : bs) st->traced.insert(b);
        }
      } back{st, untraced};
      sub_tape sub(*st);
      r.emplace((*fwd)(args...));
      out = evaluate_as<T>(std::get<0>(*r));
      recorded = sub.release();
    }
    if (!recorded.empty()) {
      drop_entries(*st, recorded);
      throw value_error("custom_vjp under " + st->transform +
                        ": fwd reads a traced array that is not one of its arguments (captured "
                        "by a closure?), whose gradient the rule would drop; pass it as an "
                        "argument");
    }

    // The output under an identity of its own (fwd may return an argument, or share a buffer).
    out = array<T>::from_buffer(buffer::alias(out.storage()), out.data(), out.shape());
    using Res = std::remove_cvref_t<decltype(std::get<1>(*r))>;
    using Entry = custom_vjp_entry<T, Bwd, Res, std::tuple<A...>>;
    auto entry =
        std::make_unique<Entry>(bwd, std::get<1>(std::move(*r)), std::tuple<A...>(args...));
    entry->out = out.storage();
    st->traced.insert(out.storage().get());
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
