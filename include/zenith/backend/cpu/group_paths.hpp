#pragma once
// The cotangents of a function's result in one loop of the gradient's group (fused_group.hpp):
// one element of Paths per (leaf, cotangent) pair of the reverse pass (autodiff/collect.hpp),
// each stored into its leaf's running sum, or added to it where an earlier path reached the same
// buffer. A piece runs every taken path in turn, each with store_loop's body for its expression
// (group_store.hpp), so the results are bitwise those of one store_loop per path; what the loop
// saves is the rest that each of those compiled (its set-up, its runner, its place in the group).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "fused_group.hpp"
#include "group_store.hpp"

namespace zenith::detail {

// A path's store: the leaf's element type T and the cotangent expression X computed for it.
template <class T, class X>
struct path_store {
  using value_type = T;
  using expr = X;
};

template <class... Ps>
class paths_loop final : public fused_group::loop {
  template <class P>
  struct slot {
    using T = typename P::value_type;
    using X = typename P::expr;
    using L = store_loop<T, X>;
    using Ev = typename L::Ev;
    std::optional<X> expr;  // keeps every buffer the evaluator reads alive
    std::optional<Ev> ev;
    T* out = nullptr;
    bool unit = false, add = false;
  };
  using evaluators = std::tuple<std::optional<typename slot<Ps>::Ev>...>;

 public:
  template <std::size_t I>
  using value_type = typename std::tuple_element_t<I, std::tuple<Ps...>>::value_type;
  template <std::size_t I>
  static constexpr bool can_accumulate =
      slot<std::tuple_element_t<I, std::tuple<Ps...>>>::L::can_accumulate;

  // Elements every taken path covers (0 while none is taken).
  std::int64_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

  // Takes path I's cotangent x: false, and nothing taken, when x's leaves do not coalesce to one
  // row or it has another size than the paths taken. Its output is given after (set_output), or
  // it is dropped again.
  // x is moved into the loop, and back where it is not taken.
  template <std::size_t I, class X>
  bool take(X& x) {
    auto& s = std::get<I>(slots_);
    std::int64_t n = std::int64_t(x.shape().numel());
    if (n == 0 || (n_ != 0 && n != n_)) return false;
    s.expr.emplace(std::move(x));
    s.ev.emplace(make_evaluator(*s.expr));
    // A rank-0 cotangent (a scalar parameter's) is a row of one element.
    zenith::shape row = x.shape();
    if (row.empty()) row = {1};
    auto unit = coalesce_to_row(*s.ev, row);
    if (!unit) {
      s.ev.reset();
      x = std::move(*s.expr);
      s.expr.reset();
      return false;
    }
    s.unit = *unit;
    n_ = n;
    ++taken_;
    return true;
  }
  // Path I stores into out (adds to what it holds, when add).
  template <std::size_t I>
  void set_output(value_type<I>* out, bool add) {
    auto& s = std::get<I>(slots_);
    s.out = out;
    s.add = add;
  }
  // Gives path I's cotangent back into x.
  template <std::size_t I, class X>
  void drop(X& x) {
    auto& s = std::get<I>(slots_);
    if (!s.ev) return;
    if (--taken_ == 0) n_ = 0;
    s.ev.reset();
    x = std::move(*s.expr);
    s.expr.reset();
  }

  std::unique_ptr<fused_group::runner> start() override {
    return std::make_unique<piece_runner>(*this);
  }
  void pointers(pointer_list& l) override {
    each([&](auto& s) {
      if (!s.ev) return;
      l.writes(s.out);
      l.reads_leaves(*s.ev);
    });
  }
  void run(std::int64_t lo, std::int64_t hi, bool alone) override {
    if (alone) {
      each([&](auto& s) {
        if (s.ev)
          std::remove_cvref_t<decltype(s)>::L::run_piece(*s.ev, s.out, s.unit, s.add, lo, hi);
      });
      return;
    }
    piece_runner(*this).run(lo, hi);
  }

 private:
  // Each thread's share runs on its own copies of the evaluators.
  struct piece_runner final : fused_group::runner {
    paths_loop& loop;
    evaluators evs;
    explicit piece_runner(paths_loop& l) : loop(l) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((std::get<I>(evs) = std::get<I>(l.slots_).ev), ...);
      }
      (std::index_sequence_for<Ps...>{});
    }
    void run(std::int64_t lo, std::int64_t hi) override {
      [&]<std::size_t... I>(std::index_sequence<I...>) { (run_one<I>(lo, hi), ...); }
      (std::index_sequence_for<Ps...>{});
    }
    template <std::size_t I>
    void run_one(std::int64_t lo, std::int64_t hi) {
      auto& s = std::get<I>(loop.slots_);
      auto& ev = std::get<I>(evs);
      if (ev) std::remove_cvref_t<decltype(s)>::L::run_piece(*ev, s.out, s.unit, s.add, lo, hi);
    }
  };

  template <class F>
  void each(F&& f) {
    std::apply([&](auto&... s) { (f(s), ...); }, slots_);
  }

  std::tuple<slot<Ps>...> slots_;
  std::int64_t n_ = 0;
  std::size_t taken_ = 0;
};

}  // namespace zenith::detail
