#pragma once
// One launch of a generated elementwise kernel (backend/cuda/kernel_source.hpp): which variant
// fits the arrays at hand, and the kernel's arguments, packed as cuLaunchKernel takes them
// (an array of pointers, one per parameter).
//
//   auto p = zn::cuda_backend::make_device_plan(expr, out.device());   // lower.hpp
//   auto v = zn::cuda_backend::choose_variant(out.data(), out.shape(), p.operands);
//   auto src = zn::cuda_backend::elementwise_kernel<T>(p, v);           // kernel_source.hpp
//   auto args = zn::cuda_backend::launch_args(v, out.data(), out.shape(), p.operands);
//   cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, args.pointers().data(), nullptr);
//
// The variant: vectorized when the output and every leaf are read at the flat index (or are one
// broadcast element) and every such pointer is 16-byte aligned; contiguous when only the
// alignment fails; strided otherwise. The index is 32-bit unless some offset needs more.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../core/shape.hpp"

namespace zenith::cuda_backend {

// The variants of a generated elementwise kernel (kernel_source.hpp).
enum class layout { contiguous, vectorized, strided };

struct kernel_variant {
  layout kind = layout::contiguous;
  bool index64 = false;
  std::uint32_t broadcast = 0;  // contiguous / vectorized: bit k when leaf k is one element
};

// Each argument's bytes at an address of its own, 16-byte aligned.
class kernel_args {
 public:
  template <class V>
  requires std::is_trivially_copyable_v<V>
  void push(V const& v) { push_bytes(&v, sizeof v); }

  // A count or an offset in the kernel's index type (zn_idx).
  void push_index(bool index64, std::int64_t x) {
    if (index64)
      push(static_cast<long long>(x));
    else
      push(static_cast<std::int32_t>(x));
  }

  // A geometry struct: the values of g in the index type, then the ints of tail (the struct's
  // layout: an array of zn_idx, then ints; padded to the index type's size).
  void push_geometry(bool index64, std::vector<std::int64_t> const& g,
                     std::initializer_list<int> tail) {
    std::size_t const width = index64 ? 8 : 4;
    std::vector<std::byte> bytes(g.size() * width + tail.size() * sizeof(int) + width,
                                 std::byte{0});
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (index64) {
        long long x = g[i];
        std::memcpy(bytes.data() + i * width, &x, width);
      } else {
        std::int32_t x = std::int32_t(g[i]);
        std::memcpy(bytes.data() + i * width, &x, width);
      }
    }
    std::size_t at = g.size() * width;
    for (int x : tail) {
      std::memcpy(bytes.data() + at, &x, sizeof x);
      at += sizeof x;
    }
    push_bytes(bytes.data(), bytes.size());
  }

  // Another list's arguments after these.
  void append(kernel_args const& o) { args_.insert(args_.end(), o.args_.begin(), o.args_.end()); }

  void push_bytes(void const* p, std::size_t n) {
    auto& a = args_.emplace_back((n + sizeof(chunk) - 1) / sizeof(chunk));
    std::memcpy(a.data(), p, n);
  }

  // The address of each argument, in order.
  std::vector<void*> pointers() {
    std::vector<void*> p;
    p.reserve(args_.size());
    for (auto& a : args_) p.push_back(a.data());
    return p;
  }
  std::size_t size() const { return args_.size(); }

 private:
  struct alignas(16) chunk {
    std::byte b[16];
  };
  std::vector<std::vector<chunk>> args_;
};

// What a generated kernel reads of a device plan (device_plan.hpp): each leaf's base and
// strides, and each literal's value as its argument, in the plan's order.
struct device_operands {
  std::vector<void const*> bases;
  std::vector<std::array<std::int64_t, max_rank>> strides;
  kernel_args scalars;
};

// The variant for out (contiguous, row-major, of shape s) = a plan of an expression of shape s,
// so that its leaves' strides are in s's rank.
inline kernel_variant choose_variant(void const* out, zenith::shape const& s,
                                     device_operands const& o) {
  std::size_t const r = s.size();
  auto const rm = row_major_strides(s);
  constexpr std::int64_t max32 = std::numeric_limits<std::int32_t>::max();
  bool flat = true;  // every leaf read at the flat index, or one broadcast element
  bool aligned = reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  bool wide = std::int64_t(s.numel()) > max32;
  std::uint32_t broadcast = 0;
  for (std::size_t k = 0; k < o.bases.size(); ++k) {
    auto const& stride = o.strides[k];
    bool unit = true, zero = true;
    std::int64_t reach = 0;  // the farthest element read from the leaf's base
    for (std::size_t d = 0; d < r; ++d) {
      if (s[d] <= 1) continue;
      unit = unit && stride[d] == rm[d];
      zero = zero && stride[d] == 0;
      std::int64_t st = stride[d] < 0 ? -stride[d] : stride[d];
      reach += st * (std::int64_t(s[d]) - 1);
    }
    if (zero && k < 32)
      broadcast |= 1u << k;
    else if (!unit)
      flat = false;
    else if (reinterpret_cast<std::uintptr_t>(o.bases[k]) % 16 != 0)
      aligned = false;
    wide = wide || reach > max32;
  }
  kernel_variant v;
  v.kind = !flat ? layout::strided : aligned ? layout::vectorized : layout::contiguous;
  v.index64 = wide;
  v.broadcast = flat ? broadcast : 0;
  return v;
}

// The operands every generated kernel takes after its counts and output: each leaf's base
// pointer, then each literal's value (kernel_source.hpp's parameter order). Returns the number
// of leaves.
inline std::size_t push_operands(kernel_args& a, device_operands const& o) {
  for (void const* b : o.bases) a.push(b);
  a.append(o.scalars);
  return o.bases.size();
}

// The arguments of variant v's kernel for out (as above) = the plan of o; with out_stride,
// out is written at those strides (in elements) instead of row-major, which only the strided
// variant can do.
inline kernel_args launch_args(kernel_variant const& v, void* out, zenith::shape const& s,
                               device_operands const& o,
                               std::array<std::int64_t, max_rank> const* out_stride = nullptr) {
  kernel_args a;
  a.push_index(v.index64, std::int64_t(s.numel()));
  a.push(out);
  std::size_t const leaves = push_operands(a, o);
  if (v.kind != layout::strided) return a;

  // zn_geom: dims[max_rank], st[leaves + 1][max_rank] (row 0 the output's), then int rank.
  std::size_t const r = s.size();
  auto const rm = row_major_strides(s);
  std::vector<std::int64_t> g(max_rank * (leaves + 2), 0);
  for (std::size_t d = 0; d < r; ++d) {
    g[d] = std::int64_t(s[d]);
    g[max_rank + d] = out_stride ? (*out_stride)[d] : rm[d];
  }
  for (std::size_t k = 0; k < leaves; ++k)
    for (std::size_t d = 0; d < r; ++d) g[(k + 2) * max_rank + d] = s[d] <= 1 ? 0 : o.strides[k][d];
  a.push_geometry(v.index64, g, {int(r)});
  return a;
}

}  // namespace zenith::cuda_backend
