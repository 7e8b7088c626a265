#pragma once
// The IR interpreter's non-elementwise ops (backend/cpu/interpret.hpp), as plain loops over
// contiguous memory: what moves data (broadcasts, transposes, slices, reversals, pads,
// concatenations) is one strided copy by element size, compiled once whatever the dtype;
// reductions are one fold loop per (op, element type) after a copy that puts the reduced axes
// last; dot_general is BLAS, softmax, layer_norm and conv2d the CPU backend's pointer kernels.
// None of it goes through the expression evaluators, whose code per expression type is what a
// program's build time is made of: an interpreter instantiated for every op and dtype through
// them cost more to build than the programs it serves.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../../core/any_array.hpp"
#include "../../core/runtime_instance.hpp"
#include "../../ir/op_table.hpp"
#include "conv.hpp"
#include "layer_norm.hpp"
#include "softmax.hpp"

namespace zenith::ir::detail {

// n elements of type U from sp to dp, with byte strides ss and ds (a word copy, not a call per
// element).
template <class U>
void copy_row(char* dp, std::int64_t ds, char const* sp, std::int64_t ss, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i, dp += ds, sp += ss) {
    U v;
    std::memcpy(&v, sp, sizeof(U));
    std::memcpy(dp, &v, sizeof(U));
  }
}

// dst[d_off + sum_k i_k * dst_st[k]] = src[s_off + sum_k i_k * src_st[k]] for every index i of
// `shape`, elements of `size` bytes, strides and offsets in elements.
inline void copy_strided(char* dst, std::int64_t const* dst_st, std::int64_t d_off, char const* src,
                         std::int64_t const* src_st, std::int64_t s_off, zenith::shape const& shape,
                         std::size_t size) {
  std::size_t r = shape.size(), n = shape.numel();
  if (n == 0) return;
  if (r == 0) {
    std::memcpy(dst + d_off * std::int64_t(size), src + s_off * std::int64_t(size), size);
    return;
  }
  std::vector<std::size_t> idx(r, 0);
  std::size_t inner = shape[r - 1];
  std::int64_t ds = dst_st[r - 1] * std::int64_t(size), ss = src_st[r - 1] * std::int64_t(size);
  for (std::size_t done = 0; done < n; done += inner) {
    std::int64_t d = d_off, s = s_off;
    for (std::size_t k = 0; k + 1 < r; ++k) {
      d += std::int64_t(idx[k]) * dst_st[k];
      s += std::int64_t(idx[k]) * src_st[k];
    }
    char* dp = dst + d * std::int64_t(size);
    char const* sp = src + s * std::int64_t(size);
    if (ds == std::int64_t(size) && ss == std::int64_t(size)) {
      std::memcpy(dp, sp, inner * size);
    } else if (size == 4) {
      copy_row<std::uint32_t>(dp, ds, sp, ss, inner);
    } else if (size == 8) {
      copy_row<std::uint64_t>(dp, ds, sp, ss, inner);
    } else if (size == 2) {
      copy_row<std::uint16_t>(dp, ds, sp, ss, inner);
    } else {
      for (std::size_t i = 0; i < inner; ++i, dp += ds, sp += ss) std::memcpy(dp, sp, size);
    }
    for (std::size_t k = r - 1; k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}

template <class = void>
std::size_t element_size(zenith::dtype d) {
  return with_dtype(d, []<class T>() { return sizeof(T); });
}
ZENITH_RUNTIME_INSTANCE(std::size_t element_size<>(zenith::dtype d))

// A fresh array of dtype d and shape s.
template <class = void>
any_array empty_like_dtype(zenith::dtype d, zenith::shape const& s) {
  return with_dtype(d, [&]<class T>() -> any_array { return array<T>::empty(s); });
}
ZENITH_RUNTIME_INSTANCE(any_array empty_like_dtype<>(zenith::dtype d, zenith::shape const& s))

inline char* bytes(any_array const& a) { return static_cast<char*>(const_cast<void*>(a.data())); }

// a gathered through a view: out[i] = a[offset + sum_k i_k * st[k]] over shape s.
template <class = void>
any_array gather(any_array const& a, zenith::shape const& s,
                 std::array<std::int64_t, max_rank> const& st, std::int64_t offset) {
  any_array out = empty_like_dtype(a.dtype(), s);
  auto dst = row_major_strides(s);
  copy_strided(bytes(out), dst.data(), 0, bytes(a), st.data(), offset, s, element_size(a.dtype()));
  return out;
}
ZENITH_RUNTIME_INSTANCE(any_array gather<>(any_array const& a, zenith::shape const& s,
                                           std::array<std::int64_t, max_rank> const& st,
                                           std::int64_t offset))

// The fold of op Op over `inner` contiguous elements of type T, per row: out[o].
template <class Op, class T>
void reduce_rows(void const* src, std::size_t outer, std::size_t inner, void* dst) {
  using In = typename Op::template input<T>;
  using R = typename Op::template result<In>;
  using A = compute_t<In>;
  auto x = static_cast<T const*>(src);
  auto out = static_cast<R*>(dst);
  for (std::size_t o = 0; o < outer; ++o) {
    T const* row = x + o * inner;
    if constexpr (indexed_reduction<Op>) {
      typename Op::template state<A> s{Op::template identity<A>(), -1};
      for (std::size_t i = 0; i < inner; ++i)
        s = Op::combine(s, typename Op::template state<A>{A(row[i]), std::int64_t(i)});
      out[o] = Op::finalize(s, inner);
    } else if constexpr (Op::has_identity) {
      A acc = Op::template identity<A>();
      for (std::size_t i = 0; i < inner; ++i) acc = Op::combine(acc, A(row[i]));
      out[o] = R(Op::finalize(acc, inner));
    } else {
      A acc = A(row[0]);
      for (std::size_t i = 1; i < inner; ++i) acc = Op::combine(acc, A(row[i]));
      out[o] = R(Op::finalize(acc, inner));
    }
  }
}

// Op over rows of `inner` elements of x (of element type T), as an array of shape `kept`.
using reduce_kernel = any_array (*)(any_array const& x, zenith::shape const& kept,
                                    std::size_t inner);
template <class Op, class T>
any_array reduce_typed(any_array const& x, zenith::shape const& kept, std::size_t inner) {
  if (!Op::has_identity && inner == 0)
    throw value_error("ir::run: " + std::string(Op::name) + " of an empty axis (to shape " +
                      kept.str() + ")");
  using R = typename Op::template result<typename Op::template input<T>>;
  array<R> out = array<R>::empty(kept);
  reduce_rows<Op, T>(x.data(), kept.numel(), inner, out.data());
  return out;
}

// Registers reduction Op's kernel for element type T (none for bool). Once per (Op, T).
template <class Op, class T>
void register_reduction() {
  if constexpr (!std::is_same_v<T, bool>) add_once<&reduce_typed<Op, T>>(Op::name, dtype_of<T>());
}

// Reduction op (an IR name, e.g. reduce_sum) over the axes in `mask` of a; the result has those
// axes dropped and the op's result type.
template <class = void>
any_array reduce(std::string_view op, any_array const& a, std::uint32_t mask) {
  reduce_kernel k = table_of<reduce_kernel>().find(op, a.dtype());
  if (!k) fail_unregistered("kernel", op, a.dtype());
  zenith::shape const& s = a.shape();
  zenith::shape kept, moved;  // moved: the kept axes, then the reduced ones
  std::array<std::int64_t, max_rank> st{};
  auto src = row_major_strides(s);
  std::size_t j = 0, inner = 1;
  for (std::size_t k = 0; k < s.size(); ++k)
    if (!(mask >> k & 1)) {
      kept.push_back(s[k]);
      moved.push_back(s[k]);
      st[j++] = src[k];
    }
  for (std::size_t k = 0; k < s.size(); ++k)
    if (mask >> k & 1) {
      moved.push_back(s[k]);
      st[j++] = src[k];
      inner *= s[k];
    }
  return k(gather(a, moved, st, 0), kept, inner);
}
ZENITH_RUNTIME_INSTANCE(any_array reduce<>(std::string_view op, any_array const& a,
                                           std::uint32_t mask))

// s with its last two axes swapped.
inline zenith::shape swap_last_two(zenith::shape s) {
  if (s.size() >= 2) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}

// numpy's matmul of a and b with equal batch axes or none (the dot_general form the IR records),
// float or double, BLAS per batch; each operand read transposed (its last two axes swapped)
// where ta / tb.
template <class T>
array<T> matmul_blas(array<T> const& a, array<T> const& b, zenith::shape const& out_shape,
                     bool ta = false, bool tb = false) {
  auto geo = zenith::detail::matmul_geometry(ta ? swap_last_two(a.shape()) : a.shape(),
                                             tb ? swap_last_two(b.shape()) : b.shape());
  array<T> out = array<T>::empty(out_shape);
  std::size_t batches = geo.batch.numel(), m = geo.m, k = geo.k, n = geo.n;
  std::size_t sa = geo.a_batch.empty() ? 0 : m * k, sb = geo.b_batch.empty() ? 0 : k * n;
  if (out.size() == 0) return out;
  if (k == 0) {
    std::fill(out.data(), out.data() + out.size(), T(0));
    return out;
  }
  for (std::size_t i = 0; i < batches; ++i)
    zenith::detail::conv_gemm(ta, tb, m, n, k, a.data() + i * sa, b.data() + i * sb, T(0),
                              out.data() + i * m * n);
  return out;
}

}  // namespace zenith::ir::detail
