#pragma once
// One pass for several loops over the same elements: the reverse pass's gradients of one
// function, and the value they come with. Each loop is a fused elementwise loop (fused_loop.hpp)
// or a whole-array sum over a fused expression (reduce.hpp), and reads only contiguous leaves.
// The pass walks the elements in blocks, large groups in pieces of group_step (128) elements
// (group_piece.hpp), and runs every loop on a piece before the next piece, so an input several
// loops read comes from memory once and from cache after, the stores of one loop drain while the
// next computes, and a large value several loops read is computed once per piece.
//
// Results are bitwise those of running each loop alone: an elementwise loop's pieces start on
// multiples of the piece (the same SIMD grid as fused_loop.hpp), and a sum adds the same
// batches into the same blocks, combined in the same pairwise tree, as reduce.hpp.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/small_vector.hpp"
#include "evaluate.hpp"
#include "evaluator.hpp"
#include "fused_loop.hpp"
#include "group_piece.hpp"
#include "reduce.hpp"
#include "thread_pool.hpp"

namespace zenith::detail {

// Work is handed to threads in blocks of a whole-array sum's block (each block a run of
// pieces), so that sums keep reduce.hpp's blocks.
inline constexpr std::int64_t group_block = red::block_elems;
static_assert(group_block % group_step == 0);

class fused_group {
 public:
  // A loop's work on the pieces of one thread's share of the blocks, with the loop's evaluator
  // copied once for the share rather than once per piece.
  struct runner {
    virtual ~runner() = default;
    // Elements [lo, hi) of one block: lo is a multiple of group_step, and hi is lo + group_step,
    // or the end of the block (the block's last piece, or its only one).
    virtual void run(std::int64_t lo, std::int64_t hi) = 0;
  };
  struct loop {
    virtual ~loop() = default;
    // A runner for a share of several pieces.
    virtual std::unique_ptr<runner> start() = 0;
    // One piece alone (a group of one piece needs no runner). alone: no other thread runs the
    // loop meanwhile, so a short one may run on its own evaluator (in_place_up_to, in
    // fused_loop.hpp) instead of a copy.
    virtual void run(std::int64_t lo, std::int64_t hi, bool alone) = 0;
    // After every block has run.
    virtual void finish() {}
    // Its pointers, for a recording (core/recording.hpp).
    virtual void pointers(pointer_list& l) = 0;
  };

  // Owns a loop: destroys it, and gives its room back to the group's arena or to the heap.
  struct loop_deleter {
    fused_group* arena = nullptr;  // the group whose arena holds the loop; null: on the heap
    void operator()(loop* l) const {
      if (!arena) return delete l;
      std::destroy_at(l);
      arena->release();
    }
  };
  using loop_ptr = std::unique_ptr<loop, loop_deleter>;

  fused_group() = default;
  // Loops point back at the group that holds their room.
  fused_group(fused_group const&) = delete;
  fused_group& operator=(fused_group const&) = delete;

  template <class L>
  using owned = std::unique_ptr<L, loop_deleter>;

  // A loop of type L for this group, in the group's arena while it has room (a gradient's few
  // loops: no heap allocation per call), else on the heap.
  // L is constructed at one place: its constructor (the evaluator's build) is inlined once.
  template <class L, class... Args>
  owned<L> make(Args&&... args) {
    std::size_t at = (used_ + alignof(L) - 1) / alignof(L) * alignof(L);
    // A recording keeps the loops after the group is gone: on the heap then, allocated as
    // `new L` allocates, since `delete` frees it as one.
    bool heap = alignof(L) > arena_align || at + sizeof(L) > arena_bytes || active_recording();
    constexpr bool over_aligned = alignof(L) > __STDCPP_DEFAULT_NEW_ALIGNMENT__;
    void* room = arena_ + at;
    if (heap) {
      if constexpr (over_aligned)
        room = ::operator new(sizeof(L), std::align_val_t(alignof(L)));
      else
        room = ::operator new(sizeof(L));
    }
    L* l;
    try {
      l = ::new (room) L(std::forward<Args>(args)...);
    } catch (...) {
      if (heap) {
        if constexpr (over_aligned)
          ::operator delete(room, std::align_val_t(alignof(L)));
        else
          ::operator delete(room);
      }
      throw;
    }
    if (heap) return owned<L>(l, loop_deleter{});
    used_ = at + sizeof(L);
    ++live_;
    return owned<L>(l, loop_deleter{this});
  }

  bool empty() const { return loops_.empty(); }
  // Elements each loop of the group covers (0 when empty).
  std::int64_t size() const { return total_; }

  // Adds a loop over n elements to an empty group or to one of the same size.
  void add(loop_ptr l, std::int64_t n) {
    if (!loops_.empty() && n != total_)
      throw value_error("fused_group: a loop over " + std::to_string(n) +
                        " elements added to a group of " + std::to_string(total_));
    total_ = n;
    loops_.push_back(std::move(l));
  }

  // Runs every loop, piece by piece, and empties the group.
  void run() {
    group_pass pass{std::move(loops_), total_};
    loops_.clear();
    total_ = 0;
    if (pass.loops.empty() || pass.n == 0) return;
    run_step(pass);
  }

 private:
  using loop_list = small_vector<loop_ptr, 4>;  // a gradient's group: the value, a few gradients

  // The loops of one run: what run() runs, and what a recording keeps of it.
  struct group_pass {
    loop_list loops;
    std::int64_t n = 0;

    void run() {
      std::int64_t blocks = (n + group_block - 1) / group_block;
      std::uint64_t pass = next_group_pass();
      std::int64_t step = n > whole_blocks_up_to ? group_step : group_block;
      auto body = [&](std::int64_t b0, std::int64_t b1, bool alone) {
        piece_scope scope(pass);
        std::int64_t lo = b0 * group_block, end = std::min(n, b1 * group_block);
        if (end - lo <= step) {
          scope.enter(lo, end);
          for (auto& l : loops) l->run(lo, end, alone && end - lo <= in_place_up_to);
          return;
        }
        std::vector<std::unique_ptr<runner>> runners;
        runners.reserve(loops.size());
        for (auto& l : loops) runners.push_back(l->start());
        for (; lo < end; lo += step) {
          std::int64_t hi = std::min(end, lo + step);
          scope.enter(lo, hi);
          for (auto& r : runners) r->run(lo, hi);
        }
      };
      std::size_t threads = thread_pool::instance().size();
      if (threads <= 1 || std::size_t(n) < parallel_threshold() || blocks == 1) {
        body(0, blocks, true);
      } else {
        // At least 4 tasks per thread, so that a thread slowed down leaves its share to others.
        std::int64_t per_task = std::max<std::int64_t>(1, blocks / std::int64_t(4 * threads));
        std::int64_t tasks = (blocks + per_task - 1) / per_task;
        thread_pool::instance().parallel_for(std::size_t(tasks), [&](std::size_t t) {
          std::int64_t b0 = std::int64_t(t) * per_task;
          body(b0, std::min(blocks, b0 + per_task), false);
        });
      }
      for (auto& l : loops) l->finish();
    }

    void pointers(pointer_list& l) {
      for (auto& loop : loops) loop->pointers(l);
    }
  };

  static constexpr std::size_t arena_bytes = 2048, arena_align = 64;

  // The arena is a stack that empties when its last loop goes.
  void release() {
    if (--live_ == 0) used_ = 0;
  }

  // The arena is declared first so that it outlives the loops it holds.
  alignas(arena_align) std::byte arena_[arena_bytes];
  std::size_t used_ = 0;  // bytes of arena_ in use (up to the end of the newest loop)
  std::size_t live_ = 0;  // loops in arena_
  loop_list loops_;
  std::int64_t total_ = 0;
};

// The leaves' strides along the one row that the space s coalesces to (strides: the
// destination's, then one per leaf), into inner; false when s does not coalesce to one row that
// every leaf reads with stride 1 or 0. Compiled once, for every loop.
[[gnu::noinline]] inline bool one_row_strides(zenith::shape const& s, stride_list const& strides,
                                              small_vector<std::int64_t, 16>& inner) {
  loop_space ls = coalesce(s, strides);
  if (ls.rank != 1) return false;
  for (auto it = strides.begin() + 1; it != strides.end(); ++it) {
    std::int64_t st = ls.dims[0] == 1 ? 1 : regroup(*it, ls)[0];
    if (st != 0 && st != 1) return false;
    inner.push_back(st);
  }
  return true;
}

// Coalesces ev's leaves for a contiguous destination of shape s. The group walks one row by
// flat index, so this succeeds only when the whole space coalesces to one row that every leaf
// reads with stride 1 or 0 (a broadcast scalar, such as the cotangent of a sum); the result says
// whether every stride is 1 (else the loop reads them as row_access::unit_or_broadcast).
template <class Ev>
std::optional<bool> coalesce_to_row(Ev& ev, zenith::shape const& s) {
  stride_list strides;
  strides.push_back(row_major_strides(s));
  ev.for_each_leaf([&](auto& leaf) { strides.push_back(leaf.stride); });
  small_vector<std::int64_t, 16> inner;
  if (!one_row_strides(s, strides, inner)) return std::nullopt;
  bool unit = true;
  std::size_t i = 0;
  ev.for_each_leaf([&](auto& leaf) {
    leaf.stride = {};
    leaf.stride[0] = inner[i++];
    leaf.rank = 1;
    unit = unit && leaf.stride[0] == 1;
  });
  return unit;
}

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

  // Flattened, as the loop over a piece is all there is to inline into.
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

  E expr_;  // keeps every buffer the evaluator reads alive
  Ev ev_;
  T* out_;
  bool unit_ = false;
  bool add_ = false;
};

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
  // Coalesces the evaluators; false when either cannot be walked as one row (coalesce_to_row),
  // and then the store part's evaluator is as built.
  bool prepare(zenith::shape const& s) {
    auto unit = coalesce_to_row(ev_, s);
    if (!unit) return false;
    unit_ = *unit;
    if constexpr (has_store) {
      auto store_unit = coalesce_to_row(store_.ev, s);
      if (!store_unit) return false;
      unit_ = unit_ && *store_unit;
    }
    return true;
  }

  // The store part evaluated into out (its shape) by the ordinary fused loop, for a pair that
  // cannot join a group (after a failed prepare()).
  template <class Tc>
  void evaluate_store_into(array<Tc>& out) requires has_store {
    run_fused(contiguous_dest(out), store_.ev, out.shape());
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
    // Every leaf's stride is 1 or 0 (prepare()); with 1 only, a costly body gains nothing from
    // the plain loads that is worth a second copy of it (costly_batch_v).
    if constexpr (can_simd && !costly_batch_v<Ev> && !costly_batch_v<typename S::Ev>) {
      if (simd && unit_)
        return red::accumulate_a<Op, K, true, row_access::unit>(acc, ev, g_, idx.data(), lo, hi,
                                                                true, side<row_access::unit>());
    }
    red::accumulate_a<Op, K, can_simd, row_access::unit_or_broadcast>(
        acc, ev, g_, idx.data(), lo, hi, simd, side<row_access::unit_or_broadcast>());
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
  [[no_unique_address]] S store_;
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
