// The examples of docs/evaluation.md, compiled and run by ctest as doc.evaluation.
// Each `// [doc:NAME]` ... `// [/doc:NAME]` region appears verbatim in the page (doc.snippets
// checks that), and every region asserts its results, so the page cannot rot.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

#include "check.hpp"

void evaluator_tree() {
  // [doc:eval-tree]
  zn::array<float> a = zn::ones<float>({3, 2});
  zn::array<float> row({3}, {1, 2, 3});
  auto e = zn::exp(zn::transpose(a)) * 2.f + row;  // shape (2, 3)

  // The evaluator type mirrors the expression, minus the view: transpose is gone.
  using Ev = zn::evaluator_t<decltype(e)>;
  static_assert(
      std::is_same_v<
          Ev,
          zn::map_eval<zn::ops::add,
                       zn::map_eval<zn::ops::mul, zn::map_eval<zn::ops::exp, zn::leaf_eval<float>>,
                                    zn::scalar_eval<float>>,
                       zn::leaf_eval<float>>>);

  // The transpose and the broadcast live in the leaves' strides (in elements).
  auto ev = zn::make_evaluator(e);
  std::vector<std::array<std::int64_t, zn::max_rank>> strides;
  ev.for_each_leaf([&](auto& leaf) { strides.push_back(leaf.stride); });
  CHECK(strides[0][0] == 1 && strides[0][1] == 2);  // a (3, 2) read transposed
  CHECK(strides[1][0] == 0 && strides[1][1] == 1);  // row: stride 0 along axis 0
  // [/doc:eval-tree]
}

void coalescing() {
  // [doc:eval-coalesce]
  // Output (4, 5, 6) contiguous, plus a (6,) row broadcast along the first two axes:
  zn::shape s{4, 5, 6};
  std::vector<std::array<std::int64_t, zn::max_rank>> strides{{30, 6, 1}, {0, 0, 1}};
  zn::loop_space ls = zn::coalesce(s, strides);
  CHECK(ls.rank == 2 && ls.dims[0] == 20 && ls.dims[1] == 6);  // 20 rows of 6

  // Without the broadcast operand the whole array is one row of 120.
  ls = zn::coalesce(s, {{30, 6, 1}, {30, 6, 1}});
  CHECK(ls.rank == 1 && ls.dims[0] == 120);
  // [/doc:eval-coalesce]
}

void simd_switch() {
  // [doc:eval-simd]
  auto x = zn::linspace<float>(-3, 3, 1001);  // 1001: SIMD batches plus a scalar tail
  zn::array<float> fast = zn::tanh(x) * 2.f;

  zn::set_simd_enabled(false);  // every element through Op::apply (std::tanh)
  zn::array<float> slow = zn::tanh(x) * 2.f;
  zn::set_simd_enabled(true);

  CHECK(zn::allclose(fast, slow, 1e-6, 1e-6));  // within rounding of each other
  // [/doc:eval-simd]
  CHECK(zn::simd_enabled());
}

void threading() {
  // [doc:eval-threads]
  auto x = zn::linspace<float>(0, 1, 1000003);
  std::size_t threads = zn::get_num_threads();  // ZENITH_NUM_THREADS, else all cores

  zn::set_num_threads(1);
  zn::array<float> one = zn::exp(x) * x;
  zn::set_num_threads(4);
  zn::array<float> four = zn::exp(x) * x;
  zn::set_num_threads(threads);

  // Whether an element takes the SIMD or the scalar path depends only on its place in its row,
  // never on the threads: bitwise equal.
  CHECK(std::memcmp(one.data(), four.data(), one.size() * sizeof(float)) == 0);

  zn::set_parallel_threshold(1 << 16);  // below 65536 elements: the calling thread only
  CHECK(zn::parallel_threshold() == 1 << 16);
  zn::set_parallel_threshold(1 << 15);  // the default
  // [/doc:eval-threads]
  // Also when the output stays two-dimensional (a transposed operand, rows of 1001 elements).
  auto m = zn::reshape(zn::linspace<float>(-2, 2, 1001 * 997), {1001, 997});
  zn::set_num_threads(1);
  zn::array<float> t1 = zn::exp(zn::transpose(m)) * 0.5f;
  zn::set_num_threads(3);
  zn::array<float> t3 = zn::exp(zn::transpose(m)) * 0.5f;
  zn::set_num_threads(threads);
  CHECK(std::memcmp(t1.data(), t3.data(), t1.size() * sizeof(float)) == 0);
}

void allocations() {
  // [doc:eval-memory]
  auto a = zn::linspace<float>(0, 1, 10000);
  auto b = zn::linspace<float>(1, 2, 10000);

  zn::reset_peak_memory();
  zn::memory_stats before = zn::cpu_memory_stats();
  zn::array<float> y = zn::sqrt(a * a + b * b) / (1.f + zn::exp(-a));  // 6 ops, one pass
  zn::memory_stats after = zn::cpu_memory_stats();

  CHECK(after.allocations == before.allocations + 1);  // y only: no temporaries
  CHECK(after.peak_bytes == after.bytes_in_use);       // nothing else existed, even briefly

  y = y * 0.5f + 1.f;  // y is its buffer's only owner: evaluated in place
  CHECK(zn::cpu_memory_stats().allocations == after.allocations);
  // [/doc:eval-memory]
}

void barrier() {
  // [doc:eval-barrier]
  auto x = zn::ones<float>({64, 32});
  auto w = zn::full<float>({32, 16}, 0.01f);
  auto before = zn::cpu_memory_stats().allocations;

  zn::array<float> y = zn::tanh(zn::matmul(x, w)) * 2.f + 1.f;  // GEMM, then one fused pass

  CHECK(zn::cpu_memory_stats().allocations == before + 2);  // the GEMM result and y
  CHECK(y.shape() == zn::shape{64, 16});
  CHECK(std::abs(y(0, 0) - (std::tanh(0.32f) * 2.f + 1.f)) < 1e-6f);
  // [/doc:eval-barrier]
}

void reduction_order() {
  // [doc:eval-reduce]
  auto x = zn::linspace<float>(-1, 3, 1000003);
  std::size_t threads = zn::get_num_threads();
  zn::set_num_threads(1);
  float one = zn::eval(zn::sum(zn::exp(x) * x)).item();  // reads x once, no temporary
  zn::set_num_threads(4);
  float four = zn::eval(zn::sum(zn::exp(x) * x)).item();
  zn::set_num_threads(threads);
  CHECK(std::memcmp(&one, &four, sizeof(float)) == 0);  // the order of additions is fixed
  // [/doc:eval-reduce]
  double ref = 0;
  for (std::size_t i = 0; i < x.size(); ++i) ref += std::exp(double(x(i))) * double(x(i));
  CHECK(std::abs(one - ref) < 1e-5 * std::abs(ref));  // pairwise: accurate too
}

// [doc:eval-add-op]
// An op is one tag type: IR name, scalar and SIMD functions, CUDA source, derivative.
namespace my_ops {
struct softplus {
  static constexpr std::string_view name = "softplus";
  static constexpr bool floating_only = true;  // integer inputs compute in float32
  static constexpr std::string_view cuda = "log1p(exp({0}))";
  template <class T>
  static T apply(T x) {
    using std::exp, std::log1p;
    return log1p(exp(x));
  }
  template <class B>
  static B simd(B const& x) {
    return xsimd::log1p(xsimd::exp(x));
  }
  // d/dx, for autodiff: written with zenith's ops, so it serves arrays and plain numbers alike.
  template <std::size_t I, class Y, class X>
  static auto partial(Y const&, X const& x) {
    return zn::detail::apply_op<zn::ops::sigmoid>(x);
  }
};
}  // namespace my_ops

// The public function: builds the node; promotion, broadcasting and evaluation come for free.
template <zn::expression E>
auto softplus(E&& e) {
  return zn::detail::make_map<my_ops::softplus>(std::forward<E>(e));
}
// [/doc:eval-add-op]

void add_op() {
  // [doc:eval-add-op-use]
  zn::array<float> x({5}, {-2, -1, 0, 1, 2});
  zn::array<float> y = softplus(x) * 2.f;  // fused with the multiply, SIMD path included
  for (std::size_t i = 0; i < 5; ++i)
    CHECK(std::abs(y(i) - 2 * std::log1p(std::exp(x(i)))) < 1e-6f);

  zn::array<std::int32_t> n({2}, {0, 1});
  static_assert(std::is_same_v<zn::value_t<decltype(softplus(n))>, float>);
  // [/doc:eval-add-op-use]
  // The derivative rule: sigmoid(x), as a number and as an expression.
  CHECK(my_ops::softplus::partial<0>(0.0, 0.0) == 0.5);
  CHECK(zn::allclose(zn::eval(my_ops::softplus::partial<0>(y, x)), zn::sigmoid(x), 1e-6, 0));
}

int main() {
  evaluator_tree();
  coalescing();
  simd_switch();
  threading();
  allocations();
  barrier();
  reduction_order();
  add_op();
  std::puts("doc.evaluation: all examples passed");
}
