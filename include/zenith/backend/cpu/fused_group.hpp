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
//
// This header is the group and how a loop joins it; the loops are group_store.hpp's (an
// elementwise store, or an addition into a running sum) and group_total.hpp's (a sum, alone or
// with a store in the same iteration).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
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

}  // namespace zenith::detail
