#pragma once
// The interpreter's elementwise kernels (backend/cpu/interpret.hpp): one loop over a tile per
// (op, compute type), instantiated from the op's tag (its simd() on xsimd batches, apply() for
// the tail and for types without a batch form), and found by name in an op table
// (ir/op_table.hpp) where the program registered it when it emitted the op.
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#include "../../core/any_array.hpp"
#include "../../expr/ops.hpp"
#include "../../expr/to_ir.hpp"
#include "../../ir/op_table.hpp"

namespace zenith::ir::detail {

// Kernel over n elements: out[i] = op(in[0][i], in[1][i], ...), in compute types.
using tile_kernel = void (*)(std::size_t n, void* out, void const* const* in);

template <std::size_t, class T>
using repeat = T;

// An op over operands of compute type C, result of the op's result type's compute type.
template <class Op, class C, std::size_t... I>
void map_tile(std::size_t n, void* out, void const* const* in, std::index_sequence<I...>) {
  using R = compute_t<op_result_t<Op, repeat<I, C>...>>;
  R* o = static_cast<R*>(out);
  std::size_t i = 0;
  if constexpr (std::is_same_v<R, C> && (std::is_same_v<C, float> || std::is_same_v<C, double>)) {
    using B = xsimd::batch<C>;
    for (; i + B::size <= n; i += B::size)
      Op::simd(B::load_unaligned(static_cast<C const*>(in[I]) + i)...).store_unaligned(o + i);
  }
  for (; i < n; ++i) o[i] = R(Op::apply(static_cast<C const*>(in[I])[i]...));
}

// where(c, a, b): the condition is bool whatever the values' type.
template <class C>
void select_tile(std::size_t n, void* out, void const* const* in) {
  auto cond = static_cast<bool const*>(in[0]);
  auto a = static_cast<C const*>(in[1]), b = static_cast<C const*>(in[2]);
  C* o = static_cast<C*>(out);
  for (std::size_t i = 0; i < n; ++i) o[i] = cond[i] ? a[i] : b[i];
}

template <class Op, class C>
void map_kernel(std::size_t n, void* out, void const* const* in) {
  if constexpr (std::is_same_v<Op, ops::where>)
    select_tile<C>(n, out, in);
  else
    map_tile<Op, C>(n, out, in, std::make_index_sequence<op_arity<Op>()>{});
}

// convert_element_type from compute type C to To (its value in To's compute type, rounded to
// To first where To is a 16-bit float).
template <class C, class To>
void convert_kernel(std::size_t n, void* out, void const* const* in) {
  auto a = static_cast<C const*>(in[0]);
  auto o = static_cast<compute_t<To>*>(out);
  for (std::size_t i = 0; i < n; ++i) o[i] = ops::cast<To>::apply(a[i]);
}

// Registers elementwise op Op's kernel for operands of element type T (in T's compute type;
// none for bool operands, nor for a floating-only op on integers). Once per (Op, T).
template <class Op, class T>
void register_map_kernel() {
  using C = compute_t<T>;
  if constexpr (!std::is_same_v<C, bool> &&
                (!is_floating_only<Op>() || std::is_floating_point_v<C>))
    add_once<&map_kernel<Op, C>>(ir_name<Op>, dtype_of<C>());
}

// Whether op (an IR name) is one of the elementwise ops (expr/ops.hpp), registered or not.
template <class... Ops>
bool is_elementwise_name(std::string_view op, type_list<Ops...>) {
  return ((ir_name<Ops> == op) || ...);
}

}  // namespace zenith::ir::detail
