#pragma once
// What the running autodiff transform traces. While grad & co. call a user function, its
// differentiable arguments are aliases with buffers of their own (buffer::alias), marked as
// traced here. Materializing an expression that reads a traced buffer (`array h = tanh(h @ w)`
// inside a runtime loop) does not just compute the value: evaluation hands it to the trace,
// which records it as IR (autodiff/ir_tape.hpp), runs it and marks the result traced too. An
// untraced array pays one pointer test.
//
// The state is thread-local: evaluation worker threads never see it, so they never record.
//
// Transforms nest (grad of grad, jvp of grad): each running transform is a level whose `parent`
// is the transform that was tracing when it started. The work a level does for its own
// derivatives (evaluating a recorded value, a tangent, a cotangent) runs with its parent as the
// active trace, so the parent records that work in turn: a backward pass run under an outer
// trace is itself differentiable.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "error.hpp"
#include "slot_scope.hpp"
#include "small_map.hpp"

namespace zenith::autodiff {
class cotangents;  // autodiff/tape.hpp
class tangents;    // autodiff/forward.hpp
}  // namespace zenith::autodiff
namespace zenith::detail {

struct ir_trace;  // autodiff/ir_tape.hpp: the trace's IR and the arrays its values hold
struct trace_state;

// One recorded materialization. pull() reads the cotangent of `out` and adds its inputs'
// cotangents; the entry's expression (and so the arrays it reads) lives until it is pulled.
struct tape_entry {
  std::shared_ptr<buffer> out;  // held, so that its identity cannot be reused while recorded
  virtual ~tape_entry() = default;
  virtual void pull(autodiff::cotangents& cts) = 0;
  // A run of IR equations (autodiff/ir_tape.hpp) takes in the equations [first, last) and
  // values [first_value, last_value) recorded right after it; other entries take nothing.
  virtual bool extend(std::size_t, std::size_t, std::uint32_t, std::uint32_t) { return false; }
  // Whether the entry made the array whose buffer is b.
  virtual bool made(buffer const* b) const { return out.get() == b; }
  // The entry will never be pulled: what it made is no longer traced (but keep). Declared
  // inline: the class then has no key function, and its vtable is emitted only where an entry
  // is made (by a transform), not in every program.
  inline virtual void forget(trace_state& t, buffer const* keep);
};

struct trace_state {
  std::string transform;  // "grad", for messages
  small_set<buffer const*> traced;
  std::vector<std::unique_ptr<tape_entry>> tape;  // in recording order (reverse mode)
  autodiff::tangents* forward = nullptr;          // forward mode (jvp): tangents, no tape
  trace_state* parent = nullptr;                  // the enclosing transform's trace, if nested
  std::shared_ptr<ir_trace> ir;  // what the trace recorded, as IR (every transform has one)

  // Out of line: every expression type's trace test calls it once per array it reads.
  [[gnu::noinline]] bool reads_traced(buffer const* b) const { return traced.contains(b); }
};

inline void tape_entry::forget(trace_state& t, buffer const* keep) {
  if (out.get() != keep) t.traced.erase(out.get());
}

inline trace_state*& active_trace() {
  thread_local trace_state* t = nullptr;
  return t;
}

// Installs a trace (or, with nullptr, none) for the lifetime of the guard; the previous one
// comes back after it, so transforms nest.
using trace_scope = slot_scope<trace_state, active_trace>;

// True if expression e reads a buffer that trace t traces.
template <class E>
bool reads_traced_by(trace_state const& t, E const& e) {
  bool hit = false;
  e.for_each_array([&](auto const& a) { hit = hit || t.reads_traced(a.storage().get()); });
  return hit;
}

// The innermost active level (the active trace or one it is nested in) whose traced buffers e
// reads; nullptr if none does, or no trace is active.
template <class E>
trace_state* innermost_reader(E const& e) {
  for (trace_state* t = active_trace(); t; t = t->parent)
    if (reads_traced_by(*t, e)) return t;
  return nullptr;
}

// True if a trace is active and expression e reads one of its traced buffers (at any level).
template <class E>
bool reads_traced(E const& e) {
  return active_trace() && innermost_reader(e);
}

}  // namespace zenith::detail
