#pragma once
// The group's elementwise loop (fused_group.hpp): out = e over the group's elements, or
// out += e, a further cotangent added to a buffer's running sum in the same loop; and the ways
// the reverse pass queues one (a fresh array, an array in place, an addition).
#include <cstdint>
#include <memory>
#include <utility>

#include "evaluate.hpp"
#include "evaluator.hpp"
#include "fused_group.hpp"
#include "fused_loop.hpp"

namespace zenith::detail {

// run_row (fused_loop.hpp) for store_loop's contiguous destination, which may add to what out
// holds: out[j] + e[j] when `add` (adds_in_place_v). A flag, not a template parameter: the loop
// that adds a further cotangent of a buffer to its running sum is the one that would store it
// fresh, compiled once for both (the sum rounds as the expression out + e would).
template <row_access A, bool Unroll = true, class T, class Ev>
inline void store_row(T* __restrict out, Ev const& ev, std::int64_t j, std::int64_t j_end,
                      bool add) {
  if constexpr (!adds_in_place_v<T, Ev>) {
    run_row<A, Unroll>(out, 1, ev, j, j_end, true);
  } else {
    using B = decltype(ev.template simd<A>(j));
    constexpr std::int64_t W = std::int64_t(B::size);
    auto put = [&](B b, std::int64_t at) {
      if (add) b = ops::add::simd(B::load_unaligned(out + at), b);
      b.store_unaligned(out + at);
    };
    if constexpr (Unroll) {  // four independent batches per iteration, as run_row
      for (; j + 4 * W <= j_end; j += 4 * W) {
        auto b0 = ev.template simd<A>(j);
        auto b1 = ev.template simd<A>(j + W);
        auto b2 = ev.template simd<A>(j + 2 * W);
        auto b3 = ev.template simd<A>(j + 3 * W);
        put(b0, j);
        put(b1, j + W);
        put(b2, j + 2 * W);
        put(b3, j + 3 * W);
      }
    }
    for (; j + W <= j_end; j += W) put(ev.template simd<A>(j), j);
    for (; j < j_end; ++j)
      out[j] = add ? ops::add::apply(out[j], T(ev.scalar(j))) : T(ev.scalar(j));
  }
}

// out[i] = e[i], for i in the block; or out[i] += e[i] (accumulate()).
template <class T, class E>
class store_loop final : public fused_group::loop {
 public:
  using Ev = decltype(make_evaluator(std::declval<E const&>()));
  static constexpr bool can_accumulate = adds_in_place_v<T, Ev>;

  // e is copied once, into the loop (which outlives the caller's expression).
  store_loop(E const& e, T* out) : expr_(e), ev_(make_evaluator(expr_)), out_(out) {}
  // Coalesces the evaluator; false when e cannot be walked as one row (coalesce_to_row).
  bool prepare(zenith::shape const& s) {
    auto unit = coalesce_to_row(ev_, s);
    unit_ = unit.value_or(false);
    return unit.has_value();
  }

  void set_output(T* out) { out_ = out; }
  // Adds e to what the output holds instead of overwriting it.
  void accumulate() requires can_accumulate { add_ = true; }

  // The loop's expression evaluated into out (e's shape) by the ordinary fused loop, for an
  // expression that cannot join a group (call before prepare()).
  void evaluate_into(array<T>& out) { run_fused(contiguous_dest(out), ev_, out.shape()); }

  std::unique_ptr<fused_group::runner> start() override {
    return std::make_unique<piece_runner>(ev_, out_, unit_, add_);
  }
  void pointers(pointer_list& l) override {
    l.writes(out_);
    l.reads_leaves(ev_);
  }
  void run(std::int64_t lo, std::int64_t hi, bool alone) override {
    if (alone) return run_piece(ev_, out_, unit_, add_, lo, hi);
    Ev ev = ev_;
    run_piece(ev, out_, unit_, add_, lo, hi);
  }

 private:
  struct piece_runner final : fused_group::runner {
    Ev ev;
    T* out;
    bool unit, add;
    piece_runner(Ev const& e, T* o, bool u, bool a) : ev(e), out(o), unit(u), add(a) {}
    void run(std::int64_t lo, std::int64_t hi) override { run_piece(ev, out, unit, add, lo, hi); }
  };

 public:
  // out[lo, hi) = e there (or +=, when add), on the evaluator ev (coalesced by prepare()): also
  // the body of each cotangent in a paths_loop (group_paths.hpp). Flattened, as the loop over a
  // piece is all there is to inline into.
  [[gnu::flatten]] static void run_piece(Ev& ev, T* out, bool unit, bool add, std::int64_t lo,
                                         std::int64_t hi) {
    std::array<std::int64_t, max_rank> idx{};
    bool const kept = start_kept(ev, idx.data());
    if constexpr (fused_simd_v<T, Ev>) {
      if (simd_enabled()) {
        // A costly body is compiled once, rolled, for one row access (costly_batch_v), unless
        // its costly values are all kept ones, read from the piece (costly_kept_v).
        if constexpr (!costly_batch_v<Ev>) {
          if (unit) return store_row<row_access::unit>(out, ev, lo, hi, add);
          return store_row<row_access::unit_or_broadcast>(out, ev, lo, hi, add);
        } else {
          if constexpr (!costly_kept_v<Ev>) {
            if (kept && unit) return store_row<row_access::kept_unit>(out, ev, lo, hi, add);
            if (kept) return store_row<row_access::kept_unit_or_broadcast>(out, ev, lo, hi, add);
          }
          return store_row<row_access::unit_or_broadcast, false>(out, ev, lo, hi, add);
        }
      }
    }
    run_row_scalar(out, ev, lo, hi, add);
  }

 private:
  E expr_;  // keeps every buffer the evaluator reads alive
  Ev ev_;
  T* out_;
  bool unit_ = false;
  bool add_ = false;
};

// out = e, a fresh array: queued in the group when e can join it (then out is computed when the
// group runs, and the flag is true), else evaluated now. Either way e's evaluator, and so any
// barrier inside e, is built once.
template <element T, expression E>
std::pair<array<T>, bool> store_or_evaluate(fused_group& group, E const& e) {
  if (device d = device_of(e); d != cpu) return {evaluate_on<T>(d, e), false};  // CPU loops
  zenith::shape s = e.shape();
  std::int64_t n = std::int64_t(s.numel());
  auto l = group.template make<store_loop<T, E>>(e, nullptr);
  auto out = array<T>::empty(s);
  if (n > 0 && (group.empty() || group.size() == n) && l->prepare(s)) {
    l->set_output(out.data());
    group.add(std::move(l), n);
    return {std::move(out), true};
  }
  l->evaluate_into(out);
  return {std::move(out), false};
}

// dst = e in place (e has dst's shape and reads dst only at the same index): queued when e can
// join the group, else run now, after what the group holds (dst may be one of its outputs).
// Either way e's evaluator, and so any barrier inside e, is built once.
template <element T, expression E>
void store_into(fused_group& group, array<T>& dst, E const& e) {
  std::int64_t n = std::int64_t(dst.size());
  auto l = group.template make<store_loop<T, E>>(e, dst.data());
  if (n > 0 && (group.empty() || group.size() == n) && l->prepare(dst.shape())) {
    group.add(std::move(l), n);
    return;
  }
  group.run();
  l->evaluate_into(dst);
}

// dst += e, in the group's pass (e has dst's shape, its compute type is T, and it does not read
// dst); false, and nothing queued, when e cannot join the group.
template <element T, expression E>
bool add_into(fused_group& group, array<T>& dst, E const& e) {
  static_assert(store_loop<T, E>::can_accumulate);
  std::int64_t n = std::int64_t(dst.size());
  if (n == 0) return true;
  if (!group.empty() && group.size() != n) return false;
  auto l = group.template make<store_loop<T, E>>(e, dst.data());
  if (!l->prepare(dst.shape())) return false;
  l->accumulate();
  group.add(std::move(l), n);
  return true;
}

}  // namespace zenith::detail
