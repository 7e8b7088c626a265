#pragma once
// matmul: its derivative rules, on the expression type (reverse<> and forward<> of matmul_node,
// the static path) and on the IR (dot_general_rule, for a "dot_general" equation in numpy
// matmul form). The node is expr/matmul.hpp, its kernels backend/cpu/matmul.hpp (BLAS) and
// backend/cuda/gemm.hpp.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "../../backend/cpu/matmul.hpp"
#include "../../core/runtime_instance.hpp"
#include "../../expr/matmul.hpp"
#include "../forward.hpp"
#include "../ir_builder.hpp"

namespace zenith::autodiff {

// matmul, as numpy.matmul: with both operands seen as stacks of matrices (a vector operand as a
// 1 x k row or a k x 1 column), dA = ct B^T and dB = A^T ct per batch, summed over the batch
// dimensions the operand was broadcast along. When B has no batch dimensions, A's batches are
// stacked into rows and dB is one GEMM: A^T ct over every row at once. Each gradient has one
// expression type whatever the ranks, so the rest of the graph is compiled once.
template <class A, class B>
struct reverse<matmul_node<A, B>> {
  template <class G, class Sink>
  static void run(matmul_node<A, B> const& e, G const& ct, Sink& sink) {
    auto const& a = e.lhs();
    auto const& b = e.rhs();
    auto const& d = e.dims;
    auto with = [](zenith::shape s, std::size_t r, std::size_t c) {
      s.push_back(r);
      s.push_back(c);
      return s;
    };
    auto swap_last = [](std::size_t rank) {
      std::vector<int> perm(rank);
      for (std::size_t i = 0; i < rank; ++i) perm[i] = int(i);
      std::swap(perm[rank - 2], perm[rank - 1]);
      return perm;
    };
    zenith::shape a_full = with(d.a_batch, d.m, d.k), b_full = with(d.b_batch, d.k, d.n);
    auto g = share_operand(ct);
    if constexpr (detail::differentiable_v<A>) {
      auto bt = transpose(reshape(b, b_full), swap_last(b_full.size()));
      auto da = matmul(reshape(g, with(d.batch, d.m, d.n)), bt);
      backward(a, zenith::detail::convert<value_t<A>>(fold_to_node(da, a_full, a.shape())), sink);
    }
    if constexpr (detail::differentiable_v<B>) {
      bool stacked = d.b_batch.empty();
      std::size_t rows = stacked ? d.batch.numel() * d.m : d.m;
      zenith::shape as = stacked ? zenith::shape{rows, d.k} : a_full;
      zenith::shape gs = stacked ? zenith::shape{rows, d.n} : with(d.batch, d.m, d.n);
      auto db = matmul(transpose(reshape(a, as), swap_last(as.size())), reshape(g, gs));
      backward(b, zenith::detail::convert<value_t<B>>(fold_to_node(db, b_full, b.shape())), sink);
    }
  }
};

// matmul: dA B + A dB.
template <class A, class B>
struct forward<matmul_node<A, B>> {
  static auto run(matmul_node<A, B> const& e, tangents const& ts) {
    using T = value_t<matmul_node<A, B>>;
    auto const& a = e.lhs();
    auto const& b = e.rhs();
    if constexpr (detail::differentiable_v<A> && detail::differentiable_v<B>)
      return zenith::detail::convert<T>(matmul(tangent_of(a, ts), b) +
                                        matmul(a, tangent_of(b, ts)));
    else if constexpr (detail::differentiable_v<A>)
      return zenith::detail::convert<T>(matmul(tangent_of(a, ts), b));
    else
      return zenith::detail::convert<T>(matmul(a, tangent_of(b, ts)));
  }
};

}  // namespace zenith::autodiff

namespace zenith::ir::detail {

// numpy's matmul of a and b (the dot_general form expr/to_ir.hpp records).
template <class = void>
value_id matmul(vjp_builder& b, value_id x, value_id y) {
  graph& g = b.g();
  zenith::dtype d = g.at(x).dtype;
  return detail::matmul(g, x, y, zenith::detail::matmul_geometry(g.at(x).shape, g.at(y).shape), d);
}
ZENITH_RUNTIME_INSTANCE(value_id matmul<>(vjp_builder& b, value_id x, value_id y))

// The cotangents of a dot_general in numpy matmul form: a (..., m, k) or (k), b (..., k, n) or
// (k), batch axes equal (the recording broadcast them).
template <class = void>
std::vector<std::optional<value_id>> matmul_vjp(vjp_builder& b, value_id a, value_id bb,
                                                value_id ct) {
  zenith::shape sa = b.g().at(a).shape, sb = b.g().at(bb).shape;
  auto as_matrix = [&](value_id v, bool column) {  // a vector as (k, 1) or (1, k)
    zenith::shape s = b.g().at(v).shape;
    return b.reshape(v, column ? zenith::shape{s[0], 1} : zenith::shape{1, s[0]});
  };
  // Make both operands at least matrices, and ct of the matching (..., m, n) shape.
  value_id A = sa.size() == 1 ? as_matrix(a, false) : a;
  value_id B = sb.size() == 1 ? as_matrix(bb, true) : bb;
  zenith::shape ca = b.g().at(A).shape, cb = b.g().at(B).shape, cs;
  std::size_t batch = std::max(ca.size(), cb.size()) - 2;
  for (std::size_t k = 0; k < batch; ++k) cs.push_back((ca.size() > cb.size() ? ca : cb)[k]);
  cs.push_back(ca[ca.size() - 2]);
  cs.push_back(cb[cb.size() - 1]);
  value_id C = b.reshape(ct, cs);
  // dA = C B^T (summed over a batch A does not have), dB = A^T C (likewise).
  value_id da = matmul(b, C, transpose_last(b, B));
  value_id db = matmul(b, transpose_last(b, A), C);
  if (cb.size() > ca.size()) {  // A broadcast along B's batch: sum it
    da = b.reshape(b.sum(da, (1u << (cb.size() - ca.size())) - 1, false), ca);
  }
  if (ca.size() > cb.size()) {
    zenith::shape s = b.g().at(db).shape;
    std::size_t extra = s.size() - cb.size();
    db = b.reshape(b.sum(db, (1u << extra) - 1, false), cb);
  }
  return {b.reshape(da, sa), b.reshape(db, sb)};
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::optional<value_id>> matmul_vjp<>(vjp_builder& b,
                                                                          value_id a, value_id bb,
                                                                          value_id ct))

// The IR's rules of a "dot_general" equation (numpy matmul form).
struct dot_general_rule {
  static bool names(std::string_view op) { return op == "dot_general"; }
  template <class B>
  static void vjp(B& b, equation const& e, value_id ct, std::vector<std::optional<value_id>>& out) {
    auto r = matmul_vjp(b, e.inputs[0], e.inputs[1], ct);
    out[0] = r[0];
    out[1] = r[1];
  }
  // Bilinear: ta b + a tb.
  template <class B>
  static std::optional<value_id> jvp(B& b, equation const& e,
                                     std::vector<std::optional<value_id>> const& ts) {
    return bilinear_jvp(b, e, ts);
  }
};

}  // namespace zenith::ir::detail
