#pragma once
// The group's sum (fused_group.hpp): the sum or mean of every element of an expression, in
// blocks of the group's pass, combined as reduce.hpp combines them; and the loop that also
// stores a cotangent in the same SIMD iteration, for a loss and one of its gradients read in one
// pass.
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "../../core/small_vector.hpp"
#include "evaluate.hpp"
#include "evaluator.hpp"
#include "fused_group.hpp"
#include "fused_loop.hpp"
#include "group_piece.hpp"
#include "reduce.hpp"

namespace zenith::detail {

// The second output of a reduce_loop: out = g over the same elements, computed in the same SIMD
// iteration as the sum, so that one pass reads the inputs both need (a value and its gradient).
// Stores on run_row's grid (fused_loop.hpp): the same batches, the same scalar tail.
template <class Tc, class G>
struct store_part {
  using value_type = Tc;
  using Ev = decltype(make_evaluator(std::declval<G const&>()));
  static constexpr bool can_simd = fused_simd_v<Tc, Ev>;

  G expr;  // keeps every buffer the evaluator reads alive
  Ev ev;
  Tc* out = nullptr;

  explicit store_part(G const& g) : expr(g), ev(make_evaluator(expr)) {}

  // Writes with row access A. Each row gets its own copy of the evaluator (row()), as each
  // piece gets one of store_loop's: the stores then cannot alias what the evaluator holds (its
  // scalars), so the compiler keeps those in registers instead of reloading them after every
  // store.
  template <row_access A>
  struct cursor {
    using evaluator = Ev;
    Ev const& ev;
    Tc* out;
    struct row_writer {
      Ev ev;
      Tc* __restrict out;
      void start_row(std::int64_t const* idx, std::size_t n) { ev.start_row(idx, n); }
      void batch(std::int64_t j) { ev.template simd<A>(j).store_unaligned(out + j); }
      void scalar(std::int64_t j) { out[j] = Tc(ev.scalar(j)); }
    };
    row_writer row() const { return {ev, out}; }
  };
};
struct no_store_part {
  using Ev = leaf_eval<float>;  // stands for no evaluator (not costly_batch_v)
};

// The sums of a reduce_loop's blocks combined in reduce.hpp's pairwise tree (split at
// lo + (hi - lo) / 2, cut all the way down to single blocks) and finalized into *out: compiled
// once per reduction and type, whatever the expression.
template <class Op, class K, class Blocks, class T>
[[gnu::noinline]] void finish_blocks(Blocks const& blocks, std::int64_t count, T* out) {
  if (blocks.size() == 1) {  // nothing to combine (and no vector to allocate)
    *out = T(Op::finalize(blocks[0].result(), std::size_t(count)));
    return;
  }
  constexpr std::size_t max_depth = 64;  // deeper than any tree of blocks
  std::vector<typename K::state> states(blocks.size());
  for (std::size_t b = 0; b < blocks.size(); ++b) states[b] = blocks[b].result();
  std::size_t k = 0;
  auto& s = red::combine_tasks(0, std::int64_t(states.size()), max_depth, states.data(), k,
                               [](auto& a, auto const& b) { a = K::merge(a, b); });
  *out = T(Op::finalize(s, std::size_t(count)));
}

// A whole-array sum or mean of e, written to out[0] when the group finishes; with a store_part S,
// also S's elementwise output.
template <class Op, class T, class E, class S = no_store_part>
class reduce_loop final : public fused_group::loop {
 public:
  using Ev = decltype(make_evaluator(std::declval<E const&>()));
  using A = typename Ev::compute_type;
  using K = red::kernel_for<Op, A>;
  // As reduce.hpp decides for the same sum: SIMD when the compute type is the lane type.
  using In = compute_t<value_t<E>>;
  static constexpr bool can_simd = !std::is_same_v<In, bool> && simd_type_v<In> &&
                                   std::is_same_v<A, In> && Ev::template vectorizable<In>();
  static constexpr bool has_store = !std::is_same_v<S, no_store_part>;

  // e and the store part's expression (store: what S is built from) are copied once, into the
  // loop, which outlives the caller's expressions; the evaluators are built in place.
  template <class... StoreArgs>
  reduce_loop(E const& e, T* out, std::int64_t n, StoreArgs const&... store)
      : expr_(e), ev_(make_evaluator(expr_)), out_(out), store_(store...) {
    g_.n = 1;
    g_.dims[0] = n;
    g_.nr = 1;
    g_.count = n;
    blocks_.resize(std::size_t((n + group_block - 1) / group_block));
  }
  // Coalesces the evaluators to one row; false when either cannot be walked as one row
  // (coalesce_to_row), or, with a store part, when a leaf is read by broadcast: the pair compiles
  // one loop body, for unit strides, and a pair with a broadcast leaf runs apart
  // (evaluate_store_into).
  bool prepare(zenith::shape const& s) {
    auto unit = coalesce_to_row(ev_, s);
    if (!unit) return false;
    unit_ = *unit;
    if constexpr (has_store) {
      auto store_unit = coalesce_to_row(store_.ev, s);
      if (!store_unit) return false;
      unit_ = unit_ && *store_unit;
      store_in_row_ = true;
      return unit_;
    }
    return true;
  }

  // The store part evaluated into out (its shape) by the ordinary fused loop, for a pair that
  // cannot join a group (after a failed prepare()): over out's elements as one row where
  // prepare() coalesced the store part's leaves to it.
  template <class Tc>
  void evaluate_store_into(array<Tc>& out) requires has_store {
    if (!store_in_row_) return run_fused(contiguous_dest(out), store_.ev, out.shape());
    zenith::shape row{out.size()};
    run_fused(dest_view<Tc>{out.data(), row_major_strides(row)}, store_.ev, row);
  }

  void set_output(T* out) { out_ = out; }
  template <class Tc>
  void set_store_output(Tc* out) requires has_store {
    store_.out = out;
  }

  std::unique_ptr<fused_group::runner> start() override {
    return std::make_unique<piece_runner>(*this);
  }
  void pointers(pointer_list& l) override {
    l.writes(out_);
    l.reads_leaves(ev_);
    if constexpr (has_store) {
      l.writes(store_.out);
      l.reads_leaves(store_.ev);
    }
  }
  void run(std::int64_t lo, std::int64_t hi, bool alone) override {
    if (alone) return run_piece(ev_, lo, hi);
    Ev ev = ev_;
    run_piece(ev, lo, hi);
  }

  void finish() override { finish_blocks<Op, K>(blocks_, g_.count, out_); }

 private:
  struct piece_runner final : fused_group::runner {
    reduce_loop& loop;
    Ev ev;
    explicit piece_runner(reduce_loop& l) : loop(l), ev(l.ev_) {}
    void run(std::int64_t lo, std::int64_t hi) override { loop.run_piece(ev, lo, hi); }
  };

  // Adds elements [lo, hi) to their block's sum, and stores the store part's elements (flattened,
  // as store_loop's).
  [[gnu::flatten]] void run_piece(Ev& ev, std::int64_t lo, std::int64_t hi) {
    std::array<std::int64_t, max_rank> idx{};
    auto& acc = blocks_[std::size_t(lo / group_block)];
    if (lo % group_block == 0) acc = {};
    bool simd = can_simd && simd_enabled();
    if constexpr (has_store) {  // every stride is 1 (prepare())
      red::accumulate_a<Op, K, can_simd, row_access::unit>(acc, ev, g_, idx.data(), lo, hi, simd,
                                                           side<row_access::unit>());
    } else {
      // Every leaf's stride is 1 or 0 (prepare()); with 1 only, a costly body gains nothing from
      // the plain loads that is worth a second copy of it (costly_batch_v).
      if constexpr (can_simd && !costly_batch_v<Ev>) {
        if (simd && unit_)
          return red::accumulate_a<Op, K, true, row_access::unit>(acc, ev, g_, idx.data(), lo, hi,
                                                                  true);
      }
      red::accumulate_a<Op, K, can_simd, row_access::unit_or_broadcast>(acc, ev, g_, idx.data(), lo,
                                                                        hi, simd);
    }
  }

  // What accumulate_a writes beside the sum: the store part through row access Acc, or nothing.
  template <row_access Acc>
  auto side() const {
    if constexpr (has_store)
      return typename S::template cursor<Acc>{store_.ev, store_.out};
    else
      return red::no_side_store{};
  }

  E expr_;
  Ev ev_;
  T* out_;
  red::geometry g_;
  small_vector<red::block_acc<Op, K, A>, 1> blocks_;  // each block's sum so far
  bool unit_ = false;
  bool store_in_row_ = false;  // the store part's leaves coalesced to one row (prepare())
  [[no_unique_address]] S store_;
};

// The reductions a group's loop computes: a sum or a mean of every element.
template <class Op>
concept sum_or_mean = std::is_same_v<Op, ops::reduce_sum> || std::is_same_v<Op, ops::reduce_mean>;

// A loop for the sum or mean of every element of e, prepared to join the group; null when e
// cannot join it.
template <sum_or_mean Op, element T, expression E>
fused_group::owned<reduce_loop<Op, T, E>> prepared_total(fused_group& group, E const& e) {
  using L = fused_group::owned<reduce_loop<Op, T, E>>;
  zenith::shape s = e.shape();
  std::int64_t n = std::int64_t(s.numel());
  if (n == 0 || (!group.empty() && group.size() != n)) return L(nullptr, {});
  auto l = group.template make<reduce_loop<Op, T, E>>(e, nullptr, n);
  if (!l->prepare(s)) return L(nullptr, {});
  return l;
}

// Queues the sum or mean of every element of e into value (one element, already allocated);
// false, and nothing queued, when e cannot join the group.
template <sum_or_mean Op, element T, expression E>
bool queue_total_into(fused_group& group, E const& e, array<T>& value) {
  if (value.size() != 1 || on_a_device(e)) return false;
  auto l = prepared_total<Op, T>(group, e);
  if (!l) return false;
  l->set_output(value.data());
  std::int64_t n = std::int64_t(e.shape().numel());
  group.add(std::move(l), n);
  return true;
}

// Queues the sum or mean of every element of e (out: one element, of the reduction's shape).
template <sum_or_mean Op, element T, expression E>
std::optional<array<T>> queue_total(fused_group& group, E const& e,
                                    zenith::shape const& out_shape) {
  if (out_shape.numel() != 1 || on_a_device(e)) return std::nullopt;
  auto l = prepared_total<Op, T>(group, e);
  if (!l) return std::nullopt;
  auto out = array<T>::empty(out_shape);
  l->set_output(out.data());
  std::int64_t n = std::int64_t(e.shape().numel());
  group.add(std::move(l), n);
  return out;
}

// Queues the sum or mean of every element of e into value (one element, already allocated)
// together with ct, stored into a fresh array of ct's shape, in the same loop: the value a
// gradient comes with and one of its cotangents, in one pass over what both read. The flag says
// whether the pair joined the group; if not, ct was evaluated now, from the evaluator already
// built (building one computes any barrier or reduced broadcast inside ct). nullopt, and nothing
// built, when the pair does not share a loop on its types or sizes: lane types that would put
// the two on different SIMD grids, another size, or a group large enough to run in pieces.
template <element Tc>
using joined_store = std::optional<std::pair<array<Tc>, bool>>;
template <sum_or_mean Op, element T, expression E, element Tc, expression G>
joined_store<Tc> queue_total_with_store(fused_group& group, E const& e, array<T>& value,
                                        G const& ct) {
  using S = store_part<Tc, G>;
  using L = reduce_loop<Op, T, E, S>;
  if constexpr (L::can_simd != S::can_simd) {
    return std::nullopt;
  } else {
    if constexpr (S::can_simd) {
      using Lane = compute_t<value_t<E>>;
      using StoreLane = simd_lane_t<typename S::Ev>;
      // run_row's four-batch stores, and one lane width for both outputs.
      if constexpr (!std::is_same_v<Tc, typename S::Ev::compute_type> ||
                    xsimd::batch<Lane>::size != xsimd::batch<StoreLane>::size)
        return std::nullopt;
    }
    zenith::shape s = e.shape();
    std::int64_t n = std::int64_t(s.numel());
    // Above whole_blocks_up_to the group runs in pieces, where each loop's stores drain while
    // the next loop computes (group_piece.hpp); the shared loop is kept to the whole-block sizes
    // it was measured at (bench/fastad_suite, N <= 16384).
    if (n == 0 || n > whole_blocks_up_to || value.size() != 1 || ct.shape() != s ||
        (!group.empty() && group.size() != n) || on_a_device(e) || on_a_device(ct))
      return std::nullopt;
    auto l = group.template make<L>(e, value.data(), n, ct);
    auto out = array<Tc>::empty(s);
    if (!l->prepare(s)) {
      l->evaluate_store_into(out);
      return std::pair{std::move(out), false};
    }
    l->set_store_output(out.data());
    group.add(std::move(l), n);
    return std::pair{std::move(out), true};
  }
}

}  // namespace zenith::detail
