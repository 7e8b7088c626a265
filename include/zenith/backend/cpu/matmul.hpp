#pragma once
// The CPU kernel of matmul_node (expr/matmul.hpp).
//   float, double      CBLAS (OpenBLAS) gemm per batch, gemv for matrix-vector products.
//                      An operand that is an array, a view of one (transpose, slice, ...), or
//                      another barrier goes to BLAS in place through its strides (CblasTrans
//                      and leading dimensions); only a layout BLAS cannot express, or an
//                      elementwise expression, is evaluated into a contiguous buffer first.
//   bfloat16, float16  converted to float, sgemm, converted back.
//   int32, int64, bool a plain strided loop (integers wrap like NumPy's), rows split across the
//                      thread pool for large products.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../../expr/matmul.hpp"
#include "evaluate.hpp"
#include "thread_pool.hpp"

namespace zenith {

namespace detail {

// One operand seen as a stack of (rows x cols) matrices over the output's batch dimensions.
template <class T>
struct mm_matrix {
  leaf_eval<T> leaf;  // base pointer, strides, and any buffer it had to materialize
  std::size_t rows = 0, cols = 0;
  std::int64_t sr = 0, sc = 0;               // strides of a row and a column step
  std::array<std::int64_t, max_rank> bst{};  // strides over the output batch dims (0: broadcast)
  bool trans = false;                        // BLAS layout: stored transposed
  std::int64_t ld = 1;                       // BLAS leading dimension
  // Every row is the same (a left operand broadcast along its rows), or every column (a right
  // operand broadcast along its columns): kept as they are, for mm_repeated.
  bool same_rows = false, same_cols = false;

  // The BLAS view of the strides, if there is one (unit stride along rows or columns).
  bool blas_layout() {
    std::int64_t r = std::int64_t(rows), c = std::int64_t(cols);
    if ((c == 1 || sc == 1) && (r == 1 || sr >= std::max<std::int64_t>(1, c))) {
      trans = false;
      ld = r == 1 ? std::max<std::int64_t>(1, c) : sr;
    } else if ((r == 1 || sr == 1) && (c == 1 || sc >= std::max<std::int64_t>(1, r))) {
      trans = true;
      ld = c == 1 ? std::max<std::int64_t>(1, r) : sc;
    } else {
      return false;
    }
    return ld <= INT_MAX;
  }
};

// A broadcast, possibly reshaped or wrapped in a barrier that is its child's value (a cotangent
// shared by several rules: `same_as_child`).
template <class E>
struct spread_expression : std::false_type {};
template <class C>
struct spread_expression<view_node<views::broadcast_to, C>> : std::true_type {};
template <class C>
struct spread_expression<reshape_node<C>> : spread_expression<C> {};
template <class E>
requires requires { E::same_as_child; }
struct spread_expression<E> : spread_expression<decltype(E::child)> {};

// The leaf of a spread expression: only the broadcast's source is evaluated; the broadcast
// stays zero strides.
template <class T, class E>
leaf_eval<T> spread_leaf(E const& e) {
  if constexpr (requires { e.view; }) {
    array<T> src = evaluate_untraced<T>(e.child);
    auto leaf = leaf_eval<T>::owning(src);
    leaf.apply(e.view.map(src.shape()));
    return leaf;
  } else if constexpr (requires { E::same_as_child; }) {
    return spread_leaf<T>(e.child);
  } else {  // reshape
    auto leaf = spread_leaf<T>(e.child);
    leaf.reshape(e.child.shape(), e.shape());
    return leaf;
  }
}

// A strided leaf for e with element type T: no copy when e is an array of T, views of one, or
// a barrier. A broadcast of anything else evaluates only its source (a cotangent spread from a
// sum: see mm_repeated). Otherwise e is evaluated into a contiguous buffer.
template <class T, class E>
leaf_eval<T> mm_leaf(E const& e) {
  if constexpr (std::is_same_v<evaluator_t<E>, leaf_eval<T>> && !spread_expression<E>::value)
    return make_evaluator(e);
  else if constexpr (spread_expression<E>::value)
    return spread_leaf<T>(e);
  else
    return leaf_eval<T>::owning(evaluate_untraced<T>(e));
}

template <class T, class E>
mm_matrix<T> mm_prepare(E const& e, matmul_dims const& d, bool left, bool need_blas,
                        bool keep_repeated = false) {
  mm_matrix<T> mat;
  zenith::shape s = e.shape();
  mat.leaf = mm_leaf<T>(e);
  mat.rows = left ? d.m : d.k;
  mat.cols = left ? d.k : d.n;
  auto setup = [&] {
    std::size_t r = s.size();
    auto const& st = mat.leaf.stride;
    if (r == 1) {
      mat.sr = left ? 0 : st[0];
      mat.sc = left ? st[0] : 0;
    } else {
      mat.sr = st[r - 2];
      mat.sc = st[r - 1];
    }
    mat.bst = {};
    std::size_t nb = r >= 2 ? r - 2 : 0, off = d.batch.size() - nb;
    for (std::size_t i = 0; i < nb; ++i) mat.bst[i + off] = s[i] == 1 ? 0 : st[i];
  };
  setup();
  if (need_blas && !mat.blas_layout()) {
    mat.same_rows = keep_repeated && left && mat.rows > 1 && mat.sr == 0;
    mat.same_cols = keep_repeated && !left && mat.cols > 1 && mat.sc == 0;
    if (mat.same_rows || mat.same_cols) return mat;
    mat.leaf = leaf_eval<T>::owning(gather_strided(mat.leaf.base, s, mat.leaf.stride));
    setup();
    mat.blas_layout();
  }
  return mat;
}

// Element offsets of every batch of one operand, in the output's row-major batch order.
inline std::vector<std::int64_t> mm_batch_offsets(zenith::shape const& batch,
                                                  std::array<std::int64_t, max_rank> const& bst) {
  std::size_t nb = batch.numel(), r = batch.size();
  std::vector<std::int64_t> off(nb);
  std::array<std::size_t, max_rank> idx{};
  for (std::size_t b = 0; b < nb; ++b) {
    std::int64_t o = 0;
    for (std::size_t k = 0; k < r; ++k) o += std::int64_t(idx[k]) * bst[k];
    off[b] = o;
    for (std::size_t k = r; k-- > 0;) {
      if (++idx[k] < batch[k]) break;
      idx[k] = 0;
    }
  }
  return off;
}

inline int mm_int(std::size_t v) {
  if (v > std::size_t(INT_MAX))
    throw value_error("matmul: dimension " + std::to_string(v) + " too large for BLAS");
  return int(v);
}

inline CBLAS_TRANSPOSE mm_trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

template <class T>
void mm_gemm(bool ta, bool tb, int m, int n, int k, T const* a, int lda, T const* b, int ldb, T* c,
             int ldc) {
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, mm_trans(ta), mm_trans(tb), m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c,
                ldc);
  else
    cblas_dgemm(CblasRowMajor, mm_trans(ta), mm_trans(tb), m, n, k, 1.0, a, lda, b, ldb, 0.0, c,
                ldc);
}

// y = op(A) x with A stored (rows x cols) row-major at leading dimension lda.
template <class T>
void mm_gemv(bool t, int rows, int cols, T const* a, int lda, T const* x, int incx, T* y,
             int len_y) {
  std::fill_n(y, len_y, T(0));  // beta = 0 must not read the uninitialised output
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, mm_trans(t), rows, cols, 1.0f, a, lda, x, incx, 0.0f, y, 1);
  else
    cblas_dgemv(CblasRowMajor, mm_trans(t), rows, cols, 1.0, a, lda, x, incx, 0.0, y, 1);
}

// One (m x k) . (k x n) product into c (row-major, ldc = n); m, n, k > 0.
template <class T>
void mm_product(mm_matrix<T> const& a, T const* pa, mm_matrix<T> const& b, T const* pb, T* c,
                std::size_t m, std::size_t n, std::size_t k) {
  int M = mm_int(m), N = mm_int(n), K = mm_int(k);
  if (n == 1 && (k == 1 || b.sr >= 1)) {
    // Matrix-vector: the column of b is a vector of stride sr.
    int inc = k == 1 ? 1 : int(b.sr);
    if (a.trans)
      mm_gemv(true, K, M, pa, int(a.ld), pb, inc, c, M);
    else
      mm_gemv(false, M, K, pa, int(a.ld), pb, inc, c, M);
  } else if (m == 1 && (k == 1 || a.sc >= 1)) {
    // Vector-matrix: c = op(B)^T x.
    int inc = k == 1 ? 1 : int(a.sc);
    if (b.trans)
      mm_gemv(false, N, K, pb, int(b.ld), pa, inc, c, N);
    else
      mm_gemv(true, K, N, pb, int(b.ld), pa, inc, c, N);
  } else {
    mm_gemm(a.trans, b.trans, M, N, K, pa, int(a.ld), pb, int(b.ld), c, N);
  }
}

// A product whose left operand has all rows the same, or whose right operand has all columns
// the same: one vector-matrix (or matrix-vector) product, copied to every row (or column). The
// cotangent of sum(A B) is such a broadcast, so the gradient costs two GEMVs, not two GEMMs.
// The other operand is in BLAS layout.
template <class T>
void mm_repeated(mm_matrix<T> const& a, mm_matrix<T> const& b, matmul_dims const& d, T* c) {
  std::size_t const nb = d.batch.numel(), m = d.m, n = d.n, k = d.k;
  int const M = mm_int(m), N = mm_int(n), K = mm_int(k);
  auto ao = mm_batch_offsets(d.batch, a.bst), bo = mm_batch_offsets(d.batch, b.bst);
  std::vector<T> x(k);
  for (std::size_t i = 0; i < nb; ++i) {
    T const *pa = a.leaf.base + ao[i], *pb = b.leaf.base + bo[i];
    T* ci = c + i * m * n;
    if (a.same_rows) {  // row 0 of a times b, then copied down
      for (std::size_t kk = 0; kk < k; ++kk) x[kk] = pa[std::int64_t(kk) * a.sc];
      if (b.trans)
        mm_gemv(false, N, K, pb, int(b.ld), x.data(), 1, ci, N);
      else
        mm_gemv(true, K, N, pb, int(b.ld), x.data(), 1, ci, N);
      for (std::size_t r = 1; r < m; ++r) std::copy_n(ci, n, ci + r * n);
    } else {  // a times column 0 of b, then copied across
      for (std::size_t kk = 0; kk < k; ++kk) x[kk] = pb[std::int64_t(kk) * b.sr];
      std::vector<T> col(m);
      if (a.trans)
        mm_gemv(true, K, M, pa, int(a.ld), x.data(), 1, col.data(), M);
      else
        mm_gemv(false, M, K, pa, int(a.ld), x.data(), 1, col.data(), M);
      for (std::size_t r = 0; r < m; ++r) std::fill_n(ci + r * n, n, col[r]);
    }
  }
}

// The products of prepared operands into c: what mm_blas runs, and what a recording keeps of
// it (core/recording.hpp).
template <class T>
struct mm_step {
  mm_matrix<T> a, b;
  matmul_dims d;
  T* c;

  void run() {
    std::size_t nb = d.batch.numel(), m = d.m, n = d.n, k = d.k;
    if (a.same_rows || b.same_cols) return mm_repeated(a, b, d, c);
    // b shared by every batch and a's batches stacked at a's leading dimension: one tall gemm.
    bool b_shared = true;
    for (std::size_t i = 0; i < d.batch.size(); ++i) b_shared = b_shared && b.bst[i] == 0;
    bool stack = nb > 1 && b_shared && !a.trans && nb * m <= std::size_t(INT_MAX);
    std::int64_t expect = std::int64_t(m) * a.ld;
    for (std::size_t i = d.batch.size(); stack && i-- > 0;) {
      if (d.batch[i] == 1) continue;
      stack = a.bst[i] == expect;
      expect *= std::int64_t(d.batch[i]);
    }
    if (stack) return mm_product(a, a.leaf.base, b, b.leaf.base, c, nb * m, n, k);
    auto ao = mm_batch_offsets(d.batch, a.bst), bo = mm_batch_offsets(d.batch, b.bst);
    for (std::size_t i = 0; i < nb; ++i)
      mm_product(a, a.leaf.base + ao[i], b, b.leaf.base + bo[i], c + i * m * n, m, n, k);
  }

  void pointers(pointer_list& l) {
    l.writes(c);
    l.reads(a.leaf.base);
    l.reads(b.leaf.base);
  }
};

template <class T, class A, class B>
array<T> mm_blas(A const& lhs, B const& rhs, matmul_dims const& d) {
  auto out = array<T>::empty(d.out);
  if (out.size() == 0) return out;
  if (d.k == 0) {
    fill_values(out.data(), out.size(), T(0));
    return out;
  }
  auto a = mm_prepare<T>(lhs, d, true, true, true);
  auto b = mm_prepare<T>(rhs, d, false, true, true);
  if (a.same_rows && b.same_cols) b = mm_prepare<T>(rhs, d, false, true);
  mm_step<T> step{std::move(a), std::move(b), d, out.data()};
  run_step(step);
  return out;
}

// Integers (wrapping, as NumPy) and bools (or of ands): a strided i-k-j loop.
template <class T, class A, class B>
array<T> mm_loop(A const& lhs, B const& rhs, matmul_dims const& d) {
  // Integer products are not recorded as steps: a replay would miss them.
  note_unreplayable("an integer or bool matmul");
  auto out = array<T>::empty(d.out);
  std::size_t nb = d.batch.numel(), m = d.m, n = d.n, k = d.k;
  if (out.size() == 0) return out;
  std::fill_n(out.data(), out.size(), T(0));
  if (k == 0) return out;
  auto a = mm_prepare<T>(lhs, d, true, false);
  auto b = mm_prepare<T>(rhs, d, false, false);
  auto ao = mm_batch_offsets(d.batch, a.bst), bo = mm_batch_offsets(d.batch, b.bst);
  using U = typename std::conditional_t<std::is_same_v<T, bool>, std::type_identity<bool>,
                                        std::make_unsigned<T>>::type;
  auto row = [&](std::size_t r) {  // output row r = batch * m + i
    std::size_t bi = r / m, i = r % m;
    T const* pa = a.leaf.base + ao[bi] + std::int64_t(i) * a.sr;
    T const* pb = b.leaf.base + bo[bi];
    T* c = out.data() + r * n;
    for (std::size_t kk = 0; kk < k; ++kk) {
      T av = pa[std::int64_t(kk) * a.sc];
      T const* brow = pb + std::int64_t(kk) * b.sr;
      for (std::size_t j = 0; j < n; ++j) {
        T bv = brow[std::int64_t(j) * b.sc];
        if constexpr (std::is_same_v<T, bool>)
          c[j] = c[j] || (av && bv);
        else
          c[j] = T(U(c[j]) + U(av) * U(bv));  // modular (C++20), no signed overflow
      }
    }
  };
  std::size_t rows = nb * m;
  std::size_t threads = thread_pool::instance().size();
  if (rows * n * k < parallel_threshold() * 8 || threads == 1 || rows == 1) {
    for (std::size_t r = 0; r < rows; ++r) row(r);
  } else {
    std::size_t chunks = std::min(rows, threads), per = (rows + chunks - 1) / chunks;
    thread_pool::instance().parallel_for(chunks, [&](std::size_t ch) {
      for (std::size_t r = ch * per; r < std::min(rows, (ch + 1) * per); ++r) row(r);
    });
  }
  return out;
}

}  // namespace detail

// The matmul barrier: found by ADL from the evaluator, returns a fresh array.
template <class A, class B>
array<value_t<matmul_node<A, B>>> eval_barrier(matmul_node<A, B> const& node) {
  using R = value_t<matmul_node<A, B>>;
  if constexpr (std::is_same_v<R, float> || std::is_same_v<R, double>) {
    return detail::mm_blas<R>(node.lhs(), node.rhs(), node.dims);
  } else if constexpr (storage_float<R>) {
    array<float> f = detail::mm_blas<float>(node.lhs(), node.rhs(), node.dims);
    return detail::evaluate_untraced<R>(f);
  } else {
    return detail::mm_loop<R>(node.lhs(), node.rhs(), node.dims);
  }
}

}  // namespace zenith
