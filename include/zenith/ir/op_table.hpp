#pragma once
// A table of functions by (op name, dtype): what the IR's interpreter and rules find an op's
// kernel or derivative rule in.
//
// The entries are registered as a program emits ops (expr/to_ir.hpp calls ir::detail::op_emitted
// for each elementwise op and reduction it records, with its element type), not compiled for
// every op and dtype in every program that runs IR: a program compiles the kernels and rules of
// the ops it uses. A graph built by hand (graph::add_equation) names ops no emitter registered:
// ir::register_all() registers every op (ir::run, append_vjp and append_jvp call it, so that they
// take any graph).
#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../core/dtype.hpp"
#include "../core/error.hpp"

namespace zenith::ir::detail {

template <class Fn>
class op_table {
 public:
  // Adds f for (op, d); a second registration of the same pair keeps the first. op is kept as
  // it is: a name with static storage (an op tag's name, a literal).
  void add(std::string_view op, zenith::dtype d, Fn f) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = size_.load(std::memory_order_relaxed);
    for (std::size_t k = 0; k < n; ++k)
      if (entries_[k].d == d && entries_[k].op == op) return;
    if (n == capacity)
      throw std::logic_error("zenith: more than " + std::to_string(capacity) +
                             " kernels of one kind registered (ir/op_table.hpp)");
    entries_[n] = {op, d, f};
    size_.store(n + 1, std::memory_order_release);  // the entry is complete before it is seen
  }
  // The function of (op, d), or nullptr. Lock-free: entries are never moved or changed once
  // published, and the interpreter looks one up per equation it runs.
  Fn find(std::string_view op, zenith::dtype d) const {
    std::size_t n = size_.load(std::memory_order_acquire);
    for (std::size_t k = 0; k < n; ++k)
      if (entries_[k].d == d && entries_[k].op == op) return entries_[k].f;
    return nullptr;
  }

 private:
  // Every op of the catalogue for every dtype is a few hundred entries.
  static constexpr std::size_t capacity = 1024;
  struct entry {
    std::string_view op;
    zenith::dtype d{};  // all-zero entries: the table is zero-initialised (bss, not data)
    Fn f = nullptr;
  };
  std::mutex mutex_;  // writers
  std::atomic<std::size_t> size_{0};
  std::array<entry, capacity> entries_;
};

// The one table of functions of type Fn (each kind of entry has its own signature).
template <class Fn>
op_table<Fn>& table_of() {
  static op_table<Fn> t;
  return t;
}

// Adds function F to its table under (op, d) the first time it runs: emitters call it each time
// they record the op, so after the first a static's guard is all it costs. Out of line: each
// emitter of each expression type calls it, and inlined, its guard's locking and unwinding code
// was most of an emitter's code.
template <auto F>
[[gnu::noinline]] void add_once(std::string_view op, zenith::dtype d) {
  static bool const once = (table_of<decltype(F)>().add(op, d, F), true);
  (void)once;
}

// The error for an op whose kernel or rule no emitter registered (what: "kernel", "reverse
// rule", ...). Cold, and one function for every table.
[[noreturn]] inline void fail_unregistered(std::string_view what, std::string_view op,
                                           zenith::dtype d) {
  throw value_error("ir: no " + std::string(what) + " of op " + std::string(op) + " for " +
                    std::string(dtype_name(d)) +
                    " is registered (a program registers the ops it emits; for a graph built by "
                    "hand, call zn::ir::register_all())");
}

}  // namespace zenith::ir::detail

namespace zenith::ir {

// Registers every op for every dtype (autodiff/ir_ops.hpp defines it).
template <class = void>
void register_all();

}  // namespace zenith::ir
