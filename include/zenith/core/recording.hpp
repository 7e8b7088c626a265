#pragma once
// Recording evaluation for replay (transforms/jit.hpp). While a recording is active on a thread,
// every place that writes array memory (a fused loop, a reduction, a GEMM, a group pass, a
// fill) hands its prepared work to the recording as a step instead of running it directly; the
// step then runs once, as it would have. A step owns what its loop needs (evaluators with their
// strides already coalesced, geometry, destination pointers), so replaying the steps in order
// recomputes every buffer the recording wrote without building any expression, evaluator or
// plan again.
//
// Steps hold raw pointers into memory. pointers() lists each pointer field, so the replay can
// point the steps at other inputs (the same shapes at other addresses) and at fresh output
// buffers. Every buffer allocated while recording is kept by the recording, so the pointers
// into intermediates stay valid for as long as it lives.
//
// Work that a replay cannot repeat (a decision taken on values read on the host, a user's
// custom_vjp rule, which may run its own loops) marks the recording unreplayable; the caller
// then evaluates afresh on every call instead.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "slot_scope.hpp"

namespace zenith {
class buffer;  // core/buffer.hpp
}

namespace zenith::detail {

// One pointer field of a step: where it is, and how to store a new value into it.
struct pointer_field {
  void* field = nullptr;        // the address of a T* member of the step
  char const* value = nullptr;  // its value when recorded
  bool writes = false;          // the step writes through it
  void (*set)(void* field, char const* p) = nullptr;
};

template <class T>
void set_pointer_field(void* field, char const* p) {
  *static_cast<T**>(field) = reinterpret_cast<T*>(const_cast<char*>(p));
}

// What a step's pointers() fills: reads(p) for memory it reads, writes(p) for memory it writes.
class pointer_list {
 public:
  template <class T>
  void reads(T*& p) {
    add(p, false);
  }
  template <class T>
  void writes(T*& p) {
    add(p, true);
  }
  // Every leaf of an evaluator (whatever has for_each_leaf) as read.
  template <class Ev>
  void reads_leaves(Ev& ev) {
    ev.for_each_leaf([&](auto& leaf) { reads(leaf.base); });
  }
  std::vector<pointer_field>& fields() { return fields_; }

 private:
  template <class T>
  void add(T*& p, bool w) {
    push({static_cast<void*>(&p), reinterpret_cast<char const*>(p), w, &set_pointer_field<T>});
  }
  // Out of line: every step's pointers() adds its fields one by one, and the vector's inlined
  // growth at each was most of that code.
  [[gnu::noinline]] void push(pointer_field const& f) { fields_.push_back(f); }
  std::vector<pointer_field> fields_;
};

// A recorded piece of work.
struct replay_step {
  virtual ~replay_step() = default;
  virtual void run() = 0;
  virtual void pointers(pointer_list& v) = 0;
};

// A step's state: S has run() and pointers(pointer_list&).
template <class S>
concept step_state = requires(S& s, pointer_list& v) {
  s.run();
  s.pointers(v);
};

template <step_state S>
struct step_of final : replay_step {
  S state;
  explicit step_of(S&& s) : state(std::move(s)) {}
  void run() override { state.run(); }
  void pointers(pointer_list& v) override { state.pointers(v); }
};

struct recording {
  std::vector<std::unique_ptr<replay_step>> steps;  // in the order they ran
  std::vector<std::shared_ptr<buffer>> allocated;   // every buffer allocated while recording
  std::string unreplayable;                         // why not, if a replay would be wrong
};

inline recording*& active_recording() {
  thread_local recording* r = nullptr;
  return r;
}

// Installs a recording (or, with nullptr, none) for the lifetime of the guard.
using recording_scope = slot_scope<recording, active_recording>;

// Appends step to r and runs it (not recorded again): compiled once for every kind of step.
[[gnu::noinline]] inline void record_and_run(recording& r, std::unique_ptr<replay_step> step) {
  replay_step& s = *step;
  r.steps.push_back(std::move(step));
  recording_scope pause(nullptr);
  s.run();
}

// Runs s now; while recording, as a recorded step (s is moved into it). A step's own work is
// never recorded again: it is part of the step.
template <step_state S>
void run_step(S& s) {
  recording* r = active_recording();
  if (!r) return s.run();
  record_and_run(*r, std::make_unique<step_of<S>>(std::move(s)));
}

// Marks the active recording, if any, as one a replay would get wrong (what says why).
inline void note_unreplayable(char const* what) {
  if (recording* r = active_recording(); r && r->unreplayable.empty()) r->unreplayable = what;
}

// n copies of v from p: zeros, ones and full, and empty outputs of reductions and products.
template <class T>
struct fill_step {
  T* p;
  std::size_t n;
  T v;
  void run() {
    for (std::size_t i = 0; i < n; ++i) p[i] = v;
  }
  void pointers(pointer_list& l) { l.writes(p); }
};

template <class T>
void fill_values(T* p, std::size_t n, T v) {
  fill_step<T> s{p, n, v};
  run_step(s);
}

// Values written on the host when an array was made (arange, a list of values): replayed as a
// copy of what was written, so that the array holds them again wherever a replay puts it.
template <class T>
struct restore_step {
  T* p;
  std::vector<T> values;
  void run() {
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  }
  void pointers(pointer_list& l) { l.writes(p); }
};

template <class T>
void note_host_written(T* p, std::size_t n) {
  if (!active_recording()) return;
  restore_step<T> s{p, std::vector<T>(p, p + n)};
  run_step(s);
}

}  // namespace zenith::detail
