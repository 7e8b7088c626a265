#pragma once
// The tape: the runtime half of reverse mode, for code that materializes intermediates.
//
//   for (auto const& w : ws) h = zn::tanh(zn::matmul(h, w));   // inside a function given to grad
//
// While a trace is active (core/trace.hpp), materializing an expression that reads a traced
// buffer records it as IR (autodiff/ir_tape.hpp); the trace's tape lists the runs of recorded
// equations, and the entries of checkpointed functions and custom rules, in recording order.
//
// The backward pass runs the static pass over the function's result (autodiff/backward.hpp),
// then pulls the entries newest first. Cotangents are accumulated per traced buffer (this file's
// sink), so an array read in several places, or by several entries, sums its contributions.
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "../backend/cpu/evaluate.hpp"
#include "../backend/cpu/fused_group.hpp"
#include "../backend/cpu/group_store.hpp"
#include "../backend/cpu/group_total.hpp"
#include "../core/small_map.hpp"
#include "../core/trace.hpp"
#include "../expr/to_ir.hpp"
#include "backward.hpp"
#include "forward.hpp"
#include "ir_tape.hpp"
#include "memoize.hpp"
#include "node_ir.hpp"
#include "rules.hpp"

namespace zenith::autodiff {

// Cotangents per traced buffer (one map per floating element type), and the sink of the
// reverse pass: a leaf that reads a traced buffer adds its cotangent, evaluated in one fused
// pass (in place into the running sum when it can be). Cotangents of the same size are queued
// in one group (backend/cpu/fused_group.hpp) and computed together, in one pass over their
// inputs, when one is first read (take) or on flush.
class cotangents {
 public:
  // The derivative level of the cotangents this sink is given (backend/cpu/evaluate.hpp):
  // those of a function's result and of entries recorded from user code are level 1.
  static constexpr int level = 1;

  explicit cotangents(zenith::detail::trace_state const& st) : st_(&st) {}

  template <class Leaf, class G>
  void operator()(Leaf const& leaf, G const& ct) {
    add<level>(leaf, ct);
  }

  // Adds ct, a level-Level expression, to the cotangent of leaf.
  template <int Level, class Leaf, class G>
  void add(Leaf const& leaf, G const& ct) {
    if constexpr (is_array_v<Leaf> && floating_element<value_t<Leaf>>) {
      // An outer transform traces this pass (higher order): every cotangent is evaluated where
      // that trace records it, one at a time.
      if (zenith::detail::active_trace()) {
        add_recorded<Level>(leaf, ct);
        return;
      }
    }
    add_grouped(leaf, ct);
  }

 private:
  template <class Leaf, class G>
  void add_grouped(Leaf const& leaf, G const& ct) {
    if constexpr (is_sum_to_node_v<G>) {
      // Nothing to sum: the child is the cotangent. Else one loop over the child, then a
      // reduction shared by every cotangent of the type.
      if (!ct.reduces()) {
        add_grouped(leaf, ct.child);
      } else if (st_->reads_traced(leaf.storage().get())) {
        add_grouped(leaf, zenith::detail::evaluate_sum_to(ct));
      }
    } else if constexpr (is_array_v<Leaf> && floating_element<value_t<Leaf>>) {
      using T = value_t<Leaf>;
      buffer const* b = leaf.storage().get();
      if (!st_->reads_traced(b)) return;
      auto& slot = slots<T>()[b];
      if (slot) {
        add_further(*slot, ct);
      } else if constexpr (std::is_same_v<G, array<T>>) {
        slot = ct;
      } else if (device d = leaf.device(); d != cpu) {
        // On the leaf's device, even a cotangent that reads no array there (a constant).
        slot = zenith::detail::evaluate_on<T>(d, ct);
      } else if constexpr (barrier_expression<G>) {
        slot = zenith::detail::evaluate_untraced<T>(ct);  // the barrier's own result, no copy
      } else {
        make_room(std::int64_t(ct.shape().numel()));
        auto [out, queued] = zenith::detail::store_or_evaluate<T>(group_, ct);
        if (queued) queued_.insert(out.storage().get());
        slot = std::move(out);
      }
    }
  }

 public:
  // Queues the sum or mean of all of e with the cotangents (the value a gradient comes with);
  // nullopt when e cannot join a group. The result is computed on flush.
  template <class Op, element T, expression E>
  std::optional<array<T>> queue_total(E const& e, zenith::shape const& out_shape) {
    make_room(std::int64_t(e.shape().numel()));
    return zenith::detail::queue_total<Op, T>(group_, e, out_shape);
  }

  // Queues the sum or mean of all of e into value (one element); false when e cannot join a group.
  template <class Op, element T, expression E>
  bool queue_total_into(E const& e, array<T>& value) {
    make_room(std::int64_t(e.shape().numel()));
    return zenith::detail::queue_total_into<Op>(group_, e, value);
  }

  // How add_with_total took a cotangent.
  enum class joined { no, apart, with_total };

  // Takes ct as the first cotangent of leaf, computed in the same loop as value, the sum or mean
  // of all of e (autodiff/fused_value.hpp): one pass over the inputs for a loss and its
  // gradient. no: nothing done (ct is then given to operator() as any other); apart: ct taken
  // but computed on its own (its layout is not one row), the sum not queued.
  template <class Op, element T, expression E, class Leaf, class G>
  joined add_with_total(Leaf const& leaf, G const& ct, E const& e, array<T>& value) {
    if constexpr (is_sum_to_node_v<G>) {
      return ct.reduces() ? joined::no : add_with_total<Op>(leaf, ct.child, e, value);
    } else if constexpr (is_array_v<Leaf> && floating_element<value_t<Leaf>> && !is_array_v<G> &&
                         !barrier_expression<G>) {
      if (zenith::detail::active_trace()) return joined::no;
      using Tl = value_t<Leaf>;
      buffer const* b = leaf.storage().get();
      if (!st_->reads_traced(b) || slots<Tl>().find(b)) return joined::no;
      make_room(std::int64_t(ct.shape().numel()));
      auto r = zenith::detail::queue_total_with_store<Op, T, E, Tl>(group_, e, value, ct);
      if (!r) return joined::no;
      auto& [out, queued] = *r;
      if (queued) queued_.insert(out.storage().get());
      slots<Tl>()[b] = std::move(out);
      return queued ? joined::with_total : joined::apart;
    } else {
      return joined::no;
    }
  }

  // Computes everything queued.
  void flush() {
    queued_.clear();
    group_.run();
  }

  // The cotangent accumulated for buffer b, removed from the store (none if nothing reached b).
  template <class T>
  std::optional<array<T>> take(buffer const* b) {
    flush();
    auto& m = slots<T>();
    std::optional<array<T>>* slot = m.find(b);
    if (!slot) return std::nullopt;
    // Moved out as an array, not as an optional: GCC 12 warns, wrongly, that a moved optional's
    // payload may be uninitialized (-Wmaybe-uninitialized), which fails a user's -Werror build.
    if (!*slot) {
      m.erase(b);
      return std::nullopt;
    }
    array<T> ct = std::move(**slot);
    m.erase(b);
    return ct;
  }

 private:
  // A further read of a buffer: ct added to its running sum. In place, in the group's pass that
  // computes ct, where the sum is this store's own (allocated by the group, or held by nothing
  // else): the loop that would store ct fresh adds it instead (store_loop::accumulate), so no
  // loop is compiled for the sum's own expression. Else ct is computed on its own and added as an
  // array, an addition compiled once per element type.
  template <class T, class G>
  void add_further(array<T>& slot, G const& ct) {
    if constexpr (std::is_same_v<G, array<T>> || barrier_expression<G> ||
                  !zenith::detail::store_loop<T, G>::can_accumulate) {
      flush();
      zenith::detail::assign_rebind_untraced(slot, slot + ct, true);
    } else {
      auto const& buf = slot.storage();
      bool own = queued_.contains(buf.get()) ||
                 (buf && buf->owned() && buf.use_count() == 1 && slot.device() == cpu);
      if (own && slot.shape() == ct.shape()) {
        make_room(std::int64_t(slot.size()));
        if (zenith::detail::add_into(group_, slot, ct)) {
          queued_.insert(buf.get());
          return;
        }
      }
      flush();
      auto [c, queued] = zenith::detail::store_or_evaluate<T>(group_, ct);
      if (queued) flush();
      zenith::detail::assign_rebind_untraced(slot, slot + c, true);
    }
  }

  template <class T>
  using slot_map = zenith::detail::small_map<buffer const*, std::optional<array<T>>>;

  template <class T>
  slot_map<T>& slots() {
    return std::get<slot_map<T>>(slots_);
  }

  // The cotangent evaluated on its own, then added as an array: one sum type per element type.
  template <int Level, class Leaf, class G>
  void add_recorded(Leaf const& leaf, G const& ct) {
    using T = value_t<Leaf>;
    if (!st_->reads_traced(leaf.storage().get())) return;
    array<T> c = zenith::detail::evaluate_at_level<T, Level>(ct);
    auto& slot = slots<T>()[leaf.storage().get()];
    if (slot)
      slot = zenith::detail::evaluate_at_level<T, 1>(*slot + c);
    else
      slot = std::move(c);
  }

  // A group holds loops of one size: one of another size runs it first.
  void make_room(std::int64_t n) {
    if (!group_.empty() && group_.size() != n) flush();
  }

  zenith::detail::trace_state const* st_;
  zenith::detail::fused_group group_;
  zenith::detail::small_set<buffer const*>
      queued_;  // slots the group allocated (private to this store)
  std::tuple<slot_map<float>, slot_map<double>, slot_map<bfloat16>, slot_map<float16>> slots_;
};

// Pulls the tape, newest entry first. A gradient consumes it (each entry, and so what it keeps
// alive, is freed once pulled); a vjp pullback keeps it to be called again.
enum class tape_use { consume, keep };

inline void pull_tape(zenith::detail::trace_state& st, cotangents& cts, tape_use use) {
  if (use == tape_use::consume) {
    while (!st.tape.empty()) {
      st.tape.back()->pull(cts);
      st.tape.back()->forget(st, nullptr);  // what it kept for this pass is freed now
      st.tape.pop_back();
    }
  } else {
    for (auto it = st.tape.rbegin(); it != st.tape.rend(); ++it) (*it)->pull(cts);
  }
}

// The sink of a level-Level entry's reverse pass: cts, told that the cotangents it gets are one
// level deeper than the entry's expression.
template <int Level>
struct sink_at {
  static constexpr int level = Level;
  cotangents& cts;
  template <class Leaf, class G>
  void operator()(Leaf const& leaf, G const& ct) {
    cts.template add<Level>(leaf, ct);
  }
};

}  // namespace zenith::autodiff
