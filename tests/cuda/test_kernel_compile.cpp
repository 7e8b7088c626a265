// Every elementwise kernel the op catalogue generates compiles with NVRTC for sm_80 and sm_90:
// each op forward (on float and double; on int32 and the 16-bit floats where the op takes them)
// and each operand's backward expression g * partial (the VJP that autodiff builds from the
// op's rule), in the vectorized layout (whose tail is the contiguous loop) with a 32-bit index,
// and where the result is float or double in the strided layout with a 64-bit one too. Every
// layout and index width is compiled besides for expressions that mix element types. NVRTC needs no
// GPU, so this runs on any machine with the CUDA toolkit (ctest label nvrtc).
#include <catch2/catch.hpp>
#include <zenith/backend/cuda/kernel_source.hpp>
#include <zenith/backend/cuda/nvrtc.hpp>
#include <zenith/backend/cuda/reduce_kernel.hpp>
#include <zenith/zenith.hpp>

#include "op_arity.hpp"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace zn = zenith;
namespace cu = zenith::cuda_backend;

namespace {

constexpr int archs[] = {80, 90};

// Kernels by name (identical sources share one): what each is, and its source.
using kernel_set = std::map<std::string, std::pair<std::string, std::string>>;

std::string describe(cu::kernel_variant const& v) {
  std::string s = v.kind == cu::layout::contiguous   ? "contiguous"
                  : v.kind == cu::layout::vectorized ? "vectorized"
                                                     : "strided";
  return s + (v.index64 ? ", 64-bit index" : ", 32-bit index");
}

// The kernels of out = e in the given variants.
template <class E>
void generate(E const& e, std::string const& what, kernel_set& ks,
              std::initializer_list<cu::kernel_variant> variants) {
  using T = zn::value_t<E>;
  auto const plan = cu::make_device_plan(e, zn::cpu);
  for (auto const& v : variants) {
    cu::kernel_source k = cu::elementwise_kernel<T>(plan, v);
    ks.try_emplace(k.name, what + ", " + describe(v), k.text);
  }
}

// What the catalogue walk generates for each expression: the vectorized layout with leaf 1, if
// any, a broadcast scalar, and for float and double the strided layout with a 64-bit index too.
// An op's snippet is the same text in every layout; each layout and index width is compiled for
// every element type by the mixed-types test below.
template <class E>
void generate(E const& e, std::string const& what, kernel_set& ks) {
  using T = zn::value_t<E>;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    generate(e, what, ks, {{cu::layout::vectorized, false, 0b10}, {cu::layout::strided, true, 0}});
  else
    generate(e, what, ks, {{cu::layout::vectorized, false, 0b10}});
}

// Compiles every kernel of ks for sm_<arch> in one NVRTC program, each in a namespace of its own
// (its prelude is private to it; extern "C" names are global, and distinct): one NVRTC call
// instead of one per kernel. Where that fails, each kernel is compiled alone to name it.
void compile_all(kernel_set const& ks, int arch) {
  std::string all;
  std::size_t i = 0;
  for (auto const& [name, k] : ks)
    all += "namespace zn_k" + std::to_string(i++) + " {\n" + k.second + "}\n";
  INFO(ks.size() << " kernels for sm_" << arch);
  bool ok = true;
  try {
    cu::compiled_kernel c = cu::nvrtc_compile(all, "catalogue", arch);
    CHECK(c.image.size() > 1000 * ks.size());
  } catch (cu::compile_error const&) {
    ok = false;
  }
  if (!ok)
    for (auto const& [name, k] : ks) {
      INFO(k.first << ":\n" << k.second);
      CHECK_NOTHROW(cu::nvrtc_compile(k.second, name, arch));
    }
  CHECK(ok);
}

template <class T>
zn::array<T> values(zn::shape const& s, double lo) {
  std::vector<double> v(s.numel());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = lo + 0.1 * double(i);
  return zn::eval(zn::cast<T>(zn::array<double>(s, v)));
}

// The operands of Op on T: arrays of shape (2, 3); where's condition is bool.
template <class Op, class T>
auto operands() {
  constexpr std::size_t n = op_arity<Op>();
  zn::shape s{2, 3};
  if constexpr (std::is_same_v<Op, zn::ops::where>)
    return std::make_tuple(zn::eval(values<double>(s, 0) > 0.25), values<T>(s, 0.5),
                           values<T>(s, 1.5));
  else if constexpr (n == 1)
    return std::make_tuple(values<T>(s, 0.5));
  else if constexpr (n == 2)
    return std::make_tuple(values<T>(s, 0.5), values<T>(s, 1.5));
  else
    return std::make_tuple(values<T>(s, 0.5), values<T>(s, 0.2), values<T>(s, 1.5));
}

// Op forward on T, and the VJP g * partial<J> of each operand that takes a gradient.
template <class Op, class T>
void generate_op(kernel_set& ks) {
  auto xs = operands<Op, T>();
  std::string what = std::string(Op::name) + " on " + std::string(cu::device_type<T>());
  auto y = std::apply(
      [](auto const&... x) {
        return zn::map_node<Op, zn::array<zn::value_t<decltype(x)>>...>(x...);
      },
      xs);
  generate(y, what, ks);
  if constexpr (!requires { Op::piecewise_constant; } && zn::floating_element<T>) {
    using Y = zn::value_t<decltype(y)>;
    zn::array<Y> yv = y;
    zn::array<Y> g = values<Y>(yv.shape(), 1.0);
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      auto one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        if constexpr (!(I == 0 && std::is_same_v<Op, zn::ops::where>)) {  // not the condition
          auto rule =
              std::apply([&](auto const&... x) { return Op::template partial<I>(yv, x...); }, xs);
          generate(g * rule, what + ", VJP of operand " + std::to_string(I), ks);
        }
      };
      (one(std::integral_constant<std::size_t, J>{}), ...);
    }
    (std::make_index_sequence<op_arity<Op>()>{});
  }
}

template <class Op>
void generate_op_all(kernel_set& ks) {
  generate_op<Op, float>(ks);
  generate_op<Op, double>(ks);
  if constexpr (!zn::is_floating_only<Op>()) generate_op<Op, std::int32_t>(ks);
  if constexpr (op_arity<Op>() == 1) {
    generate_op<Op, zn::bfloat16>(ks);
    generate_op<Op, zn::float16>(ks);
  }
}

template <class... Ops>
kernel_set catalogue_kernels(zn::type_list<Ops...>) {
  kernel_set ks;
  (generate_op_all<Ops>(ks), ...);
  return ks;
}

}  // namespace

// Two tests, one per architecture, so that ctest runs them side by side.
TEST_CASE("every kernel of the op catalogue, forward and backward, compiles for sm_80",
          "[cuda][nvrtc]") {
  kernel_set ks = catalogue_kernels(zn::elementwise_ops{});
  CHECK(ks.size() > 250);
  compile_all(ks, 80);
}

TEST_CASE("every kernel of the op catalogue, forward and backward, compiles for sm_90",
          "[cuda][nvrtc]") {
  compile_all(catalogue_kernels(zn::elementwise_ops{}), 90);
}

TEST_CASE("every layout and index width compiles, on mixed element types", "[cuda][nvrtc]") {
  zn::shape s{4, 5};
  auto a = values<float>(s, 0.5);
  auto d = values<double>({5}, 1.5);
  auto h = values<zn::bfloat16>(s, 0.25);
  auto f = values<zn::float16>({4, 1}, 0.75);
  auto i = values<std::int32_t>(s, 3);
  auto l = values<std::int64_t>({5}, 7);
  kernel_set ks;
  std::initializer_list<cu::kernel_variant> all = {
      {cu::layout::contiguous, false, 0}, {cu::layout::contiguous, true, 0b101},
      {cu::layout::vectorized, false, 0}, {cu::layout::vectorized, true, 0b10},
      {cu::layout::strided, false, 0},    {cu::layout::strided, true, 0}};
  generate(a * zn::sin(d) + zn::cast<float>(h) - zn::cast<float>(f), "float from four types", ks,
           all);
  generate(zn::where(i > 4, zn::cast<double>(l), d * 2.0), "double from ints", ks, all);
  generate(zn::cast<zn::bfloat16>(a * 0.5f), "bfloat16 out", ks, all);
  generate(zn::cast<zn::float16>(zn::exp(zn::cast<float>(h))), "float16 out", ks, all);
  generate(i * 3 + zn::cast<std::int32_t>(l), "int32", ks, all);
  generate(a > zn::cast<float>(f), "bool out", ks, all);
  generate(zn::transpose(a) * 2.0f, "a transposed view", ks, all);
  CHECK(ks.size() == 7 * all.size());
  for (int arch : archs) compile_all(ks, arch);
}

TEST_CASE("a kernel compiles alone, named by a hash of its source", "[cuda][nvrtc]") {
  zn::array<float> a({2, 3}, {1, 2, 3, 4, 5, 6}), b({3}, {1, 2, 3});
  auto e = a * zn::sin(b) + zn::exp(-a * a);
  auto const plan = cu::make_device_plan(e, zn::cpu);
  cu::kernel_source k = cu::elementwise_kernel<float>(plan, {cu::layout::vectorized});
  CHECK(k.name.rfind("zn_ew_", 0) == 0);
  CHECK(k.name.size() == 6 + 16);
  CHECK(k.text.find("extern \"C\" __global__ void " + k.name + "(") != std::string::npos);
  // The same types and variant give the same source; another variant, another name.
  CHECK(cu::elementwise_kernel<float>(plan, {cu::layout::vectorized}).text == k.text);
  CHECK(cu::elementwise_kernel<float>(plan, {cu::layout::strided}).name != k.name);
  for (int arch : archs) {
    CHECK(cu::nvrtc_compile(k.text, k.name, arch).image.size() > 0);
    cu::compiled_kernel ptx = cu::nvrtc_compile(k.text, k.name, arch, cu::image_kind::ptx);
    std::string text(ptx.image.data());
    CHECK(text.find(".target sm_" + std::to_string(arch)) != std::string::npos);
    CHECK(text.find(k.name) != std::string::npos);
  }
}

TEST_CASE("a kernel that does not compile names itself, the architecture and NVRTC's log",
          "[cuda][nvrtc]") {
  std::string bad = "extern \"C\" __global__ void broken(float* p) { p[0] = undeclared; }\n";
  try {
    cu::nvrtc_compile(bad, "broken", 90);
    FAIL("no compile_error");
  } catch (cu::compile_error const& e) {
    std::string m = e.what();
    CHECK(m.find("'broken'") != std::string::npos);
    CHECK(m.find("sm_90") != std::string::npos);
    CHECK(m.find("undeclared") != std::string::npos);
  }
  CHECK(cu::nvrtc_version() >= 11000);
}

namespace {

// The kernel of reduction r in both index widths, and the kernel finishing a split one.
template <class R>
void generate_reduction(R const& r, std::string const& what, kernel_set& ks) {
  using Op = typename R::op_type;
  using A = zn::compute_t<zn::value_t<decltype(r.child)>>;  // the accumulator
  auto const plan = cu::make_device_plan(r.child, zn::cpu);
  for (bool wide : {false, true}) {
    cu::kernel_source k = cu::reduction_kernel<Op, zn::value_t<R>, A>(plan, wide);
    ks.try_emplace(k.name, what + (wide ? ", 64-bit index" : ", 32-bit index"), k.text);
  }
  cu::kernel_source f = cu::reduction_finish_kernel<Op, zn::value_t<R>, A>();
  ks.try_emplace(f.name, what + ", finishing a split reduction", f.text);
}

template <class T>
void generate_reductions(kernel_set& ks) {
  auto x = values<T>({4, 5, 6}, 0.5);
  auto y = values<T>({5, 6}, 1.5);
  std::string t(cu::device_type<T>());
  if constexpr (zn::floating_element<T>) {
    auto e = zn::exp(x) * y;
    generate_reduction(zn::sum(e, 1), "sum on " + t, ks);
    generate_reduction(zn::mean(e, {0, 2}), "mean on " + t, ks);
    generate_reduction(zn::prod(e), "prod on " + t, ks);
    generate_reduction(zn::max(e, 2), "max on " + t, ks);
    generate_reduction(zn::min(e, 0), "min on " + t, ks);
    generate_reduction(zn::logsumexp(e, 1), "logsumexp on " + t, ks);
    generate_reduction(zn::argmax(e, 1), "argmax on " + t, ks);
    generate_reduction(zn::argmin(e), "argmin on " + t, ks);
  } else {
    auto e = x * y + 1;
    generate_reduction(zn::sum(e, 1), "sum on " + t, ks);
    generate_reduction(zn::prod(e, 2), "prod on " + t, ks);
    generate_reduction(zn::max(e, 0), "max on " + t, ks);
    generate_reduction(zn::min(e), "min on " + t, ks);
    generate_reduction(zn::argmax(e, 2), "argmax on " + t, ks);
  }
}

}  // namespace

TEST_CASE("every reduction with an elementwise prologue compiles for sm_80 and sm_90",
          "[cuda][nvrtc]") {
  kernel_set ks;
  generate_reductions<float>(ks);
  generate_reductions<double>(ks);
  generate_reductions<zn::bfloat16>(ks);
  generate_reductions<std::int32_t>(ks);
  generate_reductions<std::int64_t>(ks);
  // Both index widths of each, and the kernels finishing split reductions: one per op and type,
  // except that argmax and argmin on bfloat16 share float's (float states, int64 indices out).
  CHECK(ks.size() == 2 * (8 * 3 + 5 * 2) + (8 * 3 + 5 * 2 - 2));
  for (int arch : archs) compile_all(ks, arch);
}
