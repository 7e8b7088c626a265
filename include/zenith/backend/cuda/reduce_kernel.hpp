#pragma once
// A reduction along axes (sum, mean, prod, max, min, logsumexp, argmax, argmin) with a fused
// elementwise prologue, as a CUDA kernel: the reduced
// expression is printed into the kernel (backend/cuda/kernel_source.hpp), so
// sum(exp(x) * y, axis) reads x and y once and writes only the result.
//
//   namespace cb = zn::cuda_backend;
//   auto p = cb::make_device_plan(child, d);   // the reduction's child, over its own shape
//   auto src = cb::reduction_kernel<zn::ops::reduce_sum, float, float>(p, false);
//   auto args = cb::reduction_args(false, out, child.shape(), axes, p.operands);
//
// One block per output element and split (grid-stride over both); the block's threads stride
// over the split's share of the reduced elements, each folding its share with the op's `cuda`
// combine, then the block combines the threads' values in shared memory in a fixed tree.
// blockDim.x must be a power of two, at most reduction_block. With one split the block writes
// the output; with several (few outputs of many elements each: a whole-array sum, where one block
// per output would leave all but one of a GPU's multiprocessors idle) each writes its partial
// state, and reduction_finish_kernel combines an output's partials in a second launch. The
// order of combination depends only on blockDim.x and the split count (reduction_splits: the
// shapes alone), never on timing: the same launch gives the same bits.
//
// Parameters: zn_idx nout, zn_idx count (reduced elements per output), zn_idx splits, the
// output, the partial states (nout * splits of them; unused with one split), the leaves, the
// literals, and zn_rgeom: kept dims and reduced dims, then the strides over the kept dims (row 0
// the output's, row k + 1 leaf k's) and over the reduced dims (row k leaf k's).
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../../core/shape.hpp"
#include "../../expr/reduce.hpp"  // indexed_reduction
#include "kernel_args.hpp"
#include "kernel_source.hpp"

namespace zenith::cuda_backend {

inline constexpr int reduction_block = 256;

// How many blocks share each output's reduced elements: enough blocks in all to fill a GPU (an
// H100 has 132 multiprocessors; reduction_split_blocks keeps several blocks on each), each
// folding at least reduction_split_least elements (32 per thread). One for every reduction
// whose outputs alone make that many blocks, or whose outputs are short.
inline constexpr std::int64_t reduction_split_blocks = 1024;
inline constexpr std::int64_t reduction_split_least = 8192;
inline std::int64_t reduction_splits(std::int64_t nout, std::int64_t count) {
  if (nout <= 0 || nout >= reduction_split_blocks) return 1;
  return std::max<std::int64_t>(
      1, std::min(count / reduction_split_least, reduction_split_blocks / nout));
}

// What a reduction's text needs of its accumulator type A: its device type and its extremes.
struct accumulator_text {
  std::string_view type;
  std::string lowest, highest;
};
template <class A>
accumulator_text accumulator_text_of() {
  if constexpr (std::is_floating_point_v<A>)
    return {device_type<A>(), "(-INFINITY)", "INFINITY"};
  else
    return {device_type<A>(), "(" + std::to_string(std::numeric_limits<A>::min() + 1) + " - 1)",
            std::to_string(std::numeric_limits<A>::max())};
}

// A reduction op's device snippets (expr/reduce.hpp).
struct reduce_op_text {
  std::string_view cuda, identity, finalize;
  bool indexed = false;
};

namespace detail {

// One of the op's snippets for accumulator a: {T}, {lowest}, {highest}, {n}, {0}, {1}.
inline std::string reduce_snippet(std::string_view snippet, accumulator_text const& a,
                                  std::string const& a0, std::string const& a1 = "",
                                  std::string const& n = "") {
  std::string s(snippet);
  replace_all(s, "{T}", a.type);
  replace_all(s, "{lowest}", a.lowest);
  replace_all(s, "{highest}", a.highest);
  replace_all(s, "{n}", n);
  replace_all(s, "{0}", a0);
  replace_all(s, "{1}", a1);
  return s;
}

}  // namespace detail

// Reductions with device source: the folding ones (sum, mean, prod, max, min, logsumexp), whose
// state is the accumulator, and the indexed ones (argmax, argmin), whose state is a (value,
// index) pair merged as on the CPU: the better value, the lower index on ties, index -1 for
// "nothing seen but the identity" (ops::argmax in expr/reduce.hpp).
template <class Op>
concept device_reduction = requires {
  Op::cuda;
  Op::cuda_identity;
  Op::cuda_finalize;
};

namespace detail {

// zn_state, zn_combine(a, b) and zn_identity() for op on accumulator a, as device source.
[[gnu::cold]] inline std::string reduction_state_source(reduce_op_text const& op,
                                                        accumulator_text const& a) {
  std::string const acc(a.type);
  std::string const identity = reduce_snippet(op.identity, a, "");
  if (op.indexed) {
    // op.cuda is better(a, b): whether a replaces b.
    return "struct zn_state { " + acc +
           " v; long long i; };\n"
           "__device__ __forceinline__ zn_state zn_identity() { zn_state s; s.v = " +
           identity +
           "; s.i = -1; return s; }\n"
           "__device__ __forceinline__ zn_state zn_combine(zn_state a, zn_state b) {\n"
           "  if (b.i < 0) return a;\n  if (a.i < 0) return b;\n"
           "  if (" +
           reduce_snippet(op.cuda, a, "b.v", "a.v") +
           ") return b;\n"
           "  if (" +
           reduce_snippet(op.cuda, a, "a.v", "b.v") +
           ") return a;\n"
           "  return a.i <= b.i ? a : b;\n}\n";
  }
  return "typedef " + acc +
         " zn_state;\n"
         "__device__ __forceinline__ zn_state zn_identity() { return " +
         identity +
         "; }\n"
         "__device__ __forceinline__ zn_state zn_combine(zn_state a, zn_state b) {\n"
         "  return " +
         reduce_snippet(op.cuda, a, "a", "b") + ";\n}\n";
}

// The block's threads' states (acc, thread t) combined in shared memory in a fixed tree: the
// block's state in zn_sh[0].
inline std::string block_tree_source() {
  return "    zn_sh[t] = acc;\n    __syncthreads();\n"
         "    for (int h = blockDim.x / 2; h > 0; h >>= 1) {\n"
         "      if (t < h) zn_sh[t] = zn_combine(zn_sh[t], zn_sh[t + h]);\n"
         "      __syncthreads();\n    }\n";
}

}  // namespace detail

// What a reduction kernel's text needs of its op and types: the output's and accumulator's
// device types, the state's definitions and the finished output's expression.
struct reduction_text {
  std::string out_type, acc_type, state_source, finished_output;
  bool indexed = false;
};

// The text of a reduction by op on accumulator a into an output of type o.
[[gnu::cold]] inline reduction_text make_reduction_text(reduce_op_text const& op,
                                                        accumulator_text const& a,
                                                        detail::output_type const& o) {
  std::string const result = op.indexed ? "zn_sh[0].i" : "zn_sh[0]";
  return {std::string(o.device), std::string(a.type), detail::reduction_state_source(op, a),
          o.store(detail::reduce_snippet(op.finalize, a, result, "", "count")), op.indexed};
}

// The text of Op reducing into T on accumulator A, made once (its address names it).
template <class Op, element T, class A>
requires device_reduction<Op> reduction_text const& reduction_text_of() {
  static reduction_text const made =
      make_reduction_text({Op::cuda, Op::cuda_identity, Op::cuda_finalize, indexed_reduction<Op>},
                          accumulator_text_of<A>(), detail::output_type_of<T>());
  return made;
}

// The kernel reducing the device expression `expr` (what b registered: its leaves and scalars)
// as r says. Compiled once: the op and the expression are text by now.
[[gnu::cold]] inline kernel_source reduction_kernel_of(detail::source_builder const& b,
                                                       std::string expr, bool index64,
                                                       reduction_text const& r) {
  std::size_t const nl = b.leaves.size();
  std::string const& acc = r.acc_type;

  kernel_source src;
  std::string params = "zn_idx nout, zn_idx count, zn_idx splits, " + r.out_type +
                       "* __restrict__ out, zn_state* __restrict__ part";
  src.params = {"zn_idx", "zn_idx", "zn_idx", r.out_type + "*", "zn_state*"};
  for (std::size_t i = 0; i < nl; ++i) {
    std::string st(b.leaves[i].storage);
    params += ", const " + st + "* __restrict__ in" + std::to_string(i);
    src.params.push_back("const " + st + "*");
  }
  for (std::size_t i = 0; i < b.scalars.size(); ++i) {
    params += ", " + std::string(b.scalars[i]) + " s" + std::to_string(i);
    src.params.push_back(std::string(b.scalars[i]));
  }
  params += ", zn_rgeom g";
  src.params.push_back("zn_rgeom");

  for (std::size_t k = 0; k < nl; ++k) {
    std::string ks = std::to_string(k);
    detail::replace_all(
        expr, detail::leaf_marker(k),
        "(" + detail::load_as_compute(b.leaves[k], "in" + ks + "[o" + ks + "]") + ")");
  }
  std::string const R = std::to_string(max_rank), L = std::to_string(nl);

  std::string s = detail::prelude({layout::contiguous, index64, 0}, nl);
  s += "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n";
  s += "struct zn_rgeom { zn_idx kdims[" + R + "]; zn_idx rdims[" + R + "]; zn_idx kst[" +
       std::to_string(nl + 1) + "][" + R + "]; zn_idx rst[" + (nl ? L : "1") + "][" + R +
       "]; int nk; int nr; };\n";
  s += r.state_source;
  s += "extern \"C\" __global__ void ZN_KERNEL(" + params + ") {\n";
  s += "  __shared__ zn_state zn_sh[" + std::to_string(reduction_block) + "];\n";
  s += "  const int t = threadIdx.x;\n";
  s += "  for (zn_idx u = blockIdx.x; u < nout * splits; u += gridDim.x) {\n";
  s += "    const zn_idx o = u / splits, p = u - o * splits;\n";
  s += "    zn_idx r = o, b_out = 0";
  for (std::size_t k = 0; k < nl; ++k) s += ", b" + std::to_string(k) + " = 0";
  s += ";\n";
  std::vector<std::pair<std::string, std::string>> kept = {{"b_out", "g.kst[0]"}}, reduced;
  for (std::size_t k = 0; k < nl; ++k) {
    std::string ks = std::to_string(k);
    kept.push_back({"b" + ks, "g.kst[" + std::to_string(k + 1) + "]"});
    reduced.push_back({"o" + ks, "g.rst[" + ks + "]"});
  }
  s += detail::split_index("r", "g.kdims", "g.nk", kept, "    ");
  s += "    zn_state acc = zn_identity();\n";
  s += "    for (zn_idx j = p * blockDim.x + t; j < count; j += splits * blockDim.x) {\n";
  s += "      zn_idx q = j";
  for (std::size_t k = 0; k < nl; ++k) s += ", o" + std::to_string(k) + " = b" + std::to_string(k);
  s += ";\n";
  s += detail::split_index("q", "g.rdims", "g.nr", reduced, "      ");
  if (r.indexed)
    s += "      zn_state x;\n      x.v = (" + acc + ")(" + expr + ");\n      x.i = j;\n";
  else
    s += "      const zn_state x = (" + acc + ")(" + expr + ");\n";
  s += "      acc = zn_combine(acc, x);\n    }\n";
  s += detail::block_tree_source();
  s += "    if (t == 0 && splits > 1) part[u] = zn_sh[0];\n";
  s += "    else if (t == 0) out[b_out] = " + r.finished_output +
       ";\n    __syncthreads();\n  }\n}\n";

  detail::name_kernel(src, "zn_red_", std::move(s));
  return src;
}

// The kernel reducing plan p (the child's) as r says.
[[gnu::cold]] inline kernel_source reduction_kernel(device_plan const& p, reduction_text const& r,
                                                    bool index64) {
  detail::source_builder b;
  std::string expr = detail::plan_text(p, b);
  return reduction_kernel_of(b, std::move(expr), index64, r);
}
template <class Op, element T, class A>
kernel_source reduction_kernel(device_plan const& p, bool index64) {
  return reduction_kernel(p, reduction_text_of<Op, T, A>(), index64);
}

// The second launch of a split reduction: one block per output combines its splits' partial
// states (part[o * splits ..], in a fixed order) and writes the finished output. Parameters:
// zn_idx nout, count, splits (64-bit), the output, the partial states.
[[gnu::cold]] inline kernel_source reduction_finish_kernel(reduction_text const& r) {
  kernel_source src;
  src.params = {"zn_idx", "zn_idx", "zn_idx", r.out_type + "*", "const zn_state*"};
  std::string s = detail::prelude({layout::contiguous, true, 0}, 0);
  s += "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n";
  s += r.state_source;
  s += "extern \"C\" __global__ void ZN_KERNEL(zn_idx nout, zn_idx count, zn_idx splits, " +
       r.out_type + "* __restrict__ out, const zn_state* __restrict__ part) {\n";
  s += "  __shared__ zn_state zn_sh[" + std::to_string(reduction_block) + "];\n";
  s += "  const int t = threadIdx.x;\n";
  s += "  for (zn_idx o = blockIdx.x; o < nout; o += gridDim.x) {\n";
  s += "    zn_state acc = zn_identity();\n";
  s += "    for (zn_idx p = t; p < splits; p += blockDim.x) acc = zn_combine(acc, part[o * "
       "splits + p]);\n";
  s += detail::block_tree_source();
  s += "    if (t == 0) out[o] = " + r.finished_output + ";\n    __syncthreads();\n  }\n}\n";
  detail::name_kernel(src, "zn_redfin_", std::move(s));
  return src;
}
template <class Op, element T, class A>
kernel_source reduction_finish_kernel() {
  return reduction_finish_kernel(reduction_text_of<Op, T, A>());
}

// Bytes of one partial state of Op on accumulator type A, as the device lays zn_state out.
template <class Op, class A>
constexpr std::size_t reduction_state_bytes() {
  if constexpr (indexed_reduction<Op>) {
    struct state {
      A v;
      long long i;
    };
    return sizeof(state);
  } else {
    return sizeof(A);
  }
}

// The parameters both reduction kernels start with: nout, count, splits, the output, the
// partial states.
inline kernel_args reduction_head_args(bool index64, std::int64_t nout, std::int64_t count,
                                       std::int64_t splits, void* out, void const* part) {
  kernel_args a;
  a.push_index(index64, nout);
  a.push_index(index64, count);
  a.push_index(index64, splits);
  a.push(out);
  a.push(part);
  return a;
}

// reduction_finish_kernel's arguments: the head alone, its indices always 64-bit.
inline kernel_args reduction_finish_args(std::int64_t nout, std::int64_t count, std::int64_t splits,
                                         void* out, void const* part) {
  return reduction_head_args(true, nout, count, splits, out, part);
}

// The zn_rgeom argument of reduction_kernel's kernel, for a child of shape s reduced over the
// axes in mask, whose leaves have strides `leaf_strides` (a kernel's arguments end with it).
inline void push_reduction_geometry(
    kernel_args& a, bool index64, zenith::shape const& s, std::uint32_t mask,
    std::vector<std::array<std::int64_t, max_rank>> const& leaf_strides) {
  std::size_t const r = s.size(), leaves = leaf_strides.size();
  std::vector<std::size_t> kept, reduced;
  for (std::size_t d = 0; d < r; ++d) ((mask >> d) & 1u ? reduced : kept).push_back(d);
  // zn_rgeom, in the index type: kdims, rdims, kst[leaves + 1], rst[max(leaves, 1)], then nk, nr.
  std::size_t const rows = 2 + (leaves + 1) + (leaves ? leaves : 1);
  std::vector<std::int64_t> g(rows * max_rank, 0);
  auto at = [&](std::size_t row, std::size_t d) -> std::int64_t& { return g[row * max_rank + d]; };
  std::int64_t out_stride = 1;
  for (std::size_t i = kept.size(); i-- > 0;) {  // the output: row-major over the kept axes
    at(0, i) = std::int64_t(s[kept[i]]);
    at(2, i) = s[kept[i]] <= 1 ? 0 : out_stride;
    out_stride *= std::int64_t(s[kept[i]]);
  }
  for (std::size_t i = 0; i < reduced.size(); ++i) at(1, i) = std::int64_t(s[reduced[i]]);
  for (std::size_t k = 0; k < leaves; ++k) {
    for (std::size_t i = 0; i < kept.size(); ++i)
      at(3 + k, i) = s[kept[i]] <= 1 ? 0 : leaf_strides[k][kept[i]];
    for (std::size_t i = 0; i < reduced.size(); ++i)
      at(3 + leaves + k, i) = s[reduced[i]] <= 1 ? 0 : leaf_strides[k][reduced[i]];
  }
  a.push_geometry(index64, g, {int(kept.size()), int(reduced.size())});
}

// The arguments of reduction_kernel's kernel for out (contiguous over the kept axes) = the
// reduction over the axes in mask (bit d: axis d of s) of the plan of o, built for the
// child's shape s; with splits > 1, part holds nout * splits partial states
// (reduction_state_bytes each).
inline kernel_args reduction_args(bool index64, void* out, zenith::shape const& s,
                                  std::uint32_t mask, device_operands const& o,
                                  std::int64_t splits = 1, void* part = nullptr) {
  std::int64_t nout = 1, count = 1;
  for (std::size_t d = 0; d < s.size(); ++d)
    ((mask >> d) & 1u ? count : nout) *= std::int64_t(s[d]);
  kernel_args a = reduction_head_args(index64, nout, count, splits, out, part);
  push_operands(a, o);
  push_reduction_geometry(a, index64, s, mask, o.strides);
  return a;
}

}  // namespace zenith::cuda_backend
