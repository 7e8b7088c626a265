#pragma once
// Running a trace's IR (autodiff/ir_tape.hpp): the hooks a transform installs when it starts.
//
// - compute: the equations a materialization appended, run by the block interpreter
//   (backend/cpu/interpret.hpp); every array it stores on the way is kept by value id.
// - pull: the backward pass of a tape segment: its equations' reverse mode appended to a copy of
//   the graph (autodiff/ir_vjp.hpp), seeded with the cotangents the segment's results got, and
//   run with every value the trace kept known; the cotangents of the values the segment read
//   go back to the sink by buffer.
// - tangents (jvp, at the end of the traced call): the tangent equations of the whole graph
//   (autodiff/ir_jvp.hpp), run once.
//
// Each run happens under the enclosing traces, which record the equations that read their
// traced arrays (record_run): so a backward pass run inside another transform is that
// transform's IR in turn, and nested transforms need no code of their own.
//
// Arrays on a device are computed on the host, copied there and back: the IR has no device
// kernels yet.
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "../backend/cpu/interpret.hpp"
#include "../core/recording.hpp"
#include "../core/runtime_instance.hpp"
#include "forward.hpp"
#include "ir_jvp.hpp"
#include "ir_tape.hpp"
#include "ir_vjp.hpp"
#include "tape.hpp"

namespace zenith::detail {

// What the hooks do with an array whose element type they know only at run time, one entry per
// dtype. A starting transform registers the base types (bool, the integers, float and double);
// the 16-bit floats are registered where a value of one is recorded (ir::detail::dtype_emitted,
// below). So a program without them compiles no cotangent sums of bfloat16 and float16, which
// were a fifth of the runtime every transform program carries, and a program that never starts a
// transform compiles none of this.
struct typed_ops {
  any_array (*to)(any_array const&, device);
  ir::value_id (*leaf)(ir::recorder&, any_array const&);
  any_array (*at)(any_array const&, char*);  // a's dtype and shape over the memory at p
  // Floating dtypes only (null for the others): cotangents and tangents by buffer.
  std::optional<any_array> (*take)(autodiff::cotangents&, buffer const*);
  void (*add)(autodiff::cotangents&, any_array const& leaf, any_array const& ct);
  std::optional<any_array> (*tangent)(autodiff::tangents const&, buffer const*);
  void (*set_tangent)(autodiff::tangents&, any_array const& a, any_array const& t);
};

template <element T>
struct typed_ops_of {
  static any_array to(any_array const& a, device d) { return a.as<T>().to(d); }
  static ir::value_id leaf(ir::recorder& r, any_array const& a) { return r.leaf(a.as<T>()); }
  static any_array at(any_array const& a, char* p) {
    auto b = buffer::borrow(p, a.shape().numel() * sizeof(T));
    return array<T>::from_buffer(std::move(b), reinterpret_cast<T*>(p), a.shape());
  }
  static std::optional<any_array> take(autodiff::cotangents& cts, buffer const* b) {
    if (auto c = cts.template take<T>(b)) return any_array(*c);
    return std::nullopt;
  }
  static void add(autodiff::cotangents& cts, any_array const& leaf, any_array const& ct) {
    cts(leaf.as<T>(), ct.as<T>());
  }
  static std::optional<any_array> tangent(autodiff::tangents const& ts, buffer const* b) {
    if (array<T> const* x = ts.template find<T>(b)) return any_array(*x);
    return std::nullopt;
  }
  static void set_tangent(autodiff::tangents& ts, any_array const& a, any_array const& t) {
    ts.set(a.storage(), t.as<T>());
  }
  static constexpr typed_ops ops = [] {
    typed_ops o{&to, &leaf, &at, nullptr, nullptr, nullptr, nullptr};
    if constexpr (floating_element<T>) {
      o.take = &take;
      o.add = &add;
      o.tangent = &tangent;
      o.set_tangent = &set_tangent;
    }
    return o;
  }();
};

template <element T>
void register_typed() {
  ir::detail::add_once<&typed_ops_of<T>::ops>("array", dtype_of<T>());
}

inline typed_ops const& typed(zenith::dtype d) {
  typed_ops const* o = ir::detail::table_of<typed_ops const*>().find("array", d);
  if (!o) ir::detail::fail_unregistered("array operation", "array", d);
  return *o;
}

inline any_array any_to(any_array const& a, device d) { return typed(a.dtype()).to(a, d); }

// Records into trace t the equations at positions `order` of g (run with vals) that read
// arrays t traces: each result bound where it has an array, marked traced.
template <class = void>
void record_run_into(trace_state& t, ir::graph const& g, std::vector<any_array> const& vals,
                     std::vector<std::size_t> const& order) {
  ir_trace& ir = *t.ir;
  auto const& eqs = g.equations();
  std::vector<char> computed(g.values().size(), 0), dep(g.values().size(), 0);
  std::vector<std::size_t> made_by(g.values().size(), 0);
  for (std::size_t i : order) {
    computed[eqs[i].output] = 1;
    made_by[eqs[i].output] = i;
  }
  auto traced = [&](ir::value_id v) {
    return !vals[v].empty() && t.reads_traced(vals[v].storage().get());
  };
  bool any = false;
  for (std::size_t i : order) {
    bool d = false;
    for (ir::value_id v : eqs[i].inputs) d = d || dep[v] || (!computed[v] && traced(v));
    dep[eqs[i].output] = d;
    any = any || d;
  }
  if (!any) return;
  std::size_t first = ir.graph.equations().size();
  auto first_value = ir::value_id(ir.graph.values().size());
  std::vector<std::optional<ir::value_id>> map(g.values().size());
  auto map_value = [&](auto& self, ir::value_id v) -> ir::value_id {
    if (map[v]) return *map[v];
    ir::value const& x = g.at(v);
    ir::value_id id;
    if (x.kind == ir::value_kind::literal) {
      id = ir.graph.add_literal(x.dtype, x.literal);
    } else if (computed[v] && (dep[v] || vals[v].empty())) {
      ir::equation const& e = eqs[made_by[v]];
      std::vector<ir::value_id> in;
      for (ir::value_id u : e.inputs) in.push_back(self(self, u));
      id = ir.graph.add_equation(e.op, std::move(in), x.dtype, x.shape, e.attrs);
      if (!vals[v].empty()) {
        ir.bind(id, vals[v]);
        if (dep[v]) t.traced.insert(vals[v].storage().get());
      }
    } else if (ir::value_id const* b = ir.rec.find(vals[v].storage().get())) {
      id = *b;  // a value t holds already
    } else {
      id = typed(x.dtype).leaf(ir.rec, vals[v]);
    }
    map[v] = id;
    return id;
  };
  for (std::size_t i : order)
    if (dep[eqs[i].output]) map_value(map_value, eqs[i].output);
  note_recorded(t, first, first_value);
}
ZENITH_RUNTIME_INSTANCE(void record_run_into<>(trace_state& t, ir::graph const& g,
                                               std::vector<any_array> const& vals,
                                               std::vector<std::size_t> const& order))

// An IR run as a step of a jit recording (core/recording.hpp): on a replay the same equations
// run again on the arrays at its read pointers, and their results are copied to its write
// pointers, where the recorded run stored them. (A template so that only programs that record
// compile it.)
template <class = void>
struct ir_run_step {
  std::shared_ptr<ir::graph const> g;
  std::vector<std::size_t> order;
  std::vector<ir::value_id> in_ids, out_ids;
  std::vector<any_array> in_arrays, out_arrays;  // as recorded: dtype and shape, kept alive
  std::vector<char*> in_ptrs, out_ptrs;

  std::optional<ir::detail::run_plan> plan;  // made on the first replay, the same for every one

  static any_array at(any_array const& a, char* p) { return typed(a.dtype()).at(a, p); }
  void run() {
    std::vector<any_array> vals(g->values().size());
    for (std::size_t i = 0; i < in_ids.size(); ++i) vals[in_ids[i]] = at(in_arrays[i], in_ptrs[i]);
    if (!plan) plan = ir::detail::prepare_run(*g, order, out_ids, false);
    ir::run_planned(*g, vals, *plan);
    for (std::size_t i = 0; i < out_ids.size(); ++i) {
      any_array const& r = vals[out_ids[i]];
      std::size_t bytes = r.shape().numel() * ir::detail::element_size(r.dtype());
      if (static_cast<void const*>(out_ptrs[i]) != r.data())
        std::memmove(out_ptrs[i], r.data(), bytes);
    }
  }
  void pointers(pointer_list& v) {
    for (char*& p : in_ptrs) v.reads(p);
    for (char*& p : out_ptrs) v.writes(p);
  }
};
ZENITH_RUNTIME_INSTANCE(struct ir_run_step<>)

// Runs the equations at positions `order` of g with vals (interpret.hpp's run_equations), on
// the host, and records them into every active trace that reads what they read; a jit
// recording keeps the run as one step.
template <class V = void>
void run_traced(ir::graph const& g, std::vector<any_array>& vals, std::vector<std::size_t> order,
                std::vector<ir::value_id> const& kept, bool release_dead = false) {
  vals.resize(g.values().size());
  std::vector<char> computed(g.values().size(), 0);
  for (std::size_t i : order) computed[g.equations()[i].output] = 1;
  // What the equations read: their constants too (an array on a device, or a pointer of a jit
  // step), made arrays here rather than inside the interpreter.
  std::vector<ir::value_id> reads;
  {
    std::vector<char> seen(g.values().size(), 0);
    for (std::size_t i : order)
      for (ir::value_id v : g.equations()[i].inputs) {
        ir::value const& x = g.at(v);
        if (computed[v] || seen[v] || x.kind == ir::value_kind::literal) continue;
        seen[v] = 1;
        if (vals[v].empty() && x.kind == ir::value_kind::constant)
          vals[v] = ir::detail::constant_array(x);
        if (!vals[v].empty()) reads.push_back(v);
      }
  }
  device d = cpu;
  for (ir::value_id v : reads)
    if (vals[v].storage()->where() != cpu) d = vals[v].storage()->where();
  recording* rec = active_recording();
  if (d != cpu) {
    note_unreplayable("an IR run over device arrays");
    std::vector<any_array> host(vals.size());
    for (ir::value_id v : reads)
      host[v] = vals[v].storage()->where() == cpu ? vals[v] : any_to(vals[v], cpu);
    ir::run_equations(g, host, order, kept, release_dead);
    for (std::size_t i : order) {
      ir::value_id v = g.equations()[i].output;
      if (!host[v].empty()) vals[v] = any_to(host[v], d);
    }
  } else if (rec) {
    ir_run_step<V> step;
    for (ir::value_id v : reads) {
      step.in_ids.push_back(v);
      step.in_arrays.push_back(vals[v]);
      step.in_ptrs.push_back(static_cast<char*>(const_cast<void*>(vals[v].data())));
    }
    // The run is the step: the steps its own work recorded are dropped (what it allocates is
    // still the recording's, so that a replay may write it).
    std::size_t mark = rec->steps.size();
    ir::run_equations(g, vals, order, kept, release_dead);
    rec->steps.resize(mark);
    for (std::size_t i : order) {
      ir::value_id v = g.equations()[i].output;
      if (vals[v].empty()) continue;
      step.out_ids.push_back(v);
      step.out_arrays.push_back(vals[v]);
      step.out_ptrs.push_back(static_cast<char*>(const_cast<void*>(vals[v].data())));
    }
    step.g = std::make_shared<ir::graph const>(g);
    step.order = std::move(order);
    rec->steps.push_back(std::make_unique<step_of<ir_run_step<V>>>(std::move(step)));
    order = static_cast<step_of<ir_run_step<V>>&>(*rec->steps.back()).state.order;
  } else {
    ir::run_equations(g, vals, order, kept, release_dead);
  }
  for (trace_state* t = active_trace(); t; t = t->parent) record_run_into(*t, g, vals, order);
}

template <class = void>
any_array compute_hook(trace_state& t, std::size_t first, ir::value_id out) {
  ir_trace& ir = *t.ir;
  std::vector<std::size_t> order;
  for (std::size_t i = first; i < ir.graph.equations().size(); ++i) order.push_back(i);
  // Into the trace's own arrays: what is stored on the way (a matmul's result below a tanh)
  // stays there for the backward pass.
  run_traced(ir.graph, ir.arrays, std::move(order), {out});
  return ir.arrays[out];
}
ZENITH_RUNTIME_INSTANCE(any_array compute_hook<>(trace_state& t, std::size_t first,
                                                 ir::value_id out))

// A new input of g holding a (a seed or a tangent the derivative equations read).
inline ir::value_id add_given(ir::graph& g, std::vector<any_array>& vals, any_array const& a) {
  ir::value_id v = g.add_input(a.dtype(), a.shape());
  vals.resize(g.values().size());
  vals[v] = a;
  return v;
}

// Runs what the derivative values r (appended to g) need, their own arrays released as soon as
// read; false when no derivative reaches any of them.
template <class = void>
bool run_derivatives(ir::graph const& g, std::vector<any_array>& vals,
                     std::vector<std::optional<ir::value_id>> const& r) {
  std::vector<ir::value_id> want;
  for (auto const& c : r)
    if (c) want.push_back(*c);
  if (want.empty()) return false;
  run_traced(g, vals, ir::needed_equations(g, vals, want), want, true);
  return true;
}
ZENITH_RUNTIME_INSTANCE(bool run_derivatives<>(ir::graph const& g, std::vector<any_array>& vals,
                                               std::vector<std::optional<ir::value_id>> const& r))

template <class = void>
void pull_hook(trace_state& t, std::size_t first, std::size_t last, ir::value_id first_value,
               ir::value_id last_value, autodiff::cotangents& cts) {
  ir_trace& ir = *t.ir;
  ir::graph g = ir.graph;  // the backward's equations go to a copy: the trace's IR stays as is
  std::vector<any_array> vals = ir.arrays;
  vals.resize(g.values().size());
  std::vector<ir::value_id> outs, seeds, wrt;
  for (ir::value_id v = first_value; v < last_value; ++v) {
    any_array const* a = ir.array_of(v);
    if (!a || !ir::detail::floating_dtype(a->dtype())) continue;
    std::optional<any_array> ct = typed(a->dtype()).take(cts, a->storage().get());
    if (!ct) continue;
    outs.push_back(v);
    seeds.push_back(add_given(g, vals, *ct));
  }
  if (outs.empty()) return;
  std::vector<char> seen(g.values().size(), 0);
  for (std::size_t i = first; i < last; ++i)
    for (ir::value_id v : g.equations()[i].inputs)
      if (v < first_value && !seen[v] && ir.array_of(v) &&
          t.reads_traced(ir.arrays[v].storage().get())) {
        seen[v] = 1;
        wrt.push_back(v);
      }
  auto r = ir::detail::append_vjp_registered(g, outs, seeds, wrt, first);
  if (!run_derivatives(g, vals, r)) return;
  for (std::size_t k = 0; k < wrt.size(); ++k) {
    if (!r[k]) continue;
    any_array const& a = ir.arrays[wrt[k]];
    if (auto add = typed(a.dtype()).add) add(cts, a, vals[*r[k]]);
  }
}
ZENITH_RUNTIME_INSTANCE(void pull_hook<>(trace_state& t, std::size_t first, std::size_t last,
                                         ir::value_id first_value, ir::value_id last_value,
                                         autodiff::cotangents& cts))

// Templates so that the interpreter and the IR rules are compiled only into programs that
// start a transform.
template <class V = void>
inline ir_trace::hooks const ir_hooks{&compute_hook<V>, &pull_hook<V>, &record_hook<V>};

// A trace's IR state, run by the hooks above.
template <class = void>
std::shared_ptr<ir_trace> make_ir_trace() {
  register_typed<bool>();
  register_typed<std::int32_t>();
  register_typed<std::int64_t>();
  register_typed<float>();
  register_typed<double>();
  return std::make_shared<ir_trace>(ir_hooks<>, ir::emit_functions_of<>);
}
ZENITH_RUNTIME_INSTANCE(std::shared_ptr<ir_trace> make_ir_trace<>())

// The tangents of everything trace t holds (forward mode), from the tangents ts has for its
// inputs: t's graph differentiated forward once, run, each result's tangent set in ts.
template <class = void>
void compute_tangents(trace_state& t, autodiff::tangents& ts) {
  ir_trace& ir = *t.ir;
  ir::graph g = ir.graph;
  std::vector<any_array> vals = ir.arrays;
  std::vector<ir::value_id> primals, tangents, outputs;
  for (ir::value_id v : ir.graph.inputs()) {
    any_array const* a = ir.array_of(v);
    if (!a) continue;
    auto find = typed(a->dtype()).tangent;
    std::optional<any_array> tan = find ? find(ts, a->storage().get()) : std::nullopt;
    if (!tan) continue;
    primals.push_back(v);
    tangents.push_back(add_given(g, vals, *tan));
  }
  for (ir::value_id v = 0; v < ir.arrays.size(); ++v)
    if (ir.array_of(v) && g.at(v).kind == ir::value_kind::result &&
        t.reads_traced(ir.arrays[v].storage().get()))
      outputs.push_back(v);
  if (primals.empty() || outputs.empty()) return;
  auto r = ir::detail::append_jvp_registered(g, primals, tangents, outputs);
  if (!run_derivatives(g, vals, r)) return;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    if (!r[k]) continue;
    any_array const& a = ir.arrays[outputs[k]];
    if (auto set = typed(a.dtype()).set_tangent) set(ts, a, vals[*r[k]]);
  }
}
ZENITH_RUNTIME_INSTANCE(void compute_tangents<>(trace_state& t, autodiff::tangents& ts))

}  // namespace zenith::detail

namespace zenith::ir::detail {
// expr/to_ir.hpp declares it: emit calls it for the type of every value it records.
// The other types are registered by a starting transform (make_ir_trace), so that a program that
// records without one (every program that materializes: a trace may be active) compiles nothing.
template <element T>
void dtype_emitted() {
  if constexpr (storage_float<T>) {
    zenith::detail::register_typed<T>();
    op_emitted<ops::reduce_sum, T>();  // the rules sum cotangents to broadcast shapes
  }
}
}  // namespace zenith::ir::detail
