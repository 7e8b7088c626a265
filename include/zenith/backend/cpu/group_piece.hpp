#pragma once
// The piece of a fused_group pass that the calling thread is running, and the scratch in which
// the loops of that piece share a value.
//
// A group runs its loops piece by piece: every loop covers group_step elements before the next
// loop takes over (fused_group.hpp). A value that several of the loops read but that is too large
// to store whole (a kept transcendental above reuse_node's cache limit, autodiff/reuse.hpp) is then
// evaluated once per piece, by the first loop that reads it, into a small per-thread scratch
// that the piece's other loops read.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace zenith::detail {

// A kept value is stored whole up to this many bytes, a few times less than a core's L2
// (reuse_node, autodiff/reuse.hpp); above, it is computed piece by piece.
inline constexpr std::size_t max_stored_bytes = std::size_t(256) << 10;

// Groups of at most this many elements store every kept value whole (doubles, the widest kept
// type), and run each loop on a whole block at a time: pieces only add calls there
// (bench/fastad_suite's normal_log_pdf at 16384 elements ran 5% slower in pieces).
inline constexpr std::int64_t whole_blocks_up_to = std::int64_t(max_stored_bytes / sizeof(double));

// Elements per piece. Small, so that the stores of one loop drain while the next loop computes,
// but not so small that each loop's start costs more than its piece (bench/RESULTS.md,
// "Gradient cost": grad / forward 2.0-2.15 at 128, 2.2-2.5 at 256, 2.5-2.8 at 64, 2.8-3.0 at
// 512). A multiple of 4 batches of every lane type and of fused_loop.hpp's grain, so pieces
// keep every loop on its SIMD grid and a sum's accumulators on their batches.
inline constexpr std::int64_t group_step = 128;

// What the calling thread's group is running (active only inside fused_group::run).
struct group_piece {
  std::uint64_t pass = 0;  // which run of which group: tells stale scratch apart
  std::int64_t lo = 0, hi = 0;
  bool active = false;
  // Set by a reuse_node's evaluator that starts a row without its values in the piece or its
  // buffer (it then recomputes them), in a group pass or not, so that a loop knows when a kept_
  // row access would be wrong (start_kept).
  bool recomputes = false;
};

inline group_piece& current_piece() {
  thread_local group_piece p;
  return p;
}

// Starts ev's row; true when no reuse_node below it recomputes its values there (they are all
// read from the piece or from the node's buffer: a kept_ row access may run the loop).
template <class Ev>
bool start_kept(Ev& ev, std::int64_t const* idx, std::size_t r = 1) {
  auto& p = current_piece();
  p.recomputes = false;
  ev.start_row(idx, r);
  return !p.recomputes;
}

// A fresh pass number for each group run.
inline std::uint64_t next_group_pass() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

// The values of one shared node over the current piece.
struct piece_slot {
  void const* key = nullptr;  // the node
  std::uint64_t pass = 0;
  std::int64_t lo = -1;          // the piece its values are for
  void const* origin = nullptr;  // where the filling reader's row starts (its first leaf)
  alignas(64) float f[group_step];
  alignas(64) double d[group_step];

  bool holds(group_piece const& p) const { return pass == p.pass && lo == p.lo; }
  template <class T>
  T* values() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
    if constexpr (std::is_same_v<T, float>)
      return f;
    else
      return d;
  }
};

// The calling thread's slot for key: its own if it has one in this pass, else one that no
// node of this pass uses (a slot's pass tells whether its node can still read it).
inline piece_slot& piece_slot_for(void const* key, group_piece const& p) {
  thread_local std::vector<std::unique_ptr<piece_slot>> slots;
  piece_slot* free = nullptr;
  for (auto& s : slots) {
    if (s->pass == p.pass && s->key == key) return *s;
    if (s->pass != p.pass && !free) free = s.get();
  }
  if (!free) free = slots.emplace_back(std::make_unique<piece_slot>()).get();
  free->key = key;
  free->pass = p.pass;
  free->lo = -1;
  return *free;
}

// Marks the calling thread as running pass `pass` while alive.
class piece_scope {
 public:
  explicit piece_scope(std::uint64_t pass) : p_(current_piece()), saved_(p_) {
    p_.pass = pass;
    p_.active = true;
  }
  ~piece_scope() { p_ = saved_; }
  piece_scope(piece_scope const&) = delete;
  piece_scope& operator=(piece_scope const&) = delete;

  void enter(std::int64_t lo, std::int64_t hi) {
    p_.lo = lo;
    p_.hi = hi;
  }

 private:
  group_piece& p_;
  group_piece saved_;
};

}  // namespace zenith::detail
