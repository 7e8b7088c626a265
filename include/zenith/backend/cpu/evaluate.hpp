#pragma once
// Turning expressions into arrays on the CPU: eval, the evaluating constructor, rebinding
// assignment, write-through assign, allclose and printing.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>

#include "../../core/device_of.hpp"
#include "../../core/trace.hpp"
#include "../../expr/elementwise.hpp"
#include "fused_loop.hpp"

namespace zenith {

template <class E>
concept barrier_expression = expression<E> && requires {
  requires std::remove_cvref_t<E>::barrier;
};

namespace detail {

// Materializes e while a trace reads it: appends e's IR to the trace, runs it, and returns the
// value under a traced buffer (autodiff/ir_tape.hpp defines it; evaluate_as itself is declared by
// core/array.hpp and defined here). Level is how many derivatives deep e's type is (0 for what
// user code writes, 1 for a tangent or cotangent the rules built from it); recording only walks
// e's type to build data, so every level records the same way, and transforms nest to any
// depth.
template <element T, int Level, expression E>
array<T> record_materialization(E const& e);

template <class T>
dest_view<T> contiguous_dest(array<T>& out) {
  return {out.data(), row_major_strides(out.shape())};
}

// e evaluated on device d, for the library's own evaluations (evaluate_fresh): the device
// backend's evaluation (core/device_of.hpp declares it, backend/cuda/launch.hpp defines it).
template <element T, expression E>
array<T> evaluate_on(device d, E const& e) {
  return evaluate_on_device_backend<T>(d, e);
}

// A fresh array holding e's values (a barrier's own result when it already is T), on the device
// where e's arrays are.
template <element T, expression E>
array<T> evaluate_fresh(E const& e) {
  if (device d = device_of(e); d != cpu) return evaluate_on<T>(d, e);
  if constexpr (!std::is_same_v<value_t<E>, T>) {
    return evaluate_fresh<T>(map_node<ops::cast<T>, E>(e));
  } else if constexpr (barrier_expression<E>) {
    return eval_barrier(e);
  } else {  // e itself, not a copy: copying a gradient's expression costs a reference count a leaf
    auto out = array<T>::empty(e.shape());
    auto ev = make_evaluator(e);
    run_fused(contiguous_dest(out), ev, out.shape());
    return out;
  }
}

// e as an array without consulting the trace: an array of type T is returned as it is,
// anything else is evaluated. For evaluation inside the library (a barrier's operands, the
// reverse pass), which is never recorded; it also keeps those expression types from
// instantiating the tape's reverse pass, which is compile time for nothing.
template <element T, expression E>
array<T> evaluate_untraced(E const& e) {
  if constexpr (std::is_same_v<std::remove_cvref_t<E>, array<T>>)
    return e;
  else
    return evaluate_fresh<T>(e);
}

// e as an array, recorded when a trace reads it; e is a level-Level expression (see above).
template <element T, int Level, expression E>
array<T> evaluate_at_level(E const& e) {
  if constexpr (!std::is_same_v<std::remove_cvref_t<E>, array<T>>)
    if (reads_traced(e)) return record_materialization<T, Level>(e);
  return evaluate_untraced<T>(e);
}

// What the autodiff layer evaluates for its own rules (a barrier's value, a tangent, a
// cotangent): recorded by the enclosing transforms when transforms nest.
template <element T, int Level, expression E>
array<T> evaluate_for_rules(E const& e) {
  return evaluate_at_level<T, Level>(e);
}

// e as an array, for a derivative rule that reads e's value without recording it. Under a
// trace that reads e (the rule's result is being differentiated again) that would make e a
// constant, a silent zero: an error naming the rule instead.
template <element T, expression E>
array<T> evaluate_unrecorded(E const& e, std::string_view rule) {
  if (reads_traced(e))
    throw value_error(active_trace()->transform + ": the derivative of " + std::string(rule) +
                      " cannot be differentiated again (higher-order derivatives of it are not "
                      "supported)");
  return evaluate_untraced<T>(e);
}

// e as an array, as user code materializes it: recorded on the tape when a trace reads it.
// Where e's arrays are on a device, it is evaluated there (backend/cuda/launch.hpp) in a build
// with NVRTC, a recorded one too (evaluate_fresh), as is its reverse pass. Elsewhere the device
// path is not compiled in: it costs compile time for every evaluated type (the zenith::host
// target leaves it out, docs/cuda.md).
template <element T, expression E>
array<T> evaluate_as(E const& e) {
  if (device d = check_one_device(e); d != cpu && !reads_traced(e)) return evaluate_on<T>(d, e);
  return evaluate_at_level<T, 0>(e);
}

template <class E>
std::size_t handles_to(E const& e, buffer const* b) {
  std::size_t n = 0;
  e.for_each_array([&](auto const& a) { n += a.storage().get() == b; });
  return n;
}

// True if every leaf of ev that reads buf reads it at the output's own index.
template <class Ev>
bool reads_only_same_index(Ev& ev, void const* buf, void const* data, zenith::shape const& s) {
  auto st = row_major_strides(s);
  bool ok = true;
  ev.for_each_leaf([&](auto& leaf) {
    if (leaf.source != buf) return;
    if (static_cast<void const*>(leaf.base) != data) ok = false;
    for (std::size_t k = 0; k < s.size(); ++k)
      if (s[k] > 1 && leaf.stride[k] != st[k]) ok = false;
  });
  return ok;
}

template <element T, expression X>
void assign_rebind_impl(array<T>& dst, X const& x, std::size_t expr_handles) {
  zenith::shape s = x.shape();
  if constexpr (barrier_expression<X>) {
    dst = eval_barrier(x);
  } else {
    auto ev = make_evaluator(x);  // barriers below are computed here, before any write
    auto const& buf = dst.storage();
    bool in_place = buf && buf->owned() && dst.shape() == s &&
                    std::size_t(buf.use_count()) == 1 + expr_handles &&
                    reads_only_same_index(ev, buf.get(), dst.data(), s);
    if (in_place) {
      run_fused(contiguous_dest(dst), ev, s);
    } else {
      auto out = array<T>::empty(s);
      run_fused(contiguous_dest(out), ev, s);
      dst = std::move(out);
    }
  }
}

// dst = e, reusing dst's buffer when nothing else reads it; never recorded (see
// evaluate_untraced).
template <element T, expression E>
void assign_rebind_untraced(array<T>& dst, E const& e, bool temporary) {
  if (device d = device_of(e); d != cpu) {  // into a fresh buffer there (the old one may
    dst = evaluate_on<T>(d, e);             // still be read)
    return;
  }
  buffer const* b = dst.storage().get();
  std::size_t held = temporary ? handles_to(e, b) : 0;
  // A named expression that reads dst keeps dst's buffer shared: then use_count exceeds
  // 1 + held and the result goes to a fresh buffer, so the named expression stays valid.
  if constexpr (std::is_same_v<value_t<E>, T>) {
    assign_rebind_impl(dst, e, held);
  } else {
    auto x = convert<T>(e);
    assign_rebind_impl(dst, x, held + handles_to(x, b));
  }
}

template <element T, expression E>
void assign_rebind(array<T>& dst, E const& e, bool temporary) {
  if (reads_traced(e))
    dst = record_materialization<T, 0>(e);  // a fresh buffer: the old value may still be read
  else
    assign_rebind_untraced(dst, e, temporary);
}

template <class T>
auto float_or_double(T v) {
  if constexpr (std::is_same_v<T, double>)
    return v;
  else
    return float(v);
}
template <class T>
void print_value(std::ostream& os, T v) {
  if constexpr (std::is_same_v<T, bool>)
    os << (v ? "true" : "false");
  else if constexpr (std::is_integral_v<T>)
    os << v;
  else
    os << float_or_double(v);
}

template <element T>
void print_array(std::ostream& os, array<T> const& a) {
  if (a.device() != cpu) return print_array(os, a.to(cpu));  // printed from a host copy
  std::size_t r = a.ndim();
  if (r == 0) {
    print_value(os, a.data()[0]);
    return;
  }
  zenith::shape s = a.shape();
  if (a.size() == 0) {  // NumPy prints every empty array as []
    os << "[]";
    return;
  }
  bool summarize = a.size() > 1000;
  std::ostringstream body;
  body.copyfmt(os);
  // Recursive NumPy-style printing with "..." for long axes.
  auto rec = [&](auto& self, std::size_t axis, std::size_t offset, std::size_t stride) -> void {
    std::size_t n = s[axis];
    std::size_t inner = stride / (n ? n : 1);
    body << '[';
    for (std::size_t i = 0; i < n; ++i) {
      if (summarize && n > 6 && i == 3) {
        body << (axis + 1 == r ? "..., " : "...,\n" + std::string(axis + 1, ' '));
        i = n - 3;
      }
      if (axis + 1 == r)
        print_value(body, a.data()[offset + i]);
      else
        self(self, axis + 1, offset + i * inner, inner);
      if (i + 1 < n) {
        if (axis + 1 == r)
          body << ", ";
        else
          body << "," << std::string(r - axis - 1, '\n') << std::string(axis + 1, ' ');
      }
    }
    body << ']';
  };
  rec(rec, 0, 0, a.size());
  os << body.str();
}

}  // namespace detail

// Evaluates an expression into a fresh array (an array is returned as it is).
template <expression E>
auto eval(E const& e) {
  return detail::evaluate_as<value_t<E>>(e);
}

// Write-through assignment: evaluates e into a's existing buffer, which every array sharing it
// sees. e must broadcast to a's shape.
template <element T, expression E>
void assign(array<T>& a, E const& e) {
  if (detail::trace_state const* t = detail::active_trace();
      t && (detail::reads_traced(e) || detail::reads_traced(a)))
    throw value_error(t->transform +
                      ": assign() writes into an array in place, which a gradient cannot follow; "
                      "rebind instead (a = expr)");
  zenith::shape s = a.shape();
  auto b = broadcast_to(detail::convert<T>(e), s);
  auto ev = make_evaluator(b);
  if (!detail::reads_only_same_index(ev, a.storage().get(), a.data(), s)) {
    array<T> tmp = detail::evaluate_untraced<T>(b);  // reads a elsewhere: compute first, then copy
    auto ev2 = make_evaluator(tmp);
    run_fused(detail::contiguous_dest(a), ev2, s);
    return;
  }
  run_fused(detail::contiguous_dest(a), ev, s);
}

// Prints an expression by evaluating it.
template <expression E>
requires(!is_array_v<std::remove_cvref_t<E>>) std::ostream& operator<<(std::ostream& os,
                                                                       E const& e) {
  return os << eval(e);
}

// |a - b| <= atol + rtol * |b| elementwise (after broadcasting); NaN is never close.
template <expression A, expression B>
bool allclose(A const& a, B const& b, double rtol = 1e-5, double atol = 1e-8) {
  detail::note_unreplayable("allclose");  // a decision on values
  zenith::shape s = broadcast_shapes(a.shape(), b.shape(), "allclose");
  array<double> x = detail::evaluate_untraced<double>(broadcast_to(cast<double>(a), s));
  array<double> y = detail::evaluate_untraced<double>(broadcast_to(cast<double>(b), s));
  for (std::size_t i = 0; i < x.size(); ++i) {
    double u = x.data()[i], v = y.data()[i];
    if (u == v) continue;  // equal infinities
    if (!(std::abs(u - v) <= atol + rtol * std::abs(v))) return false;
  }
  return true;
}

}  // namespace zenith
