#pragma once
// matmul: NumPy's matrix product as an expression node. It is a barrier: the CPU backend
// (backend/cpu/matmul.hpp) computes it into a buffer with CBLAS, and an elementwise expression
// around it then reads that buffer as a leaf, so tanh(matmul(x, w)) * 2 + 1 is one GEMM and one
// fused pass.
//
// Shapes follow numpy.matmul:
//   (k) . (k)            -> ()          1-D operands get a 1 prepended (left) or appended
//   (m, k) . (k)         -> (m)         (right), which is removed from the result again
//   (k) . (k, n)         -> (n)
//   (..., m, k) . (..., k, n) -> (..., m, n), the batch dimensions broadcasting
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/expr_base.hpp"
#include "../core/shape.hpp"

namespace zenith {

namespace ops {
// The op tag: IR name and the device implementation the CUDA backend dispatches to.
struct matmul {
  static constexpr std::string_view name = "matmul";
  static constexpr std::string_view cuda = "cublas_gemm";
};
}  // namespace ops

namespace detail {

// The geometry of a matmul after NumPy's promotion of 1-D operands.
struct matmul_dims {
  zenith::shape batch;    // broadcast batch shape
  zenith::shape a_batch;  // a's batch dimensions (leading dims before the matrix)
  zenith::shape b_batch;  // b's batch dimensions
  std::size_t m = 1, k = 1, n = 1;
  bool a_vector = false, b_vector = false;  // 1-D operands
  zenith::shape out;
};

inline matmul_dims matmul_geometry(zenith::shape const& a, zenith::shape const& b) {
  auto fail = [&](std::string const& why) -> void {
    throw shape_error("matmul: " + why + " for shapes " + a.str() + " and " + b.str());
  };
  if (a.size() == 0 || b.size() == 0) fail("rank-0 operand (use multiply for scalars)");
  matmul_dims d;
  d.a_vector = a.size() == 1;
  d.b_vector = b.size() == 1;
  std::size_t ak = a.back();
  d.m = d.a_vector ? 1 : a[a.size() - 2];
  std::size_t bk = d.b_vector ? b[0] : b[b.size() - 2];
  d.n = d.b_vector ? 1 : b.back();
  if (ak != bk)
    fail("contraction dimensions differ (" + std::to_string(ak) + " vs " + std::to_string(bk) +
         ")");
  d.k = ak;
  for (std::size_t i = 0; i + 2 < a.size(); ++i) d.a_batch.push_back(a[i]);
  for (std::size_t i = 0; i + 2 < b.size(); ++i) d.b_batch.push_back(b[i]);
  std::size_t r = d.a_batch.size() > d.b_batch.size() ? d.a_batch.size() : d.b_batch.size();
  d.batch.resize(r);
  for (std::size_t i = 0; i < r; ++i) {
    std::size_t oa = r - d.a_batch.size(), ob = r - d.b_batch.size();
    std::size_t da = i < oa ? 1 : d.a_batch[i - oa];
    std::size_t db = i < ob ? 1 : d.b_batch[i - ob];
    if (da != db && da != 1 && db != 1) fail("batch dimensions do not broadcast");
    d.batch[i] = da == 1 ? db : da;
  }
  d.out = d.batch;
  if (!d.a_vector) d.out.push_back(d.m);
  if (!d.b_vector) d.out.push_back(d.n);
  return d;
}

}  // namespace detail

// The node: both operands by value (array handles are refcounted, so it never dangles).
template <expression A, expression B>
struct matmul_node : expr_base<matmul_node<A, B>> {
  using value_type = promote_t<value_t<A>, value_t<B>>;
  using op_type = ops::matmul;
  static constexpr bool barrier = true;
  static constexpr bool fixed = false;

  std::tuple<A, B> children;
  detail::matmul_dims dims;

  matmul_node(A a, B b) : children(std::move(a), std::move(b)) {
    dims = detail::matmul_geometry(lhs().shape(), rhs().shape());
  }
  A const& lhs() const { return std::get<0>(children); }
  B const& rhs() const { return std::get<1>(children); }
  zenith::shape shape() const { return dims.out; }
  std::tuple<A const&, B const&> operands() const { return {lhs(), rhs()}; }  // expr/node.hpp
  template <class C, class D>
  matmul_node<C, D> with_operands(C c, D d) const {
    return matmul_node<C, D>(std::move(c), std::move(d));
  }

  template <class F>
  void for_each_array(F&& f) const {
    lhs().for_each_array(f);
    rhs().for_each_array(f);
  }
};

// The matrix product of two expressions (NumPy semantics; the result type is promote_t of both).
// Operands are taken as `const&` like the other dynamic ops, so the fixed-size overload in
// fixed_ops.hpp (constrained on fixed_expression, which subsumes expression) wins for tensors.
template <expression A, expression B>
auto matmul(A const& a, B const& b) {
  return matmul_node<A, B>(a, b);
}

}  // namespace zenith
