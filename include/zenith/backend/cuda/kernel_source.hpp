#pragma once
// CUDA C++ source for a fused elementwise loop, printed from the loop's device plan
// (device_plan.hpp): each op contributes its `cuda` snippet (expr/ops.hpp), each leaf a load,
// each literal a parameter. The plan has done the shape work: views are in the leaves' strides,
// barriers were computed first and are read as leaves (lower.hpp).
//
//   namespace cb = zn::cuda_backend;
//   auto p = cb::make_device_plan(a * zn::sin(b) + 1.0f, zn::cuda(0));
//   auto k = cb::elementwise_kernel<float>(p, {cb::layout::vectorized});
//   k.name;   // "zn_ew_" + a hash of the source
//   k.text;   // extern "C" __global__ void zn_ew_...(n, out, in0, in1, s0)
//
// The source depends only on the plan's steps and types and the variant, never on shapes or
// values. Variants (kernel_args.hpp):
//   contiguous  out and every leaf are read at flat index i (or at 0: the leaves in
//               `broadcast`, a scalar broadcast to the whole array), one element per thread;
//   vectorized  the same with 16-byte loads and stores: each thread takes V = 16 / (widest
//               element size) consecutive elements (pointers must be 16-byte aligned);
//   strided     any strides: each index is split over the shape (a zn_geom parameter);
// each with a 32-bit or a 64-bit index (index64).
//
// Kernel parameters, in order: zn_idx n, the output pointer, one `const T*` per leaf (in the
// plan's order), one value per literal (likewise), and, for the strided layout, zn_geom (dims,
// and strides in elements: row 0 the output's, row k + 1 leaf k's). 16-bit floats travel as their
// bits (unsigned short) and compute in float, as on the CPU. Everything here is compiled once
// per program: an expression's part is its plan, which is data.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/dtype.hpp"
#include "../../core/shape.hpp"
#include "device_plan.hpp"
#include "kernel_args.hpp"

namespace zenith::cuda_backend {

struct kernel_source {
  std::string name;                 // the kernel's extern "C" name: zn_ew_ and a source hash
  std::string text;                 // the whole source: prelude and kernel
  std::vector<std::string> params;  // the parameters' device types, in order
};

namespace detail {

// FNV-1a: a stable hash of the source, for kernel names and cache keys. h continues a hash of
// earlier text (the hash of "" by default).
inline std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

inline std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

inline void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// Names a kernel whose text declares it ZN_KERNEL: prefix and a hash of the text (one name per
// distinct source, stable across runs, so that the disk cache finds it), written into the text.
inline void name_kernel(kernel_source& src, std::string_view prefix, std::string text) {
  src.name = std::string(prefix) + hex64(fnv1a(text));
  replace_all(text, "ZN_KERNEL", src.name);
  src.text = std::move(text);
}

// A leaf's value in an expression's text: a marker that each layout replaces by its own read.
inline std::string leaf_marker(std::size_t k) { return "\x01" + std::to_string(k) + "\x02"; }

// What the expression's text refers to, in parameter order.
struct source_builder {
  using leaf = device_value_type;
  std::vector<leaf> leaves;
  std::vector<std::string_view> scalars;  // their device types
};

// The text of an op applied to its operands' texts.
inline std::string op_text(std::string_view cuda, std::string_view compute, std::string const* args,
                           std::size_t n) {
  std::string out(cuda);
  // Operand texts are complete (no placeholders left in them), so replacing one placeholder
  // after another never substitutes into an operand already put in.
  replace_all(out, "{T}", compute);
  for (std::size_t i = 0; i < n; ++i) replace_all(out, "{" + std::to_string(i) + "}", args[i]);
  return out;
}

// The plan's expression as device source, its leaves and literals registered in b (in the
// plan's order; a leaf's value is a marker each layout replaces by its own read).
// What prints source is [[gnu::cold]] here and in reduce_kernel.hpp: it runs once per distinct
// kernel, so it is compiled for size, and a program that only computes on the CPU pays little
// for it.
[[gnu::cold]] inline std::string plan_text(device_plan const& p, source_builder& b) {
  std::vector<std::string> stack;
  std::size_t leaf = 0;
  for (device_plan::step const& s : p.steps) {
    if (s.kind == device_plan::step_kind::leaf) {
      b.leaves.push_back(p.leaf_types[leaf]);
      stack.push_back(leaf_marker(leaf++));
    } else if (s.kind == device_plan::step_kind::literal) {
      stack.push_back("s" + std::to_string(b.scalars.size()));
      b.scalars.push_back(s.compute);
    } else {
      std::size_t first = stack.size() - s.arity;
      std::string text = op_text(s.cuda, s.compute, stack.data() + first, s.arity);
      stack.resize(first);
      stack.push_back(std::move(text));
    }
  }
  return stack.empty() ? std::string() : std::move(stack.back());
}

// Definitions every kernel may use: the index type, 16-bit float conversions (PTX cvt on the
// device, so no header is needed; zn_host_* where the source is compiled for the host, as the
// emulation test does), 16-byte packs, the strided layout's geometry.
[[gnu::cold]] inline std::string prelude(kernel_variant const& v, std::size_t leaves) {
  std::string s;
  s += v.index64 ? "typedef long long zn_idx;\n" : "typedef int zn_idx;\n";
  s += "#ifdef __CUDA_ARCH__\n"
       "__device__ __forceinline__ float zn_bf16(unsigned short h) {\n"
       "  return __uint_as_float((unsigned int)h << 16);\n}\n"
       "__device__ __forceinline__ unsigned short zn_to_bf16(float f) {\n"
       "  unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n}\n"
       "__device__ __forceinline__ float zn_f16(unsigned short h) {\n"
       "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n}\n"
       "__device__ __forceinline__ unsigned short zn_to_f16(float f) {\n"
       "  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n}\n"
       "#else\n"
       "inline float zn_bf16(unsigned short h) { return zn_host_bf16(h); }\n"
       "inline unsigned short zn_to_bf16(float f) { return zn_host_to_bf16(f); }\n"
       "inline float zn_f16(unsigned short h) { return zn_host_f16(h); }\n"
       "inline unsigned short zn_to_f16(float f) { return zn_host_to_f16(f); }\n"
       "#endif\n"
       // clip as the CPU computes it: maximum, then minimum, each keeping a NaN operand.
       "template <class T>\n"
       "#ifdef __CUDA_ARCH__\n"
       "__device__ __forceinline__\n"
       "#else\n"
       "inline\n"
       "#endif\n"
       "T zn_clip(T x, T lo, T hi) {\n"
       "  T m = (x > lo || x != x) ? x : lo;\n"
       "  return (m < hi || m != m) ? m : hi;\n}\n";
  if (v.kind == layout::vectorized)
    s += "template <class T, int V> struct __align__(sizeof(T) * V) zn_pack { T v[V]; };\n";
  if (v.kind == layout::strided)
    s += "struct zn_geom { zn_idx dims[" + std::to_string(max_rank) + "]; zn_idx st[" +
         std::to_string(leaves + 1) + "][" + std::to_string(max_rank) + "]; int rank; };\n";
  return s;
}

// Source that splits the flat index in variable idx over dims[0 .. rank) (row-major) and adds
// each coordinate times a stride row to an offset: offsets[k] = {variable, stride array}.
[[gnu::cold]] inline std::string split_index(
    std::string const& idx, std::string const& dims, std::string const& rank,
    std::vector<std::pair<std::string, std::string>> const& offsets, std::string const& indent) {
  std::string s = indent + "for (int d = " + rank + " - 1; d >= 0; --d) {\n";
  s += indent + "  const zn_idx c = " + idx + " % " + dims + "[d];\n";
  s += indent + "  " + idx + " /= " + dims + "[d];\n";
  for (auto const& [var, strides] : offsets)
    s += indent + "  " + var + " += c * " + strides + "[d];\n";
  return s + indent + "}\n";
}

// A stored value as the expression computes it, and a computed one as stored.
inline std::string load_as_compute(source_builder::leaf const& l, std::string const& raw) {
  if (l.bits16) return (l.half ? "zn_f16(" : "zn_bf16(") + raw + ")";
  return raw;
}
template <class T>
std::string store_from_compute(std::string const& value) {
  if constexpr (std::is_same_v<T, float16>)
    return "zn_to_f16((float)(" + value + "))";
  else if constexpr (std::is_same_v<T, bfloat16>)
    return "zn_to_bf16((float)(" + value + "))";
  else
    return "(" + std::string(device_type<T>()) + ")(" + value + ")";
}

}  // namespace detail

namespace detail {

// What a kernel's text needs of its output's element type.
struct output_type {
  zenith::dtype dtype;                       // T, for the kernel cache
  std::string_view device;                   // device_type<T>()
  std::size_t size;                          // sizeof(T)
  std::string (*store)(std::string const&);  // store_from_compute<T>
};
template <element T>
output_type output_type_of() {
  return {dtype_of<T>(), device_type<T>(), sizeof(T), &store_from_compute<T>};
}

// The kernel's text for an expression already printed (expr, with b's leaves and literals): the
// part that depends on no type, so that it is compiled once rather than per expression type.
[[gnu::cold]] inline kernel_source elementwise_kernel_text(kernel_variant const& v,
                                                           output_type const& o,
                                                           source_builder const& b,
                                                           std::string const& expr) {
  std::size_t nl = b.leaves.size();
  auto is_broadcast = [&](std::size_t k) {
    return v.kind != layout::strided && k < 32 && ((v.broadcast >> k) & 1u);
  };

  kernel_source src;
  src.params.push_back("zn_idx");
  src.params.push_back(std::string(o.device) + "*");
  for (std::size_t i = 0; i < nl; ++i)
    src.params.push_back("const " + std::string(b.leaves[i].storage) + "*");
  for (std::size_t i = 0; i < b.scalars.size(); ++i)
    src.params.push_back(std::string(b.scalars[i]));
  if (v.kind == layout::strided) src.params.push_back("zn_geom");
  std::string params = "zn_idx n, " + std::string(o.device) + "* __restrict__ out";
  for (std::size_t i = 0; i < nl; ++i)
    params +=
        ", const " + std::string(b.leaves[i].storage) + "* __restrict__ in" + std::to_string(i);
  for (std::size_t i = 0; i < b.scalars.size(); ++i)
    params += ", " + std::string(b.scalars[i]) + " s" + std::to_string(i);
  if (v.kind == layout::strided) params += ", zn_geom g";

  // Broadcast leaves are read once per thread, before the loop.
  std::string hoisted;
  for (std::size_t k = 0; k < nl; ++k)
    if (is_broadcast(k))
      hoisted += "  const " + std::string(b.leaves[k].compute) + " b" + std::to_string(k) + " = " +
                 load_as_compute(b.leaves[k], "in" + std::to_string(k) + "[0]") + ";\n";
  // The expression with each leaf read by `read(k)`.
  auto bind = [&](auto read) {
    std::string e = expr;
    for (std::size_t k = 0; k < nl; ++k)
      replace_all(e, leaf_marker(k), is_broadcast(k) ? "b" + std::to_string(k) : read(k));
    return e;
  };
  auto flat_read = [&](std::size_t k) {
    return "(" + load_as_compute(b.leaves[k], "in" + std::to_string(k) + "[i]") + ")";
  };

  std::string body = hoisted;
  body += "  const zn_idx step = (zn_idx)gridDim.x * blockDim.x;\n";
  body += "  const zn_idx first = (zn_idx)blockIdx.x * blockDim.x + threadIdx.x;\n";
  std::string const flat_store = "out[i] = " + o.store(bind(flat_read));
  if (v.kind == layout::contiguous) {
    body += "  for (zn_idx i = first; i < n; i += step) " + flat_store + ";\n";
  } else if (v.kind == layout::vectorized) {
    std::size_t widest = o.size;
    for (std::size_t k = 0; k < nl; ++k)
      if (!is_broadcast(k)) widest = std::max(widest, b.leaves[k].size);
    std::string V = std::to_string(16 / widest);
    body += "  const zn_idx packs = n / " + V + ";\n";
    body += "  for (zn_idx p = first; p < packs; p += step) {\n";
    body += "    const zn_idx i = p * " + V + ";\n";
    for (std::size_t k = 0; k < nl; ++k)
      if (!is_broadcast(k)) {
        std::string ks = std::to_string(k), st(b.leaves[k].storage);
        body += "    const zn_pack<" + st + ", " + V + "> v" + ks +
                " = *reinterpret_cast<const zn_pack<" + st + ", " + V + ">*>(in" + ks + " + i);\n";
      }
    std::string ot(o.device);
    body += "    zn_pack<" + ot + ", " + V + "> o;\n";
    body += "#pragma unroll\n    for (int l = 0; l < " + V +
            "; ++l) o.v[l] = " + o.store(bind([&](std::size_t k) {
              return "(" + load_as_compute(b.leaves[k], "v" + std::to_string(k) + ".v[l]") + ")";
            })) +
            ";\n";
    body += "    *reinterpret_cast<zn_pack<" + ot + ", " + V + ">*>(out + i) = o;\n  }\n";
    body += "  for (zn_idx i = packs * " + V + " + first; i < n; i += step) " + flat_store + ";\n";
  } else {
    body += "  for (zn_idx i = first; i < n; i += step) {\n";
    body += "    zn_idx r = i, o_out = 0";
    for (std::size_t k = 0; k < nl; ++k) body += ", o" + std::to_string(k) + " = 0";
    body += ";\n";
    std::vector<std::pair<std::string, std::string>> offsets = {{"o_out", "g.st[0]"}};
    for (std::size_t k = 0; k < nl; ++k)
      offsets.push_back({"o" + std::to_string(k), "g.st[" + std::to_string(k + 1) + "]"});
    body += split_index("r", "g.dims", "g.rank", offsets, "    ");
    body += "    out[o_out] = " + o.store(bind([&](std::size_t k) {
      std::string ks = std::to_string(k);
      return "(" + load_as_compute(b.leaves[k], "in" + ks + "[o" + ks + "]") + ")";
    })) + ";\n  }\n";
  }

  std::string text =
      prelude(v, nl) + "extern \"C\" __global__ void ZN_KERNEL(" + params + ") {\n" + body + "}\n";
  name_kernel(src, "zn_ew_", std::move(text));
  return src;
}

}  // namespace detail

// The kernel computing out = plan p elementwise, for an output of type o (output_type_of<T>).
[[gnu::cold]] inline kernel_source elementwise_kernel(device_plan const& p,
                                                      detail::output_type const& o,
                                                      kernel_variant const& v) {
  detail::source_builder b;
  std::string expr = detail::plan_text(p, b);
  return detail::elementwise_kernel_text(v, o, b, expr);
}
template <element T>
kernel_source elementwise_kernel(device_plan const& p, kernel_variant const& v) {
  return elementwise_kernel(p, detail::output_type_of<T>(), v);
}

}  // namespace zenith::cuda_backend
