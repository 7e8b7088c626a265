#pragma once
// checkpoint (rematerialization): trade compute for memory in reverse mode.
//
//   auto block = zn::checkpoint([w1, w2](zn::array<float> const& h) {
//     zn::array<float> z = zn::tanh(zn::matmul(h, w1));
//     return zn::tanh(zn::matmul(z, w2));
//   });
//   auto net = zn::checkpoint_sequential(layers, 4);   // layers: std::vector of array -> array
//
// Outside a trace, and under jvp, checkpoint(f) is f, its result evaluated to an array. Under
// grad or vjp it runs f with the tape entries f records going to a private sub-tape, then drops
// them, which frees the intermediates they held; what is kept is one entry holding f, its
// arguments (array handles) and its output. When the backward pass reaches that entry, f runs
// again on the same arguments, recording into a fresh sub-tape, the output's cotangent is handed
// to the recomputed output, and the sub-tape is pulled and freed at once. So only one
// checkpointed function's intermediates are alive at a time.
//
// The tape is the one runtime graph: checkpoint acts on it, with no graph of its own. f must
// compute the same thing when called again, and its result must be its only output (an
// intermediate that escapes by another way loses its gradient). f is kept and called again
// during the backward pass, so it must not capture by reference what will be gone by then: the
// arrays a function closes over are handles, capture them by value. Arrays f closes over that
// are traced (the weights, say) receive their gradients like the arguments.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/tape.hpp"
#include "../core/apply.hpp"
#include "../core/trace.hpp"
#include "custom_vjp.hpp"

namespace zenith {

namespace detail {

// The entry kept for one call of a checkpointed function: f and its arguments, to run it again.
template <class T, class F, class Args>
struct checkpoint_entry final : tape_entry {
  std::shared_ptr<F const> f;
  Args args;
  trace_state* st;  // the trace that owns this entry, so outlives it
  checkpoint_entry(std::shared_ptr<F const> fn, Args a, trace_state* s)
      : f(std::move(fn)), args(std::move(a)), st(s) {}

  void pull(autodiff::cotangents& cts) override {
    auto ct = cts.template take<T>(out.get());
    if (!ct) return;
    std::vector<std::unique_ptr<tape_entry>> sub;
    array<T> again;
    {
      trace_scope scope(st);  // the arguments' buffers are traced still: f records again
      sub_tape guard(*st);
      again =
          zenith::detail::apply([&](auto const&... a) { return evaluate_as<T>((*f)(a...)); }, args);
      sub = guard.release();
    }
    if (!st->reads_traced(again.storage().get()) || again.shape() != ct->shape()) {
      drop_entries(*st, sub);
      throw value_error("checkpoint: recomputing the function for the backward pass gave " +
                        std::string(st->reads_traced(again.storage().get())
                                        ? "a result of shape " + again.shape().str() +
                                              " instead of " + ct->shape().str()
                                        : "a result that no longer depends on a traced array") +
                        "; a checkpointed function must compute the same thing each time");
    }
    cts(again, *ct);
    // Pulled newest first and freed at once; each output is unmarked once its cotangent is taken.
    while (!sub.empty()) {
      sub.back()->pull(cts);
      sub.back()->forget(*st, nullptr);
      sub.pop_back();
    }
  }
};

template <class F>
struct checkpoint_fn {
  std::shared_ptr<F const> f;

  template <class... Args>
  auto operator()(Args const&... args) const {
    return call(stored_arg(args)...);
  }

 private:
  template <class... A>
  auto call(A const&... args) const {
    using Out = std::remove_cvref_t<std::invoke_result_t<F const&, A const&...>>;
    static_assert(expression<Out> && !fixed_expression<Out>,
                  "zenith::checkpoint: the function must return an array expression");
    using T = value_t<Out>;
    trace_state* st = active_trace();
    // Forward mode keeps nothing to drop; under nested transforms the outer levels record f's
    // work as it runs, so it is not recomputed (a correct gradient, without the memory saving).
    if (!st || st->forward || st->parent) return evaluate_as<T>((*f)(args...));

    std::vector<std::unique_ptr<tape_entry>> recorded;
    array<T> out;
    {
      sub_tape guard(*st);
      out = evaluate_as<T>((*f)(args...));
      recorded = guard.release();
    }
    buffer const* o = out.storage().get();
    bool made_out =
        std::any_of(recorded.begin(), recorded.end(), [&](auto const& e) { return e->made(o); });
    // Nothing recorded produced the output: it is untraced, or an array traced already (an
    // argument returned as is). Either way there is nothing to recompute.
    drop_entries(*st, recorded, made_out ? o : nullptr);
    if (made_out) {
      using Entry = checkpoint_entry<T, F, std::tuple<A...>>;
      auto entry = std::make_unique<Entry>(f, std::tuple<A...>(args...), st);
      entry->out = out.storage();
      st->tape.push_back(std::move(entry));
    }
    return out;
  }
};

}  // namespace detail

// checkpoint(f): f (arrays or trees of arrays in, an array expression out) whose intermediates
// are recomputed during the backward pass instead of kept (see the top of this file).
template <class F>
auto checkpoint(F f) {
  return detail::checkpoint_fn<F>{std::make_shared<F const>(std::move(f))};
}

// checkpoint_sequential(layers, segments): a callable x -> layers[n-1](...layers[0](x)) that
// runs the layers (callables array -> array expression) in `segments` consecutive chunks of
// near-equal length, each but the last checkpointed. Only the chunks' boundary activations are
// kept through the forward pass; the last chunk's intermediates are needed first by the
// backward pass, so recomputing them would cost time for no memory (as in PyTorch's
// checkpoint_sequential). segments is clamped to the number of layers.
template <class L>
auto checkpoint_sequential(std::vector<L> layers, std::size_t segments) {
  if (segments == 0) throw value_error("checkpoint_sequential: segments must be at least 1, got 0");
  auto ls = std::make_shared<std::vector<L> const>(std::move(layers));
  return [ls, segments](auto const& x) {
    using X = std::remove_cvref_t<decltype(x)>;
    static_assert(expression<X> && !fixed_expression<X>,
                  "zenith::checkpoint_sequential: the input must be an array expression");
    using T = value_t<X>;
    array<T> h = detail::evaluate_as<T>(x);
    std::size_t n = ls->size(), k = std::min(segments, n);
    for (std::size_t s = 0; s < k; ++s) {
      auto run = [ls, begin = s * n / k, end = (s + 1) * n / k](array<T> const& in) {
        array<T> y = in;
        for (std::size_t i = begin; i < end; ++i) y = (*ls)[i](y);
        return y;
      };
      h = s + 1 < k ? checkpoint(std::move(run))(h) : run(h);
    }
    return h;
  };
}

}  // namespace zenith
