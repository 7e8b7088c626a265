#pragma once
// Matrix products on a CUDA device: a matmul over device arrays lowers (lower.hpp) to one strided
// batched GEMM, which the installed blas_runner runs: cuBLAS, opened at run time (cublas.hpp), or
// in tests a host stand-in, so the operand handling below is checked without a GPU. Like
// launch.hpp, this header needs neither cuBLAS nor the driver.
//
// Operands are computed into device arrays first, unless one already is an array, or the
// transpose of one over its last two axes (the reverse pass's B^T and A^T), which the GEMM then
// reads transposed in place. An operand with the whole batch, or with none (stride 0), is read
// where it is; one broadcast along some batch dimensions only is expanded first. Element types:
// float and double (computed in their own precision), float16 and bfloat16 (accumulated in
// float, on tensor cores where the device has them).
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../../core/array.hpp"
#include "../../core/creation.hpp"
#include "../../core/recording.hpp"
#include "../../expr/matmul.hpp"
#include "../../expr/views.hpp"
#include "lower.hpp"

namespace zenith::cuda_backend {

enum class gemm_type { f32, f64, f16, bf16 };

template <class T>
concept gemm_element = std::is_same_v<T, float> || std::is_same_v<T, double> ||
    std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <gemm_element T>
constexpr gemm_type gemm_type_of() {
  if constexpr (std::is_same_v<T, float>)
    return gemm_type::f32;
  else if constexpr (std::is_same_v<T, double>)
    return gemm_type::f64;
  else if constexpr (std::is_same_v<T, float16>)
    return gemm_type::f16;
  else
    return gemm_type::bf16;
}

// For each b < batch: C_b (m x n) = op(A_b) (m x k) * op(B_b) (k x n), every matrix row-major and
// dense. op(X) is X, or with trans the transpose of what is stored (A_b stored k x m, B_b n x k).
// X_b starts stride_x elements after X_(b-1); a stride of 0 reads one matrix for every b.
struct gemm_call {
  gemm_type type = gemm_type::f32;
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  void const* a = nullptr;
  void const* b = nullptr;
  void* c = nullptr;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Runs GEMMs on device d, in order with the kernels on its stream.
struct blas_runner {
  void (*gemm)(device d, gemm_call const& g) = nullptr;
};

namespace detail {
inline blas_runner const*& blas_slot() {
  static blas_runner const* r = nullptr;
  return r;
}
}  // namespace detail

// Installs r as the GEMM runner (null removes it) and returns the one it replaces.
inline blas_runner const* install_blas_runner(blas_runner const* r) {
  blas_runner const* old = detail::blas_slot();
  detail::blas_slot() = r;
  return old;
}

namespace detail {

// A GEMM operand: a dense device array holding the matrices, read transposed when trans.
template <element R>
struct gemm_operand {
  array<R> data;
  bool trans = false;
};

template <class E>
inline constexpr bool is_transpose_v = false;
template <class C>
inline constexpr bool is_transpose_v<view_node<views::transpose, C>> = true;

// Whether a transpose swaps the last two of r axes and keeps the others.
inline bool swaps_last_two(views::transpose const& v, std::size_t r) {
  if (r < 2 || v.perm[r - 2] != r - 1 || v.perm[r - 1] != r - 2) return false;
  for (std::size_t k = 0; k + 2 < r; ++k)
    if (v.perm[k] != k) return false;
  return true;
}

// e as a GEMM operand of element type R: its value where it has one (an array, a barrier's
// result), the value read transposed where e swaps the last two axes of one, else e computed.
template <element R, class E>
gemm_operand<R> gemm_operand_of(device d, E const& e) {
  if constexpr (has_value_on_device<E>() && std::is_same_v<value_t<E>, R>) {
    return {value_on_device(d, e), false};
  } else {
    if constexpr (is_transpose_v<E>) {
      using C = std::remove_cvref_t<decltype(e.child)>;
      if constexpr (has_value_on_device<C>() && std::is_same_v<value_t<C>, R>)
        if (swaps_last_two(e.view, e.shape().size())) return {value_on_device(d, e.child), true};
    }
    return {evaluate_on_device<R>(d, e), false};
  }
}

inline zenith::shape with_matrix(zenith::shape s, std::size_t rows, std::size_t cols) {
  s.push_back(rows);
  s.push_back(cols);
  return s;
}

// o, an operand whose matrices are rows x cols (as read) over the batch dimensions own, with the
// batch stride that reads it over the broadcast batch; expanded to the whole batch first when
// it is broadcast along some of its dimensions only.
template <element R>
std::int64_t batch_stride(device d, gemm_operand<R>& o, zenith::shape const& own,
                          zenith::shape const& batch, std::size_t rows, std::size_t cols) {
  std::int64_t matrix = std::int64_t(rows * cols);
  if (own.numel() == batch.numel()) return matrix;  // the same layout (its extra dims are 1)
  if (own.numel() == 1) return 0;
  zenith::shape full = with_matrix(batch, rows, cols);
  if (o.trans) {
    auto stored =
        array<R>::from_buffer(o.data.storage(), o.data.data(), with_matrix(own, cols, rows));
    std::vector<int> perm(full.size());
    for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = int(k);
    std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
    o.data = evaluate_on_device<R>(d, broadcast_to(transpose(stored, perm), full));
  } else {
    auto stored =
        array<R>::from_buffer(o.data.storage(), o.data.data(), with_matrix(own, rows, cols));
    o.data = evaluate_on_device<R>(d, broadcast_to(stored, full));
  }
  o.trans = false;
  return matrix;
}

}  // namespace detail

// a @ b on device d, with the geometry dims (expr/matmul.hpp).
template <element R, class A, class B>
array<R> matmul_on_device(device d, A const& a, B const& b,
                          zenith::detail::matmul_dims const& dims) {
  if constexpr (!gemm_element<R>) {
    throw device_error("zenith: evaluating on " + d.str() + ": matmul of " +
                       std::string(dtype_name<R>()) +
                       " does not run on CUDA devices (float, double, float16 and bfloat16 do)");
  } else {
    blas_runner const* runner = detail::blas_slot();
    if (!runner)
      throw device_error("zenith: evaluating on " + d.str() +
                         ": matmul needs cuBLAS, which this program does not load (zenith is "
                         "built without the CUDA backend: configure with ZENITH_CUDA on)");
    zenith::detail::note_unreplayable("a cuBLAS matmul");
    if (dims.out.numel() == 0) return array<R>::empty(dims.out, d);
    if (dims.k == 0) return full<R>(dims.out, R(0), d);
    auto ga = detail::gemm_operand_of<R>(d, a);
    auto gb = detail::gemm_operand_of<R>(d, b);
    gemm_call g;
    g.type = gemm_type_of<R>();
    g.m = std::int64_t(dims.m);
    g.n = std::int64_t(dims.n);
    g.k = std::int64_t(dims.k);
    g.batch = std::int64_t(dims.batch.numel());
    g.stride_a = detail::batch_stride(d, ga, dims.a_batch, dims.batch, dims.m, dims.k);
    g.stride_b = detail::batch_stride(d, gb, dims.b_batch, dims.batch, dims.k, dims.n);
    g.stride_c = g.m * g.n;
    g.trans_a = ga.trans;
    g.trans_b = gb.trans;
    auto out = array<R>::empty(dims.out, d);
    g.a = ga.data.data();
    g.b = gb.data.data();
    g.c = out.data();
    runner->gemm(d, g);
    return out;
  }
}

template <class A, class B>
requires(lowerable<A>&& lowerable<B>) struct lowering<matmul_node<A, B>> {
  static auto lower(device d, matmul_node<A, B> const& e) {
    return matmul_on_device<value_t<matmul_node<A, B>>>(d, e.lhs(), e.rhs(), e.dims);
  }
};

}  // namespace zenith::cuda_backend
