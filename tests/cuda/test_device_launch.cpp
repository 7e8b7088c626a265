// Expressions over device arrays, end to end without a GPU: evaluate_on_device generates the
// kernel, packs its arguments and hands them to the kernel runner, exactly as on a GPU, but the
// runner installed here compiles the generated source for the host (host_grid_shim.hpp) and
// runs it over a small grid, and the "device memory" is host memory that zenith takes for
// cuda:0. So the dispatch, the variant choice, the arguments and the kernels are checked against
// the CPU backend; only the NVRTC compile and the launch through the driver are not (the
// catalogue's kernels compile with NVRTC in test_kernel_compile.cpp; gpu.device_arrays launches
// on a GPU).
#include "emulated_gpu.hpp"

using namespace emulated;

TEST_CASE("expressions over device arrays run as generated kernels", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto a = values<float>({37, 53}, -2, 2), b = values<float>({37, 53}, 0.5, 3);
  auto row = values<float>({53}, -1, 1);
  auto da = a.to(gpu0), db = b.to(gpu0), drow = row.to(gpu0);

  // Contiguous, 16-byte aligned: the vectorized kernel.
  zn::array<float> y = da * zn::sin(db) + zn::exp(-da * da);
  check_close(y, zn::array<float>(a * zn::sin(b) + zn::exp(-a * a)), 4e-6);
  // A broadcast row, a transposed operand, a number: the strided kernel.
  check_close(zn::array<float>(da * drow + 1.5f), zn::array<float>(a * row + 1.5f), 4e-6);
  zn::array<float> t = zn::transpose(da) * 2.f - zn::transpose(db);
  check_close(t, zn::array<float>(zn::transpose(a) * 2.f - zn::transpose(b)), 4e-6);
  // Other element types.
  auto x = values<double>({1001}, 0.25, 4);
  check_close(zn::array<double>(zn::sqrt(x.to(gpu0)) / (1.0 + x.to(gpu0))),
              zn::array<double>(zn::sqrt(x) / (1.0 + x)), 1e-14);
  auto i = values<std::int32_t>({65}, -50, 50);
  check_close(zn::array<std::int32_t>(i.to(gpu0) * 3 - 7), zn::array<std::int32_t>(i * 3 - 7), 0);
  // A one-element array and an empty one.
  auto one = values<float>({1}, 2, 2);
  check_close(zn::array<float>(zn::log(one.to(gpu0))), zn::array<float>(zn::log(one)), 4e-6);
  std::size_t before = host_runner::launches.size();
  zn::array<float> none = zn::exp(zn::array<float>::empty({0, 4}, gpu0));
  CHECK(none.device() == gpu0);
  CHECK(none.size() == 0);
  CHECK(host_runner::launches.size() == before);  // nothing to launch

  // The same expression type and variant again: the same kernel (one source per type).
  zn::array<float> y2 = da * zn::sin(db) + zn::exp(-da * da);
  CHECK(host_runner::launches.back() == host_runner::launches.front());
  check_close(y2, zn::array<float>(y.to(zn::cpu)), 0);
}

namespace {
// The kernel that e's plan gives for an output like out: what its launch must have run.
template <class T, class E>
std::string kernel_of(zn::array<T> const& out, E const& e) {
  auto plan = cu::make_device_plan(e, gpu0);
  return cu::elementwise_kernel<T>(plan, cu::choose_variant(out.data(), out.shape(), plan.operands))
      .name;
}
}  // namespace

TEST_CASE("each launch runs its own expression's kernel, from a cache keyed by the plan's text",
          "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto a = values<float>({8, 16}, -2, 2), b = values<float>({8, 16}, 0.5, 3);
  auto da = a.to(gpu0), db = b.to(gpu0);
  auto dd = values<double>({8, 16}, 0.5, 3).to(gpu0);
  std::vector<std::string> ran, want;
  auto run = [&](auto const& e) {
    using T = zn::value_t<std::remove_cvref_t<decltype(e)>>;
    zn::array<T> out = e;
    ran.push_back(host_runner::launches.back());
    want.push_back(kernel_of(out, e));
  };
  // Plans of one shape that differ in an op, a leaf's type, a view or the output type; and
  // ones that differ only in a literal's value or the arrays read, which share a kernel.
  run(da + db);
  run(da * db);
  run(da * dd);
  run(zn::transpose(da) * zn::transpose(db));
  run(zn::cast<zn::float16>(da * db));
  run(da * 2.f);
  run(da * 3.f);
  run(db * 2.f);
  run(da + db);
  CHECK(ran == want);
  CHECK(ran[0] != ran[1]);
  CHECK(ran[1] != ran[2]);
  CHECK(ran[1] != ran[3]);
  CHECK(ran[1] != ran[4]);
  CHECK(ran[5] == ran[6]);
  CHECK(ran[5] == ran[7]);
  CHECK(ran[8] == ran[0]);
}

TEST_CASE("reductions of device expressions run as generated kernels", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<float>({5, 6, 70}, -1, 1), y = values<float>({6, 70}, -1, 1);
  auto xd = values<double>({9, 4, 33}, -2, 2);
  auto dx = x.to(gpu0), dy = y.to(gpu0);
  auto dxd = xd.to(gpu0);
  check_close(zn::array<float>(zn::sum(zn::exp(dx) * dy, 1)),
              zn::array<float>(zn::sum(zn::exp(x) * y, 1)), 3e-5);
  check_close(zn::array<float>(zn::mean(dx * 2.0f + dy, {0, 2})),
              zn::array<float>(zn::mean(x * 2.0f + y, {0, 2})), 3e-5);
  check_close(zn::array<double>(zn::sum(zn::sin(dxd))), zn::array<double>(zn::sum(zn::sin(xd))),
              1e-12);
  check_close(zn::array<double>(zn::max(dxd, 0)), zn::array<double>(zn::max(xd, 0)), 0);
  check_close(zn::array<double>(zn::logsumexp(dxd, 2, true)),
              zn::array<double>(zn::logsumexp(xd, 2, true)), 1e-12);
  check_close(zn::array<double>(zn::sum(zn::transpose(dxd) * 2.0, 0)),
              zn::array<double>(zn::sum(zn::transpose(xd) * 2.0, 0)), 1e-12);
  check_close(zn::array<std::int64_t>(zn::argmax(dxd * dxd, 1)),
              zn::array<std::int64_t>(zn::argmax(xd * xd, 1)), 0);
  // Few outputs of many elements: each output's elements split among blocks, whose partial
  // states a second kernel combines (reduction_splits).
  REQUIRE(cu::reduction_splits(1, 40000) == 4);
  REQUIRE(cu::reduction_splits(2, 20000) == 2);
  auto long_x = values<double>({40000}, -1, 1);
  auto wide_x = values<float>({2, 20000}, -2, 2);
  auto dlong = long_x.to(gpu0);
  auto dwide = wide_x.to(gpu0);
  auto const before = host_runner::launches.size();
  check_close(zn::array<double>(zn::sum(zn::exp(dlong) * dlong)),
              zn::array<double>(zn::sum(zn::exp(long_x) * long_x)), 1e-12);
  REQUIRE(host_runner::launches.size() == before + 2);  // the partials, then their combination
  CHECK(host_runner::launches.back().rfind("zn_redfin_", 0) == 0);
  check_close(zn::array<float>(zn::mean(zn::sin(dwide), 1)),
              zn::array<float>(zn::mean(zn::sin(wide_x), 1)), 3e-6);
  check_close(zn::array<float>(zn::logsumexp(dwide, 1)), zn::array<float>(zn::logsumexp(wide_x, 1)),
              3e-6);
  check_close(zn::array<double>(zn::max(dlong)), zn::array<double>(zn::max(long_x)), 0);
  check_close(zn::array<std::int64_t>(zn::argmax(dlong)),
              zn::array<std::int64_t>(zn::argmax(long_x)), 0);
  check_close(zn::array<std::int64_t>(zn::argmin(dwide, 1)),
              zn::array<std::int64_t>(zn::argmin(wide_x, 1)), 0);
  // A zero-size reduced axis: the identity, or the CPU's error where there is none.
  auto empty = zn::array<float>::empty({3, 0}).to(gpu0);
  check_close(zn::array<float>(zn::sum(empty, 1)), zn::zeros<float>({3}), 0);
  CHECK_THROWS_AS(zn::array<float>(zn::max(empty, 1)), zn::value_error);
}

TEST_CASE("a jit function over device arrays computes every call", "[cuda][device]") {
  // Launches and copies are not steps a replay repeats: such a recording is not replayed.
  emulated_gpu emulated;
  auto f = zn::jit([](zn::array<float> const& x) { return zn::eval(zn::exp(x) * 2.f); });
  auto g = zn::jit([](zn::array<float> const& x) { return x.to(gpu0); });
  for (float v : {0.5f, -1.f, 2.f}) {
    auto x = values<float>({9}, v, v + 1);
    check_close(f(x.to(gpu0)), zn::array<float>(zn::exp(x) * 2.f), 4e-6);
    check_close(g(x), x, 0);
  }
  CHECK(f.recordings() == 1);
  CHECK(f.replayable_recordings() == 0);
  CHECK(g.replayable_recordings() == 0);
}

TEST_CASE("reductions inside device expressions run first, as kernels of their own",
          "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<float>({7, 40}, -3, 3);
  auto dx = x.to(gpu0);
  check_close(zn::array<float>(dx - zn::sum(dx, 1, true)),
              zn::array<float>(x - zn::sum(x, 1, true)), 4e-6);
  // A softmax written out: a max, then a sum of an expression over it, then the quotient.
  auto soft = [](auto const& v) {
    auto e = zn::exp(v - zn::max(v, 1, true));
    return e / zn::sum(e, 1, true);
  };
  check_close(zn::array<float>(soft(dx)), zn::array<float>(soft(x)), 4e-6);
  // A reshape of an expression, and a reduction of a reduction.
  check_close(zn::array<float>(zn::reshape(dx * 2.f, {40, 7}) + 1.f),
              zn::array<float>(zn::reshape(x * 2.f, {40, 7}) + 1.f), 4e-6);
  check_close(zn::array<float>(zn::sum(zn::max(dx, 1) * 3.f)),
              zn::array<float>(zn::sum(zn::max(x, 1) * 3.f)), 4e-6);
}

TEST_CASE("matmul of device arrays runs as one strided batched GEMM", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<float>({7, 5}, -1, 1), w = values<float>({5, 3}, -2, 2);
  auto b = values<float>({3}, -0.5, 0.5);
  auto dx = x.to(gpu0), dw = w.to(gpu0), db = b.to(gpu0);
  check_close(zn::array<float>(zn::matmul(dx, dw)), zn::array<float>(zn::matmul(x, w)), 1e-6);
  REQUIRE(host_blas::calls.size() == 1);
  CHECK(host_blas::calls[0].m == 7);
  CHECK(host_blas::calls[0].n == 3);
  CHECK(host_blas::calls[0].k == 5);
  CHECK(!host_blas::calls[0].trans_a);
  // Inside an expression: the GEMM first, then one kernel over its result.
  check_close(zn::array<float>(zn::tanh(zn::matmul(dx, dw) + db)),
              zn::array<float>(zn::tanh(zn::matmul(x, w) + b)), 1e-6);
  // A transposed operand is read in place: no copy kernel before the GEMM.
  host_blas::calls.clear();
  std::size_t launched = host_runner::launches.size();
  check_close(zn::array<float>(zn::matmul(zn::transpose(dx), dx)),
              zn::array<float>(zn::matmul(zn::transpose(x), x)), 1e-6);
  REQUIRE(host_blas::calls.size() == 1);
  CHECK(host_blas::calls[0].trans_a);
  CHECK(host_runner::launches.size() == launched);

  // Batches: one operand without (stride 0), both with, one broadcast along some dimensions
  // (expanded first); vectors on either side; double.
  auto a3 = values<double>({2, 3, 4, 5}, -1, 1), m2 = values<double>({5, 6}, -1, 1);
  auto b3 = values<double>({3, 5, 2}, -1, 1), a1 = values<double>({2, 1, 4, 5}, -1, 1);
  auto v = values<double>({5}, -1, 1);
  auto check = [](auto const& got, auto const& want) {
    check_close(zn::array<double>(got), zn::array<double>(want), 1e-12);
  };
  check(zn::matmul(a3.to(gpu0), m2.to(gpu0)), zn::matmul(a3, m2));
  check(zn::matmul(a3.to(gpu0), zn::transpose(a3.to(gpu0), {0, 1, 3, 2})),
        zn::matmul(a3, zn::transpose(a3, {0, 1, 3, 2})));
  check(zn::matmul(a1.to(gpu0), b3.to(gpu0)), zn::matmul(a1, b3));
  check(zn::matmul(a3.to(gpu0), v.to(gpu0)), zn::matmul(a3, v));
  check(zn::matmul(v.to(gpu0), m2.to(gpu0)), zn::matmul(v, m2));
  check(zn::matmul(v.to(gpu0), v.to(gpu0)), zn::matmul(v, v));
  // An empty contraction: zeros, no GEMM.
  host_blas::calls.clear();
  auto e0 = zn::array<double>::empty({3, 0}).to(gpu0),
       e1 = zn::array<double>::empty({0, 2}).to(gpu0);
  check(zn::matmul(e0, e1), zn::zeros<double>({3, 2}));
  CHECK(host_blas::calls.empty());
}

TEST_CASE("softmax, layer_norm, concatenate and stack of device arrays", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<float>({6, 33}, -30, 30), y = values<float>({6, 4}, -1, 1);
  auto dx = x.to(gpu0), dy = y.to(gpu0);
  check_close(zn::array<float>(zn::softmax(dx)), zn::array<float>(zn::softmax(x)), 1e-6);
  check_close(zn::array<float>(zn::softmax(dx * 2.f, 0)), zn::array<float>(zn::softmax(x * 2.f, 0)),
              1e-6);
  check_close(zn::array<float>(zn::log_softmax(dx, 1) + 1.f),
              zn::array<float>(zn::log_softmax(x, 1) + 1.f), 1e-6);
  auto i = values<std::int32_t>({3, 8}, -5, 5);
  check_close(zn::array<float>(zn::softmax(i.to(gpu0))), zn::array<float>(zn::softmax(i)), 1e-6);
  // layer_norm: two reductions (the mean, then the mean square deviation) and the normalization;
  // slices with a large mean, along either axis, an expression input, scaled and shifted after.
  auto far = values<float>({6, 33}, 1000, 1001), g = values<float>({33}, 0.5, 1.5);
  // (Float's spacing at 1000 is 6e-5, a fifth of a thousandth of these slices' deviation; a
  // one-pass variance would be off by more than the variance itself.)
  check_close(zn::array<float>(zn::layer_norm(far.to(gpu0))), zn::array<float>(zn::layer_norm(far)),
              2e-3);
  std::size_t before = host_runner::launches.size();
  check_close(zn::array<float>(zn::layer_norm(dx * 0.5f, 0, 1e-3) * g.to(gpu0) + 1.f),
              zn::array<float>(zn::layer_norm(x * 0.5f, 0, 1e-3) * g + 1.f), 2e-5);
  // The input, two reductions, the normalization, and the expression over it.
  CHECK(host_runner::launches.size() - before == 5);
  auto xd = values<double>({4, 9}, -2, 2);
  check_close(zn::array<double>(zn::layer_norm(xd.to(gpu0))), zn::array<double>(zn::layer_norm(xd)),
              1e-13);
  // Parts written into their slices, an expression part computed in the kernel that writes it.
  check_close(zn::array<float>(zn::concatenate(std::tuple(dx, dy * 2.f), 1)),
              zn::array<float>(zn::concatenate(std::tuple(x, y * 2.f), 1)), 0);
  check_close(zn::array<float>(zn::concatenate({dy, dy, dy}, 0)),
              zn::array<float>(zn::concatenate({y, y, y}, 0)), 0);
  check_close(zn::array<float>(zn::stack(std::tuple(dy, dy + 1.f), 1)),
              zn::array<float>(zn::stack(std::tuple(y, y + 1.f), 1)), 0);
}

TEST_CASE("conv2d of device arrays runs as one library call per part", "[cuda][nvrtc][device]") {
  emulated_gpu emulated;
  auto x = values<float>({2, 3, 9, 8}, -1, 1), w = values<float>({4, 3, 3, 2}, -1, 1);
  zn::conv2d_options o{{2, 1}, {1, 1}, {1, 2}};
  auto dx = x.to(gpu0), dw = w.to(gpu0);
  check_close(zn::array<float>(zn::conv2d(dx, dw, o)), zn::array<float>(zn::conv2d(x, w, o)), 1e-5);
  REQUIRE(host_conv::calls.size() == 1);
  CHECK(host_conv::calls[0].part == zn::conv2d_part::output);
  // An expression operand, the result inside an expression, and the two adjoint parts.
  check_close(zn::array<float>(zn::relu(zn::conv2d(dx * 0.5f, dw, o)) + 1.f),
              zn::array<float>(zn::relu(zn::conv2d(x * 0.5f, w, o)) + 1.f), 1e-5);
  auto geo = zn::conv2d(x, w, o).geometry;
  auto g = values<float>(geo.output(), -1, 1);
  check_close(zn::array<float>(zn::make_conv2d<zn::conv2d_part::input_grad>(g.to(gpu0), dw, geo)),
              zn::array<float>(zn::make_conv2d<zn::conv2d_part::input_grad>(g, w, geo)), 1e-5);
  check_close(zn::array<float>(zn::make_conv2d<zn::conv2d_part::filter_grad>(dx, g.to(gpu0), geo)),
              zn::array<float>(zn::make_conv2d<zn::conv2d_part::filter_grad>(x, g, geo)), 1e-5);
  auto ix = zn::array<std::int32_t>::empty({1, 1, 3, 3}).to(gpu0);
  CHECK_THROWS_AS(zn::array<std::int32_t>(zn::conv2d(ix, ix)), zn::device_error);
}

TEST_CASE("device expressions that cannot run there yet are device_errors", "[cuda][device]") {
  emulated_gpu emulated;
  auto a = values<float>({4, 5}, -1, 1);
  auto da = a.to(gpu0);
  auto message = [](auto f) -> std::string {
    try {
      f();
    } catch (zn::device_error const& e) {
      return e.what();
    }
    return "no device_error";
  };
  auto ia = zn::array<std::int32_t>({2, 2}, {1, 2, 3, 4}).to(gpu0);
  CHECK(message([&] { zn::array<std::int32_t> r = zn::matmul(ia, ia); }) ==
        "zenith: evaluating on cuda:0: matmul of int32 does not run on CUDA devices (float, "
        "double, float16 and bfloat16 do)");
  CHECK(message([&] { zn::array<float> r = da + a; }).find("mixes") != std::string::npos);
  CHECK(host_runner::launches.empty());
}
