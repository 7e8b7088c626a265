#pragma once
// Staged fixed-size expressions: what a tensor function builds when zn::jit stages it for a
// gradient (transforms/staged_grad.hpp).
//
//   auto vg = zn::jit(zn::value_and_grad([](auto const& x) { return zn::log(zn::sum(zn::exp(x)));
//   })); auto [value, g] = vg(zn::tensor<double, 16>{...});
//
// Under jit, the function's differentiated tensor arguments arrive as staged_tensor leaves: each
// stands for one argument, whose values and gradient the reverse pass finds by the leaf's slot
// number. Elementwise math on them
// builds the usual lazy map_node; the whole-tensor ops that are eager on tensors (sum, mean, prod,
// max, min, matmul, dot, transpose, reshape, norm; expr/fixed_ops.hpp) build the lazy nodes below
// instead. The function so returns its whole computation as one expression type, which
// autodiff/staged_reverse.hpp evaluates and differentiates with every loop at compile-time
// bounds: no tape, no heap, no per-element bookkeeping.
//
// A staged expression cannot be read element by element or evaluated into a tensor inside the
// function: its values exist only once the transform evaluates the whole expression. Doing so
// is a compile-time error that says so (at() below), never a silent constant.
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/error.hpp"
#include "../core/expr_base.hpp"
#include "../core/node_tuple.hpp"
#include "../core/shape.hpp"
#include "../core/small_vector.hpp"
#include "../core/tensor.hpp"
#include "fixed_shape.hpp"

namespace zenith {

namespace detail {
template <class...>
inline constexpr bool staged_false = false;

// The one error a staged expression gives when something reads its elements.
template <class E>
constexpr void staged_element_access() {
  static_assert(
      staged_false<E>,
      "zenith::jit: inside a staged tensor function (jit of grad / value_and_grad of "
      "tensors) the arguments are whole-tensor expressions: use elementwise math, sum, "
      "mean, prod, max, min, matmul, dot, transpose, reshape, cross and norm on them; reading "
      "elements (x(i)) or evaluating into a tensor is not available there. Call the "
      "function without zn::jit to differentiate element-by-element code.");
}
}  // namespace detail

// Common members of the staged nodes: fixed-size, staged, no arrays, elements not readable.
template <class Shape, class T, class Node>
struct staged_base : expr_base<Node> {
  using value_type = T;
  using static_shape = Shape;
  static constexpr bool fixed = true;
  static constexpr bool staged = true;
  zenith::shape shape() const { return Shape::dynamic(); }
  template <class F>
  void for_each_array(F&&) const {}
  template <class D = void>
  compute_t<T> at(std::size_t) const {
    detail::staged_element_access<D>();
    return {};
  }
  template <class... I>
  compute_t<T> operator()(I...) const {
    detail::staged_element_access<staged_base>();
    return {};
  }
};

// A differentiated argument: staged argument number Slot of its call. It holds nothing: where its
// values and gradient are is the call's (staged_argument below, one per slot, handed to the
// reverse pass), so an expression holds only the function's own constants. Every operator copies
// its operands into the node it builds; with two pointers in each leaf, a staged function's
// expression outgrew what the compiler keeps in registers.
template <std::size_t Slot, class T, std::size_t... N>
struct staged_tensor : staged_base<fixed_shape<N...>, T, staged_tensor<Slot, T, N...>> {
  static constexpr std::size_t slot = Slot;
};

// Where a staged argument's values are, and the gradient its reverse pass writes.
template <class T, std::size_t... N>
struct staged_argument {
  tensor<T, N...> const* values;
  tensor<T, N...>* gradient;
};

// A reduction (Kind: detail::fixed_sum_kind, ...) over the axes of Plan (detail::reduce_plan).
template <class Kind, class Plan, class Shape, class T, class E>
struct staged_reduce : staged_base<Shape, T, staged_reduce<Kind, Plan, Shape, T, E>> {
  using kind = Kind;
  using plan = Plan;
  E child;
  explicit staged_reduce(E c) : child(std::move(c)) {}
};

// NumPy matmul of 1-D / 2-D operands; Dims is detail::matmul_shapes (m, k, n).
template <class Dims, class Shape, class T, class A, class B>
struct staged_matmul : staged_base<Shape, T, staged_matmul<Dims, Shape, T, A, B>> {
  using dims = Dims;
  A a;
  B b;
  staged_matmul(A x, B y) : a(std::move(x)), b(std::move(y)) {}
};

// Output element o is element Map::index(o) of the child: transpose and reshape.
template <class Map, class Shape, class E>
struct staged_gather : staged_base<Shape, value_t<E>, staged_gather<Map, Shape, E>> {
  using map = Map;
  E child;
  explicit staged_gather(E c) : child(std::move(c)) {}
};

namespace detail {
// Where a staged call keeps what its nodes share (staged_custom_state below), from when the
// function builds its expression until the call returns: one per staged call with a user rule,
// on its stack (transforms/staged_grad.hpp), the innermost found through a thread-local pointer.
// Objects that fit its inline bytes take no heap, and the nodes that share one hold a plain
// pointer: no reference count (whose atomic updates, one per copy of a node as the expression is
// built, and the allocation were a third of a small staged gradient with a user rule).
class staged_arena {
 public:
  staged_arena() : prev_(top()) { top() = this; }
  ~staged_arena() {
    for (std::size_t k = items_.size(); k-- > 0;) items_[k].destroy(items_[k].p);
    top() = prev_;
  }
  staged_arena(staged_arena const&) = delete;
  staged_arena& operator=(staged_arena const&) = delete;

  // A value-initialised T in the innermost staged call's arena, destroyed when that call returns.
  template <class T>
  static T* make() {
    staged_arena* a = top();
    if (!a)
      throw value_error(
          "zenith: a staged node was built outside a staged call (zn::jit of a gradient of "
          "tensors)");
    return a->emplace<T>();
  }

 private:
  struct item {
    void* p;
    void (*destroy)(void*);
  };
  template <class T>
  T* emplace() {
    std::size_t const at = (used_ + alignof(T) - 1) / alignof(T) * alignof(T);
    bool const inline_fit = alignof(T) <= buf_align && at + sizeof(T) <= bytes;
    if constexpr (std::is_trivially_destructible_v<T> && sizeof(T) <= bytes) {
      if (inline_fit) {  // nothing to destroy when the call returns: no item to record (the
                         // record's push was a tenth of a small gradient with a user rule)
        T* t = ::new (static_cast<void*>(buf_ + at)) T();
        used_ = at + sizeof(T);
        return t;
      }
    }
    constexpr std::align_val_t align{alignof(T)};
    void* mem = inline_fit ? static_cast<void*>(buf_ + at) : ::operator new(sizeof(T), align);
    void (*destroy)(void*) =
        inline_fit ? +[](void* q) { static_cast<T*>(q)->~T(); } : +[](void* q) {
          static_cast<T*>(q)->~T();
          ::operator delete(q, align);
        };
    T* t = nullptr;
    try {
      t = ::new (mem) T();
      items_.emplace_back(item{t, destroy});
    } catch (...) {
      if (t) t->~T();
      if (!inline_fit) ::operator delete(mem, align);
      throw;
    }
    if (inline_fit) used_ = at + sizeof(T);
    return t;
  }
  static staged_arena*& top() {
    thread_local staged_arena* a = nullptr;
    return a;
  }

  // 64: a state holding tensors aligned to the vector (core/tensor.hpp) fits inline. 1 KiB: a
  // rule on 16 doubles (a state of output, residuals and adjoint, each padded to 64 bytes: 576
  // bytes) and on 32 take no heap.
  static constexpr std::size_t bytes = 1024, buf_align = 64;
  staged_arena* prev_;
  alignas(buf_align) std::byte buf_[bytes];
  std::size_t used_ = 0;
  small_vector<item, 4> items_;
};
}  // namespace detail

// What the copies of one staged_custom node share (a function that reads the rule's result
// twice holds two copies of the node): fwd's result R = {output, residuals} and the output's
// adjoint; fwd runs once, when the first copy's forward does, and bwd once, when the last copy
// finishes. It lives in the staged call's arena (detail::staged_arena).
template <class R, class Out>
struct staged_custom_state {
  std::optional<R> r;
  Out adj;  // zeroed by the forward pass that runs fwd
  int users = 0, finished = 0;
  // Not value-initialised: that would zero the whole state (the output, fwd's residuals and the
  // adjoint), a pass over memory that nothing reads.
  staged_custom_state() : adj(detail::uninitialized) {}
};

// A user rule (custom_vjp) applied to staged arguments: a barrier whose forward is the user's
// fwd on the arguments' values (as tensors), and whose reverse is the user's bwd on fwd's
// residuals and the output's adjoint. Fwd and Bwd are held by pointer: the rule outlives the
// staged call, and so does the state, in the call's arena. Out is the tensor type of fwd's
// output, R the type fwd returns.
template <class Fwd, class Bwd, class R, class Out, class... Args>
struct staged_custom : staged_base<typename Out::static_shape, typename Out::value_type,
                                   staged_custom<Fwd, Bwd, R, Out, Args...>> {
  Fwd const* fwd;
  Bwd const* bwd;
  staged_custom_state<R, Out>* state;
  node_tuple<Args...> args;
  staged_custom(Fwd const* f, Bwd const* b, Args... a)
      : fwd(f),
        bwd(b),
        state(detail::staged_arena::make<staged_custom_state<R, Out>>()),
        args(std::move(a)...) {}
};

namespace detail {
// Whether an expression type holds a user rule's node anywhere below it (its staged call then
// needs a staged_arena). Every staged node is a class template over types.
template <class E>
inline constexpr bool holds_custom_rule = false;
template <template <class...> class Node, class... Ts>
inline constexpr bool holds_custom_rule<Node<Ts...>> = (holds_custom_rule<Ts> || ...);
template <class Fwd, class Bwd, class R, class Out, class... Args>
inline constexpr bool holds_custom_rule<staged_custom<Fwd, Bwd, R, Out, Args...>> = true;
}  // namespace detail

namespace detail {
// reshape's index map: the same row-major order.
struct same_order {
  static constexpr std::size_t index(std::size_t o) { return o; }
};
// transpose's: Plan is detail::transpose_plan.
template <class Plan>
struct permuted_order {
  static constexpr std::size_t index(std::size_t o) { return Plan::src[o]; }
};
// A 3-vector rotated by K places (cross's operands): element o is element (o + K) % 3.
template <std::size_t K>
struct rotated_order {
  static constexpr std::size_t index(std::size_t o) { return (o + K) % 3; }
};
}  // namespace detail

}  // namespace zenith
