#pragma once
// The device plan of an expression: what a generated elementwise kernel reads and computes, as
// data. Views and broadcasts are pushed down into the leaves' strides, and barriers were computed
// first (lower.hpp builds plans), so three kinds of step remain, in postfix order:
//   leaf      a strided read of an array: its base and one stride per axis (elements)
//   literal   a number, passed to the kernel as an argument
//   op        an elementwise op over the values of the steps before it (its `cuda` snippet)
//
//   auto p = zn::cuda_backend::make_device_plan(a * zn::sin(b) + 1.0f, zn::cuda(0));
//   // steps: leaf a, leaf b, op sin, op mul, literal 1, op add
//
// A plan is data, not a type, so that one printer (kernel_source.hpp), one argument packer
// (kernel_args.hpp) and one launcher (launch.hpp) serve every expression: an expression type
// compiles only the walk that records its plan. The kernel's text depends on the plan's steps
// and types (same_text), never on its bases, strides or literal values.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../../core/buffer.hpp"
#include "../../core/dtype.hpp"
#include "../../core/shape.hpp"
#include "../../core/small_vector.hpp"
#include "../../expr/views.hpp"
#include "kernel_args.hpp"

namespace zenith::cuda_backend {

// How an element type is stored on the device.
template <element T>
constexpr std::string_view device_type() {
  if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "int";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "long long";
  else if constexpr (storage_float<T>)
    return "unsigned short";
  else if constexpr (std::is_same_v<T, float>)
    return "float";
  else
    return "double";
}

// An element type as a kernel's text needs it.
struct device_value_type {
  std::string_view storage;  // device storage type
  std::string_view compute;  // the type an expression computes it in
  bool half = false;         // float16 (else, when storage is unsigned short, bfloat16)
  bool bits16 = false;       // a 16-bit float: read through zn_f16 / zn_bf16
  std::size_t size = 0;      // bytes per element
};

template <element T>
constexpr device_value_type device_value_type_of() {
  return {device_type<T>(), device_type<compute_t<T>>(), std::is_same_v<T, float16>,
          storage_float<T>, sizeof(T)};
}

struct device_plan {
  enum class step_kind : std::uint8_t { leaf, literal, op };
  struct step {
    step_kind kind = step_kind::leaf;
    std::uint8_t arity = 0;    // op: how many values it takes
    std::string_view cuda;     // op: its snippet ({0}, {1}, ... the operands, {T} the type)
    std::string_view compute;  // op: the type it computes in; literal: its type
  };

  zenith::detail::small_vector<step, 16> steps;                   // postfix
  zenith::detail::small_vector<device_value_type, 8> leaf_types;  // per leaf, in step order
  device_operands operands;                   // per leaf its base and strides; the literals
  std::vector<std::shared_ptr<buffer>> kept;  // what leaves computed for the plan read

  device_plan() = default;
  device_plan(device_plan&&) = default;
  device_plan& operator=(device_plan&&) = default;
  // Out of line: every expression type's evaluation destroys a plan.
  [[gnu::noinline]] ~device_plan() {}

  std::size_t leaves() const { return leaf_types.size(); }
  [[gnu::noinline]] void keep(std::shared_ptr<buffer> b) { kept.push_back(std::move(b)); }

  // A read of a contiguous array of shape s at base. Out of line, as the others: each
  // expression type's walk calls them, and inlined they would be most of its code.
  [[gnu::noinline]] void add_leaf(void const* base, zenith::shape const& s,
                                  device_value_type const& t) {
    steps.push_back({step_kind::leaf, 0, {}, {}});
    leaf_types.push_back(t);
    operands.bases.push_back(base);
    operands.strides.push_back(leaf_strides(s));
  }
  template <element T>
  void add_leaf(T const* base, zenith::shape const& s) {
    add_leaf(base, s, device_value_type_of<T>());
  }
  // A number of a type whose device name is `type`, as its bytes.
  [[gnu::noinline]] void add_literal(void const* value, std::size_t bytes, std::string_view type) {
    steps.push_back({step_kind::literal, 0, {}, type});
    operands.scalars.push_bytes(value, bytes);
  }
  // A number, computed as T's compute type.
  template <element T>
  void add_literal(T value) {
    compute_t<T> c(value);
    add_literal(&c, sizeof c, device_type<compute_t<T>>());
  }
  [[gnu::noinline]] void add_op(std::string_view cuda, std::string_view compute,
                                std::size_t arity) {
    steps.push_back({step_kind::op, std::uint8_t(arity), cuda, compute});
  }
  // The leaves from `first` on read through m (a view, or a broadcast, of what they read).
  [[gnu::noinline]] void apply(affine_map const& m, std::size_t first) {
    for (std::size_t k = first; k < leaves(); ++k) {
      std::int64_t off = map_strides(m, operands.strides[k]);
      operands.bases[k] =
          static_cast<char const*>(operands.bases[k]) + off * std::int64_t(leaf_types[k].size);
    }
  }
  // The leaves from `first` on, read for an operand of shape `from`, broadcast to shape `to`.
  [[gnu::noinline]] void broadcast(zenith::shape const& from, zenith::shape const& to,
                                   std::size_t first) {
    if (from != to) apply(views::broadcast_to{to}.map(from), first);
  }

  // Whether o's kernels have the same text: the same steps and types.
  bool same_text(device_plan const& o) const {
    if (steps.size() != o.steps.size() || leaves() != o.leaves()) return false;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      step const &a = steps[i], &b = o.steps[i];
      if (a.kind != b.kind || a.arity != b.arity || a.cuda != b.cuda || a.compute != b.compute)
        return false;
    }
    for (std::size_t k = 0; k < leaves(); ++k) {
      device_value_type const &a = leaf_types[k], &b = o.leaf_types[k];
      if (a.storage != b.storage || a.compute != b.compute || a.half != b.half) return false;
    }
    return true;
  }
  // A hash for a kernel cache that tells plans apart with same_text. Strings are hashed by
  // address (their text is the op catalogue's and the type names', static), so that hashing
  // costs a few operations per step: equal text at another address only costs a second entry.
  std::uint64_t hash() const {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](std::uint64_t x) { h = (h ^ x) * 1099511628211ull; };
    for (step const& s : steps) {
      mix(std::uint64_t(s.kind) << 8 | s.arity);
      mix(reinterpret_cast<std::uintptr_t>(s.cuda.data()) ^ s.cuda.size());
      mix(reinterpret_cast<std::uintptr_t>(s.compute.data()));
    }
    for (device_value_type const& t : leaf_types)
      mix(reinterpret_cast<std::uintptr_t>(t.storage.data()) ^ t.half);
    return h;
  }
};

}  // namespace zenith::cuda_backend
