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
#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

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
    if (deferred_n_ != 0) flush();  // cotangents deferred by take_paths come first
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

  // For the cotangents of a function's result taken as pairs (autodiff/take_paths.hpp):

  // Whether a cotangent of buffer b is kept (b is traced by this trace).
  bool accepts(buffer const* b) const { return st_->reads_traced(b); }

  // Where a cotangent of shape s computed by a loop of the group goes, for buffer b: a fresh
  // running sum to store into, allocated now and filled when the loop runs ({out, false}), or
  // b's running sum, added to in place ({out, true}, when can_add and the sum is this store's
  // own, as add_further). nullopt when it must be computed apart and added as an array.
  template <class T>
  std::optional<std::pair<T*, bool>> claim(buffer const* b, zenith::shape const& s, bool can_add) {
    if (has_deferred<T>(b)) return std::nullopt;
    auto& slot = slots<T>()[b];
    if (!slot) {
      slot = array<T>::empty(s);
      queued_.insert(slot->storage().get());
      return std::pair{slot->data(), false};
    }
    auto const& buf = slot->storage();
    bool own = queued_.contains(buf.get()) ||
               (buf && buf->owned() && buf.use_count() == 1 && slot->device() == cpu);
    if (!can_add || !own || slot->shape() != s) return std::nullopt;
    queued_.insert(buf.get());
    return std::pair{slot->data(), true};
  }
  // A loop of the group's type L, in the group's arena while it has room.
  template <class L>
  auto make_loop() {
    return group_.template make<L>();
  }
  // Queues a loop over n elements (whose outputs claim() gave), after running what the group
  // holds where that has another size.
  void submit(zenith::detail::fused_group::loop_ptr l, std::int64_t n) {
    make_room(n);
    group_.add(std::move(l), n);
    ++submitted_;
  }
  // ct, computed apart, added to leaf's cotangent (compiled once per element type); after the
  // sums still to come for leaf (defer_add), where it has some.
  template <element T>
  void add_array(array<T> const& leaf, array<T> const& ct) {
    if (has_deferred<T>(leaf.storage().get()))
      push_deferred<T>({leaf, ct, std::nullopt, submitted_});
    else
      add_grouped(leaf, ct);
  }
  // values (which the loop submitted next stores), summed to shape `to` where given, added to
  // leaf's cotangent once that loop has run, in order with the other deferred ones.
  template <element T>
  void defer_add(array<T> const& leaf, array<T> values, std::optional<zenith::shape> to) {
    push_deferred<T>({leaf, std::move(values), std::move(to), submitted_ + 1});
  }
  // Whether a cotangent of b is still to be added after the group runs: a later one then waits
  // its turn too.
  template <element T>
  bool has_deferred(buffer const* b) {
    for (auto const& d : deferred<T>())
      if (d.leaf.storage().get() == b) return true;
    return false;
  }
  // ct recorded by the enclosing trace and added to leaf's cotangent (transforms nest).
  template <int Level, class Leaf, class G>
  void add_nested(Leaf const& leaf, G const& ct) {
    add_recorded<Level>(leaf, ct);
  }

  // Computes everything queued.
  void flush() {
    queued_.clear();
    group_.run();
    // By the element types that deferred any (only those compile the sum).
    for (std::size_t i = 0; i < drains_.size(); ++i) drains_[i](*this);
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

  // A cotangent added after the group runs: values, summed to `to` where given, once the loop
  // that stores them (the loop-th one submitted) has run.
  template <class T>
  struct deferred_add {
    array<T> leaf, values;
    std::optional<zenith::shape> to;
    std::size_t loop;
  };
  template <class T>
  std::vector<deferred_add<T>>& deferred() {
    return std::get<std::vector<deferred_add<T>>>(deferred_);
  }
  template <class T>
  void push_deferred(deferred_add<T> d) {
    deferred<T>().push_back(std::move(d));
    ++deferred_n_;
    void (*drain)(cotangents&) = [](cotangents& c) { c.add_deferred<T>(); };
    if (std::find(drains_.begin(), drains_.end(), drain) == drains_.end()) drains_.push_back(drain);
  }
  // Adds the deferred cotangents whose loops have run, in order (up to the first whose loop is
  // still to be submitted).
  template <class T>
  void add_deferred() {
    auto& all = deferred<T>();
    std::size_t k = 0;
    while (k < all.size() && all[k].loop <= submitted_) ++k;
    if (k == 0) return;
    std::vector<deferred_add<T>> list(std::make_move_iterator(all.begin()),
                                      std::make_move_iterator(all.begin() + std::ptrdiff_t(k)));
    all.erase(all.begin(), all.begin() + std::ptrdiff_t(k));
    deferred_n_ -= k;
    for (auto& d : list) {
      if (d.to)
        add_grouped(d.leaf,
                    zenith::detail::evaluate_sum_to(sum_to_node<array<T>>(d.values, *d.to)));
      else
        add_grouped(d.leaf, d.values);
    }
  }

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
  std::tuple<std::vector<deferred_add<float>>, std::vector<deferred_add<double>>,
             std::vector<deferred_add<bfloat16>>, std::vector<deferred_add<float16>>>
      deferred_;
  std::vector<void (*)(cotangents&)> drains_;
  std::size_t deferred_n_ = 0;  // deferred cotangents not yet added
  std::size_t submitted_ = 0;   // loops submitted
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
