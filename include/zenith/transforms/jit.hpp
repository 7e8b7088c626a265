#pragma once
// jit(f): f recorded once per argument shapes, replayed after that.
//
//   auto step = zn::jit(zn::value_and_grad(loss, zn::argnums<0, 1>));
//   auto [value, grads] = step(w, x);   // first call with these shapes: runs f, recording
//   auto [v2, g2] = step(w2, x2);       // same shapes: replays the recorded loops
//
// A call of f builds expressions, their evaluators and loop plans, and (under grad) the reverse
// pass, before any loop runs; on small arrays that is most of the time. The first call with
// given argument shapes runs f while a recording (core/recording.hpp) keeps every loop that
// writes memory, each with its evaluator and plan ready. A later call with the same shapes
// points those loops at the new arguments and runs them: no expression, evaluator or plan is
// built again, and no intermediate is allocated again (the recording keeps them).
//
// What f may do, as under JAX's jit: its arguments are arrays or trees of arrays (core/tree.hpp);
// what it computes may depend on their shapes but not on their values. Reading values on the
// host (a.data()[0] in an if) is not seen by the recording: a replay takes the branch the
// recording took. Arrays f captures (rather than takes as arguments) are read where they are
// at each call, so they must outlive the jit function. Work the library cannot replay (a
// custom_vjp rule, which may run loops of its own; prod's derivative, which picks a rule by the
// values; Jacobians of array functions, written element by element; integer matmul) makes
// the recording unreplayable, and f is then simply called on every call with those shapes.
//
// The result is a tree of arrays (an expression is evaluated into one).
//
// On zenith::tensor arguments there is nothing to record: jit of grad or value_and_grad stages
// the function instead and generates its gradient from the expression type it builds
// (transforms/staged_grad.hpp), and jit of any other tensor function is that function. A replay
// writes into the recording's output buffers while the caller no longer holds the previous result
// (the usual loop: results read, then dropped); otherwise it writes into fresh ones, so a result
// the caller keeps is never overwritten. Inside another transform (grad of a jit function) or
// while another thread runs the same jit function, f is called directly.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "../backend/cpu/evaluate.hpp"
#include "../core/recording.hpp"
#include "../core/small_vector.hpp"
#include "../core/trace.hpp"
#include "../core/tree.hpp"
#include "staged_grad.hpp"

namespace zenith {

namespace detail {

template <class T>
concept array_tree = is_tree_of<std::remove_cvref_t<T>, any_array_leaf>();

// f's result as arrays: a tree of arrays as it is, an expression evaluated.
template <class R>
auto jit_result(R&& r) {
  using D = std::remove_cvref_t<R>;
  if constexpr (array_tree<D>)
    return D(std::forward<R>(r));
  else if constexpr (expression<D>)
    return eval(r);
  else
    static_assert(sizeof(D) == 0,
                  "zenith::jit: the function must return an array expression or a tree of "
                  "arrays");
}

// The shapes of every array of the arguments, in order: what a recording is valid for.
using jit_key = small_vector<std::size_t, 32>;

template <class... Args>
jit_key make_jit_key(Args const&... args) {
  jit_key k;
  auto add = [&](auto const& a) {
    k.push_back(a.ndim());
    for (auto d : a.shape()) k.push_back(d);
  };
  (for_each_leaf(args, add), ...);
  return k;
}

// Whether the arguments' shapes are those of key (without building theirs).
template <class... Args>
bool key_matches(jit_key const& key, Args const&... args) {
  std::size_t i = 0, n = key.size();
  bool same = true;
  auto match = [&](auto const& a) {
    if (!same) return;
    auto const& s = a.shape();
    if (i + 1 + s.size() > n || key[i] != s.size()) {
      same = false;
      return;
    }
    ++i;
    for (auto d : s) same = same && key[i++] == d;
  };
  (for_each_leaf(args, match), ...);
  return same && i == n;
}

// A pointer field of a step, bound to an input or output: field = base + offset.
struct jit_binding {
  void* field;
  void (*set)(void* field, char const* p);
  std::ptrdiff_t offset;
  void rebase(char const* base) const { set(field, base + offset); }
};

struct jit_plan_base {
  std::type_info const* args = nullptr;  // the argument types it was recorded for
  jit_key key;
  bool replayable = false;
  virtual ~jit_plan_base() = default;
};

template <class R>
struct jit_plan final : jit_plan_base {
  recording rec;
  R result;  // the recorded result: its arrays are the output buffers
  struct input {
    char const* at;  // where its bindings point now
    std::vector<jit_binding> bindings;
  };
  struct output {
    std::shared_ptr<buffer> buf;
    long baseline = 0;  // use_count when only the plan holds it
    std::vector<jit_binding> bindings;
  };
  std::vector<input> inputs;
  std::vector<output> outputs;

  // Binds the steps' pointers into the inputs (their memory at recording) and into the result's
  // buffers. Returns false if the plan cannot be replayed: inputs that overlap (a pointer would
  // be ambiguous), or a result array that the recording did not allocate (an input returned as
  // it is, say).
  template <class... Args>
  bool bind(Args const&... args) {
    struct range {
      char const *lo, *hi;
    };
    std::vector<range> in;
    auto add_input = [&](auto const& a) {
      using T = value_t<std::remove_cvref_t<decltype(a)>>;
      char const* lo = reinterpret_cast<char const*>(a.data());
      in.push_back({lo, lo + a.size() * sizeof(T)});
      inputs.push_back({lo, {}});
    };
    (for_each_leaf(args, add_input), ...);
    for (std::size_t i = 0; i < in.size(); ++i)
      for (std::size_t j = i + 1; j < in.size(); ++j)
        if (in[i].lo < in[j].hi && in[j].lo < in[i].hi) return false;

    bool owned = true;
    for_each_leaf(result, [&](auto const& a) {
      buffer* b = a.storage().get();
      bool allocated = false;
      for (auto const& p : rec.allocated) allocated = allocated || p.get() == b;
      if (!allocated) owned = false;
      for (auto const& o : outputs)
        if (o.buf.get() == b) return;
      if (allocated) outputs.push_back({a.storage(), 0, {}});
    });
    if (!owned) return false;

    // Which of the recording's own buffers its steps write and read: one that is read (or
    // returned) but written by no step got its values from code the recording did not see, and
    // a replay would read them stale.
    std::vector<char> written(rec.allocated.size()), read(rec.allocated.size());
    struct span {
      char const *lo, *hi;
      std::size_t k;
    };
    std::vector<span> spans;  // the recording's buffers by address (they never overlap: all live)
    for (std::size_t k = 0; k < rec.allocated.size(); ++k)
      if (char const* lo = static_cast<char const*>(rec.allocated[k]->data()))
        spans.push_back({lo, lo + rec.allocated[k]->bytes(), k});
    std::sort(spans.begin(), spans.end(), [](span const& a, span const& b) { return a.lo < b.lo; });
    auto allocated_at = [&](char const* p) -> std::ptrdiff_t {
      auto it = std::upper_bound(spans.begin(), spans.end(), p,
                                 [](char const* q, span const& s) { return q < s.lo; });
      if (it == spans.begin() || !(p < std::prev(it)->hi)) return -1;
      return std::ptrdiff_t(std::prev(it)->k);
    };
    for (auto const& o : outputs)
      if (auto k = allocated_at(static_cast<char const*>(o.buf->data())); k >= 0) read[k] = 1;

    for (auto& step : rec.steps) {
      pointer_list l;
      step->pointers(l);
      for (pointer_field const& f : l.fields()) {
        char const* p = f.value;
        if (auto k = allocated_at(p); k >= 0) (f.writes ? written : read)[std::size_t(k)] = 1;
        bool found = false;
        for (std::size_t i = 0; i < in.size() && !found; ++i)
          if (p >= in[i].lo && p < in[i].hi) {
            inputs[i].bindings.push_back({f.field, f.set, p - in[i].lo});
            found = true;
          }
        for (std::size_t j = 0; j < outputs.size() && !found; ++j) {
          char const* lo = static_cast<char const*>(outputs[j].buf->data());
          if (p >= lo && p < lo + outputs[j].buf->bytes()) {
            outputs[j].bindings.push_back({f.field, f.set, p - lo});
            found = true;
          }
        }
        // Anything else is an intermediate the recording keeps, or an array f captured.
      }
    }
    for (std::size_t k = 0; k < rec.allocated.size(); ++k)
      if (read[k] && !written[k]) return false;
    for (auto& o : outputs) o.baseline = o.buf.use_count();
    return true;
  }

  template <class... Args>
  R replay(Args const&... args) {
    std::size_t i = 0;
    auto rebind_input = [&](auto const& a) {
      input& in = inputs[i++];
      char const* p = reinterpret_cast<char const*>(a.data());
      if (p == in.at) return;
      for (auto const& b : in.bindings) b.rebase(p);
      in.at = p;
    };
    (for_each_leaf(args, rebind_input), ...);
    for (auto& o : outputs)
      if (o.buf.use_count() > o.baseline) renew(o);
    for (auto& step : rec.steps) step->run();
    return result;
  }

 private:
  // The caller still holds the output's last values: the replay writes a fresh buffer.
  void renew(output& o) {
    std::shared_ptr<buffer> old = o.buf;
    auto fresh = buffer::allocate(old->bytes());
    char const* base = static_cast<char const*>(fresh->data());
    for (auto const& b : o.bindings) b.rebase(base);
    for_each_leaf(result, [&](auto& a) {
      using A = std::remove_cvref_t<decltype(a)>;
      using T = value_t<A>;
      if (a.storage() != old) return;
      auto offset = a.data() - static_cast<T const*>(old->data());
      a = A::from_buffer(fresh, static_cast<T*>(fresh->data()) + offset, a.shape());
    });
    for (auto& p : rec.allocated)
      if (p == old) p = fresh;
    o.buf = std::move(fresh);
    old.reset();
    o.baseline = o.buf.use_count();
  }
};

// The recordings of one jit function, shared by its copies.
struct jit_cache {
  std::vector<std::unique_ptr<jit_plan_base>> plans;
  std::atomic_flag busy = ATOMIC_FLAG_INIT;  // a call is using the plans
};

template <class F>
struct jit_fn {
  F f;
  std::shared_ptr<jit_cache> cache = std::make_shared<jit_cache>();

  // How many argument shapes have been recorded, and how many of those recordings replay.
  std::size_t recordings() const { return cache->plans.size(); }
  std::size_t replayable_recordings() const {
    std::size_t n = 0;
    for (auto const& p : cache->plans) n += p->replayable;
    return n;
  }

  template <class... Args>
  requires(is_tensor_v<Args> || ...) auto operator()(Args const&... args) const {
    return staged_call(f, args...);  // a call on tensors: staged (transforms/staged_grad.hpp)
  }

  template <class... Args>
  auto operator()(Args const&... args) const {
    static_assert((array_tree<Args> && ...),
                  "zenith::jit: arguments must be arrays or trees of arrays (std::vector, "
                  "std::array, std::tuple, std::pair, std::map<std::string, ...>, ZENITH_FIELDS "
                  "structs); a number would be fixed at its recorded value");
    using R = decltype(jit_result(f(args...)));
    if (active_trace() || active_recording() || cache->busy.test_and_set(std::memory_order_acquire))
      return jit_result(f(args...));
    struct release {
      jit_cache& c;
      ~release() { c.busy.clear(std::memory_order_release); }
    } guard{*cache};

    std::type_info const* type = &typeid(std::tuple<Args...>);
    for (auto& p : cache->plans)
      if (*p->args == *type && key_matches(p->key, args...)) {
        if (!p->replayable) return jit_result(f(args...));
        return static_cast<jit_plan<R>*>(p.get())->replay(args...);
      }

    auto plan = std::make_unique<jit_plan<R>>();
    plan->args = type;
    plan->key = make_jit_key(args...);
    {
      recording_scope scope(&plan->rec);
      plan->result = jit_result(f(args...));
    }
    // Bound before the caller gets the result: an output's baseline counts the plan's handles.
    plan->replayable = plan->rec.unreplayable.empty() && plan->bind(args...);
    if (!plan->replayable) {  // remembered, so that the shapes are not recorded again
      R result = std::move(plan->result);
      plan->result = R{};
      plan->rec = recording{};
      plan->inputs.clear();
      plan->outputs.clear();
      cache->plans.push_back(std::move(plan));
      return result;
    }
    R result = plan->result;
    cache->plans.push_back(std::move(plan));
    return result;
  }
};

}  // namespace detail

// jit(f): a function that calls f, recording it the first time for each set of argument
// shapes and replaying the recording after that (see the top of this file).
template <class F>
auto jit(F f) {
  return detail::jit_fn<F>{std::move(f)};
}

}  // namespace zenith
