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
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "../core/dtype.hpp"

namespace zenith::ir::detail {

template <class Fn>
class op_table {
 public:
  // Adds f for (op, d); a second registration of the same pair keeps the first.
  void add(std::string_view op, zenith::dtype d, Fn f) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (entry const& e : entries_)
      if (e.d == d && e.op == op) return;
    entries_.push_back({std::string(op), d, f});
  }
  // The function of (op, d), or nullptr.
  Fn find(std::string_view op, zenith::dtype d) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (entry const& e : entries_)
      if (e.d == d && e.op == op) return e.f;
    return nullptr;
  }

 private:
  struct entry {
    std::string op;
    zenith::dtype d;
    Fn f;
  };
  mutable std::mutex mutex_;
  std::vector<entry> entries_;
};

// The one table of functions of type Fn (each kind of entry has its own signature).
template <class Fn>
op_table<Fn>& table_of() {
  static op_table<Fn> t;
  return t;
}

}  // namespace zenith::ir::detail

namespace zenith::ir {

// Registers every op for every dtype (autodiff/ir_ops.hpp defines it).
template <class = void>
void register_all();

}  // namespace zenith::ir
