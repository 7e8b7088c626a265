#pragma once
// Which buffers the running autodiff transform traces. While grad & co. call a user function,
// its differentiable arguments are aliases with buffers of their own (buffer::alias), listed
// here. Evaluation checks the list before it materializes an expression: an intermediate that
// reads a traced buffer cannot be differentiated through by the static pass, and a silent zero
// gradient is the failure to fear, so that is a clear error (the runtime tape lifts it).
#include <algorithm>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "error.hpp"

namespace zenith::detail {

struct trace_state {
  std::string transform;  // "grad", for messages
  std::vector<buffer const*> traced;
  bool reads_traced(buffer const* b) const {
    return std::find(traced.begin(), traced.end(), b) != traced.end();
  }
};

inline trace_state*& active_trace() {
  thread_local trace_state* t = nullptr;
  return t;
}

// Installs a trace for the lifetime of the guard (nested transforms restore the outer one).
class trace_scope {
 public:
  explicit trace_scope(trace_state& t) : saved_(active_trace()) { active_trace() = &t; }
  ~trace_scope() { active_trace() = saved_; }
  trace_scope(trace_scope const&) = delete;
  trace_scope& operator=(trace_scope const&) = delete;

 private:
  trace_state* saved_;
};

// Throws if expression e reads a traced buffer while a trace is active.
template <class E>
void check_untraced_materialize(E const& e, char const* what) {
  trace_state const* t = active_trace();
  if (!t) return;
  bool hit = false;
  e.for_each_array([&](auto const& a) { hit = hit || t->reads_traced(a.storage().get()); });
  if (hit)
    throw value_error(t->transform + ": " + what +
                      " an expression of a traced argument inside the function is not supported "
                      "yet; return one expression (the static pass differentiates it whole)");
}

}  // namespace zenith::detail
