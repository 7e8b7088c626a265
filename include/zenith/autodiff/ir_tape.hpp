#pragma once
// The tape as IR data: what a trace records when user code materializes an expression that reads
// a traced array (`h = zn::tanh(zn::matmul(h, w))` inside a function given to grad).
//
// Every running transform (core/trace.hpp) has an ir_trace: a graph (ir/graph.hpp) whose inputs
// are the transform's traced arguments, and the arrays bound to its values. Materializing a traced
// expression appends the expression's equations (expr/to_ir.hpp: a walk over its type that
// instantiates no loop), runs them, binds the result's buffer to the result's value and marks it
// traced. The arrays the equations computed on the way (a matmul's result below a tanh) are kept
// by value id, so that the backward pass reads them instead of computing them again.
//
// Nothing here instantiates a derivative rule or the interpreter: running the IR goes through
// the hooks the transform installed when it started (autodiff/ir_tape_run.hpp), so a program
// that never differentiates compiles none of it, and a materialization compiles its
// expression's IR walk only. The backward pass of a run of consecutive recorded equations (an
// ir_segment on the trace's tape) is the IR's own reverse mode (autodiff/ir_vjp.hpp), built at
// run time from one rule per op; forward mode appends the tangent equations
// (autodiff/ir_jvp.hpp). Transforms nest because running IR under an enclosing trace records
// what it runs there too: a backward pass is itself recorded, and can be differentiated again.
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "../core/any_array.hpp"
#include "../core/runtime_instance.hpp"
#include "../core/trace.hpp"
#include "../expr/to_ir.hpp"

namespace zenith::autodiff {
class cotangents;  // autodiff/tape.hpp
}

namespace zenith::detail {

struct ir_trace {
  // How the trace's IR runs: set by the transform that starts the trace.
  struct hooks {
    // Runs equations [first, end) of t's graph and returns the array of value `out`; the arrays
    // computed on the way are bound in t (ir_trace::keep).
    any_array (*compute)(trace_state& t, std::size_t first, ir::value_id out);
    // Adds to cts the cotangents of the values equations [first, last) read, from the
    // cotangents cts holds for the values they computed (values [first_value, last_value)).
    void (*pull)(trace_state& t, std::size_t first, std::size_t last, ir::value_id first_value,
                 ir::value_id last_value, autodiff::cotangents& cts);
    // Materializes the expression at e, which reads arrays t traces: appends its equations
    // (emit(rec, e) for its type), runs them, and returns the result (record_hook below).
    any_array (*record)(trace_state& t, ir::value_id (*emit)(ir::recorder&, void const*),
                        void const* e);
  };

  ir::graph graph;
  ir::recorder rec;
  std::vector<any_array> arrays;  // by value id: the array a value holds, where kept
  // Every other buffer rec binds (an alias of an argument, an array a value held before): a
  // bound buffer must outlive its binding, or a new one at its address would read its value.
  std::vector<std::shared_ptr<buffer>> held;
  hooks const* run;

  // A transform starting makes one (autodiff/ir_tape_run.hpp), with what runs its IR and what
  // builds it: a program that never starts one compiles neither.
  ir_trace(hooks const& h, ir::emit_functions const& f) : rec{graph, f}, run(&h) {}
  ir_trace(ir_trace const&) = delete;  // rec points into graph
  ir_trace& operator=(ir_trace const&) = delete;

  // Value v is held in a (kept for the backward pass).
  void keep(ir::value_id v, any_array a) {
    if (arrays.size() <= v) arrays.resize(std::size_t(v) + 1);
    if (!arrays[v].empty() && arrays[v].storage() != a.storage() &&
        rec.find(arrays[v].storage().get()))
      held.push_back(arrays[v].storage());
    arrays[v] = std::move(a);
  }
  // ... and expressions that read a's buffer read v.
  void bind(ir::value_id v, any_array a) {
    rec.bind(a.storage().get(), v);
    keep(v, std::move(a));
  }
  any_array const* array_of(ir::value_id v) const {
    return v < arrays.size() && !arrays[v].empty() ? &arrays[v] : nullptr;
  }
  // Forgets the values [first, last): their arrays are released and their buffers unbound.
  void forget(trace_state& t, ir::value_id first, ir::value_id last, buffer const* keep_bound) {
    for (ir::value_id v = first; v < last && v < arrays.size(); ++v) {
      buffer const* b = arrays[v].storage().get();
      if (!b || b == keep_bound) continue;
      if (ir::value_id const* id = rec.find(b); id && *id == v) {
        rec.unbind(b);
        t.traced.erase(b);
      }
      arrays[v] = {};
    }
  }
};

// Consecutive equations of a trace's graph (and the values they made), pulled as one backward
// pass of IR.
struct ir_segment final : tape_entry {
  trace_state* st;
  std::size_t first, last;
  ir::value_id first_value, last_value;

  ir_segment(trace_state* t, std::size_t f, ir::value_id fv)
      : st(t), first(f), last(f), first_value(fv), last_value(fv) {}
  void pull(autodiff::cotangents& cts) override {
    if (last > first) st->ir->run->pull(*st, first, last, first_value, last_value, cts);
  }
  bool extend(std::size_t first_eq, std::size_t last_eq, ir::value_id first_v,
              ir::value_id last_v) override {
    if (first_eq != last || first_v != last_value) return false;
    last = last_eq;
    last_value = last_v;
    return true;
  }
  bool made(buffer const* b) const override {
    ir::value_id const* v = st->ir->rec.find(b);
    return v && *v >= first_value && *v < last_value;
  }
  void forget(trace_state& t, buffer const* keep) override {
    t.ir->forget(t, first_value, last_value, keep);
  }
};

// Notes on t's tape that equations from `first` and values from `first_value` on (to the
// graph's end) were recorded: the last segment grows, or a new one starts.
inline void note_recorded(trace_state& t, std::size_t first, ir::value_id first_value) {
  if (t.forward) return;  // forward mode pulls nothing
  std::size_t last = t.ir->graph.equations().size();
  auto last_value = ir::value_id(t.ir->graph.values().size());
  if (last == first) return;
  if (!t.tape.empty() && t.tape.back()->extend(first, last, first_value, last_value)) return;
  auto s = std::make_unique<ir_segment>(&t, first, first_value);
  s->extend(first, last, first_value, last_value);
  t.tape.push_back(std::move(s));
}

// ir_trace::hooks::record: appends the expression at e to t's IR (emit, for its type), runs what
// was appended, and binds the result to a fresh buffer, marked traced. What the run computes for
// the enclosing traces is recorded by them in turn (the hooks run under t's parent).
template <class = void>
any_array record_hook(trace_state& t, ir::value_id (*emit)(ir::recorder&, void const*),
                      void const* e) {
  ir_trace& ir = *t.ir;
  std::size_t first = ir.graph.equations().size();
  auto first_value = ir::value_id(ir.graph.values().size());
  ir::value_id id = emit(ir.rec, e);
  any_array value;
  if (id >= first_value) {
    trace_scope outer(t.parent);
    value = ir.run->compute(t, first, id);
  } else {  // a view that changes nothing of a value t holds: the same array
    any_array const* held = ir.array_of(id);
    if (!held) throw value_error(t.transform + ": a traced value with no array (ir_tape.hpp)");
    value = held->alias();
  }
  ir.bind(id, value);
  t.traced.insert(value.storage().get());
  note_recorded(t, first, first_value);
  return value;
}
ZENITH_RUNTIME_INSTANCE(any_array record_hook<>(trace_state& t,
                                                ir::value_id (*emit)(ir::recorder&, void const*),
                                                void const* e))

template <class E>
ir::value_id emit_at(ir::recorder& r, void const* e) {
  return ir::emit(r, *static_cast<E const*>(e));
}

// Materializes e (which reads arrays trace t traces) as the trace's IR: its equations appended,
// then run. Each expression type compiles its IR walk (emit_at) and a call.
template <element T, int Level, expression E>
array<T> record_materialization(E const& e) {
  trace_state* t = innermost_reader(e);
  if constexpr (std::is_same_v<value_t<E>, T>) {
    // not a copy of e: one reference count less per leaf
    return t->ir->run->record(*t, &emit_at<E>, &e).template as<T>();
  } else {
    map_node<ops::cast<T>, E> c(e);
    return t->ir->run->record(*t, &emit_at<decltype(c)>, &c).template as<T>();
  }
}

// An array made outside the IR (a custom_vjp rule's output, a checkpointed function's): bound to
// a new value of t's graph, the result of an equation `op` of the traced arrays it was made from,
// which the backward pass never runs (the tape entry that made it pulls its cotangent).
template <element T>
void bind_opaque(trace_state& t, std::string_view op, std::vector<any_array> const& from,
                 array<T> const& out) {
  ir_trace& ir = *t.ir;
  ir::detail::dtype_emitted<T>();
  std::vector<ir::value_id> in;
  for (any_array const& a : from)
    if (ir::value_id const* v = ir.rec.find(a.storage().get())) in.push_back(*v);
  ir::value_id id = ir.graph.add_equation(op, std::move(in), dtype_of<T>(), out.shape());
  ir.bind(id, out);
}

// A transform that starts under another one passes each traced argument to its function as a
// fresh alias (transforms/grad.hpp). Every enclosing level that traces the original array
// traces the alias too, as the same value of its IR.
template <element T>
void trace_alias(trace_state* outer, array<T> const& original,
                 std::shared_ptr<buffer> const& alias) {
  for (trace_state* t = outer; t; t = t->parent) {
    ir::value_id const* v = t->ir->rec.find(original.storage().get());
    if (!v || !t->reads_traced(original.storage().get())) continue;
    t->ir->rec.bind(alias.get(), *v);
    t->ir->held.push_back(alias);
    t->traced.insert(alias.get());
  }
}

}  // namespace zenith::detail
