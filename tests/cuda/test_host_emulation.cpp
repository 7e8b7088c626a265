// The generated kernels' indexing and broadcasting, checked without a GPU: the same CUDA source
// that NVRTC compiles is compiled for the host with a small grid shim (host_grid_shim.hpp: the
// launch becomes loops over blocks and threads), then run on random inputs with the arguments
// the CUDA backend would pass (backend/cuda/kernel_args.hpp), and compared with the CPU backend.
// Each expression runs in the variant plan_elementwise picks and in the strided one, on a grid
// smaller than the array, so the grid-stride loops wrap.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <zenith/backend/cuda/kernel_args.hpp>
#include <zenith/backend/cuda/kernel_source.hpp>
#include <zenith/backend/cuda/reduce_kernel.hpp>
#include <zenith/zenith.hpp>

#include "grid_position.hpp"
#include "host_compile.hpp"
#include "op_arity.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace zn = zenith;
namespace cu = zenith::cuda_backend;

namespace {

// One expression's check: its kernels (by variant), the arguments, and the comparison, all set
// up before the host library is built, then run once it is loaded.
struct emulated_case {
  std::string what;
  std::vector<cu::kernel_source> kernels;
  std::function<void(std::function<void(cu::kernel_source const&, cu::kernel_args&)>)> run;
};

// The kernel library: every case's kernels with a trampoline each (the void** arguments unpacked
// into the kernel's parameters, as cuLaunchKernel does), compiled by the host compiler.
class host_library {
 public:
  explicit host_library(std::vector<emulated_case> const& cases) {
    // A directory (so a library path) of its own per library: GCC makes the shim's inline
    // variables unique symbols (STB_GNU_UNIQUE), glibc then keeps the library loaded after
    // dlclose, and a dlopen of the same path would return that earlier library.
    static int libraries = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("zenith_emulation_" + std::to_string(::getpid()) + "_" + std::to_string(libraries++));
    std::filesystem::create_directories(dir_);
    std::string src = "#include \"host_grid_shim.hpp\"\n";
    std::size_t i = 0;
    std::map<std::string, bool> seen;
    for (auto const& c : cases)
      for (auto const& k : c.kernels) {
        if (seen[k.name]) continue;
        seen[k.name] = true;
        src += "namespace zn_k" + std::to_string(i++) + " {\n" + k.text;
        src += "extern \"C\" void call_" + k.name + "(void** a) {\n  " + k.name + "(";
        for (std::size_t p = 0; p < k.params.size(); ++p)
          src += (p ? ", *(" : "*(") + k.params[p] + "*)a[" + std::to_string(p) + "]";
        src += ");\n}\n}\n";
      }
    std::ofstream(dir_ / "kernels.cpp") << src;
    std::string cmd = emulated::host_compile_command(dir_ / "kernels.cpp", dir_ / "kernels.so") +
                      " 2> " + (dir_ / "log.txt").string();
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(dir_ / "log.txt");
      error_ = "host compile failed: " + cmd + "\n" +
               std::string(std::istreambuf_iterator<char>(log), {});
      return;
    }
    handle_ = dlopen((dir_ / "kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) error_ = dlerror();
  }
  ~host_library() {
    if (handle_) dlclose(handle_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string const& error() const { return error_; }

  // Runs kernel k with the launch's arguments on a grid of grid x block threads.
  // cooperative: the threads of a block run at once (kernels with __syncthreads).
  void launch(cu::kernel_source const& k, cu::kernel_args& a, unsigned grid, unsigned block,
              bool cooperative = false) {
    using call_t = void (*)(void**);
    using emulate_t = void (*)(call_t, void**, unsigned, unsigned, zn_position_fn);
    auto fn = reinterpret_cast<call_t>(dlsym(handle_, ("call_" + k.name).c_str()));
    auto emulate = reinterpret_cast<emulate_t>(
        dlsym(handle_, cooperative ? "zn_emulate_blocks" : "zn_emulate"));
    REQUIRE(fn);
    REQUIRE(emulate);
    auto args = a.pointers();
    emulate(fn, args.data(), grid, block, &zn_host_position);
  }

 private:
  std::filesystem::path dir_;
  void* handle_ = nullptr;
  std::string error_;
};

std::mt19937_64 rng(20261124);

template <class T>
zn::array<T> random_array(zn::shape const& s, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(s.numel());
  for (auto& x : v) x = u(rng);
  return zn::eval(zn::cast<T>(zn::array<double>(s, v)));
}

// Relative agreement: the CPU's SIMD transcendentals and the host libm differ by a few ulps.
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-13;
  if constexpr (std::is_same_v<T, float>) return 4e-6;
  if constexpr (zn::storage_float<T>) return 1.6e-2;  // one ulp of an 8-bit mantissa
  return 0;
}

// a and b agree within a relative tolerance; NaN agrees with NaN only, an infinity with the
// same infinity only.
bool agree(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::abs(a - b) <= tol * (1 + std::abs(b));
}

// A case for out = e: the variant the planner picks and the strided one, each compared with the
// CPU backend's zn::eval(e).
template <class E>
emulated_case make_case(std::string what, E e) {
  using T = zn::value_t<E>;
  emulated_case c;
  c.what = what;
  zn::array<T> probe = zn::array<T>::empty(e.shape());
  auto plan = cu::make_device_plan(e, zn::cpu);
  cu::kernel_variant picked = cu::choose_variant(probe.data(), probe.shape(), plan.operands);
  cu::kernel_variant strided{cu::layout::strided, picked.index64, 0};
  c.kernels = {cu::elementwise_kernel<T>(plan, picked), cu::elementwise_kernel<T>(plan, strided)};
  c.run = [e, what, picked, strided](auto launch) {
    zn::array<T> want = zn::eval(e);
    for (bool force_strided : {false, true}) {
      zn::array<T> got = zn::zeros<T>(e.shape());
      auto plan = cu::make_device_plan(e, zn::cpu);
      cu::kernel_variant v = force_strided ? strided : picked;
      CHECK(cu::choose_variant(got.data(), got.shape(), plan.operands).kind == picked.kind);
      cu::kernel_args args = cu::launch_args(v, got.data(), got.shape(), plan.operands);
      INFO(what << (force_strided
                        ? ", strided"
                        : ", as planned (layout " + std::to_string(int(picked.kind)) + ")"));
      launch(cu::elementwise_kernel<T>(plan, v), args);
      for (std::size_t i = 0; i < want.size(); ++i) {
        double a = double(got.data()[i]), b = double(want.data()[i]);
        INFO("element " << i << ": emulated " << a << ", CPU " << b);
        REQUIRE(agree(a, b, tolerance<T>()));
      }
    }
  };
  return c;
}

}  // namespace

namespace {

// Op over arrays from x() (where's condition a comparison of two of them; a three-operand op's
// operands from x3()).
template <class Op, class T, class X, class X3>
void add_map_case(std::vector<emulated_case>& cases, std::string const& what, X x, X3 x3) {
  using A = zn::array<T>;
  if constexpr (std::is_same_v<Op, zn::ops::where>) {
    cases.push_back(
        make_case(what, zn::map_node<Op, zn::array<bool>, A, A>(zn::eval(x() > x()), x(), x())));
  } else if constexpr (op_arity<Op>() == 1) {
    cases.push_back(make_case(what, zn::map_node<Op, A>(x())));
  } else if constexpr (op_arity<Op>() == 2) {
    cases.push_back(make_case(what, zn::map_node<Op, A, A>(x(), x())));
  } else {
    auto [a, b, c] = x3();
    cases.push_back(make_case(what, zn::map_node<Op, A, A, A>(a, b, c)));
  }
}

// Op on random arrays of T, in the op's domain (every op takes [0.25, 2]).
template <class Op, class T>
void add_op(std::vector<emulated_case>& cases) {
  zn::shape s{7, 13};
  auto x = [&] {
    if constexpr (std::is_same_v<T, std::int32_t>)
      return random_array<T>(s, 1, 9);
    else
      return random_array<T>(s, 0.25, 2);
  };
  add_map_case<Op, T>(
      cases, std::string(Op::name) + " on " + std::string(cu::device_type<T>()), x,
      [&] { return std::tuple(x(), zn::array<T>(x() * 0.5), zn::array<T>(x() + 1)); });
}

// Op on arrays of T that hold NaN, +inf, -inf, 0 and -0 among ordinary values, in every operand:
// a device kernel must give what the CPU gives for them too. Elements 0..24 pair every special
// value of the first operand with every one of the second (the third takes a third pattern),
// 25..29 put a special value against ordinary ones in the first operand, 30..34 in the second.
// The operands are built one statement after another: the pairings must not depend on the
// order in which a compiler evaluates function arguments.
template <class Op, class T>
void add_special_op(std::vector<emulated_case>& cases) {
  zn::shape s{5, 8};
  double const nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  double const special[] = {nan, inf, -inf, 0.0, -0.0};
  auto x = [&](std::size_t operand) {
    zn::array<T> a = random_array<T>(s, -2, 2);
    for (std::size_t i = 0; i < 25; ++i) {
      std::size_t const k = operand == 0 ? i % 5 : operand == 1 ? i / 5 : (i / 5 + i) % 5;
      a.data()[i] = T(special[k]);
    }
    if (operand < 2)
      for (std::size_t i = 0; i < 5; ++i) a.data()[25 + 5 * operand + i] = T(special[i]);
    return a;
  };
  std::string const what = std::string(Op::name) + " on " + std::string(cu::device_type<T>()) +
                           " with NaN, infinities and zeros";
  using A = zn::array<T>;
  A a = x(0), b = x(1), c = x(2);
  if constexpr (std::is_same_v<Op, zn::ops::where>)
    cases.push_back(
        make_case(what, zn::map_node<Op, zn::array<bool>, A, A>(zn::eval(a > b), b, c)));
  else if constexpr (op_arity<Op>() == 1)
    cases.push_back(make_case(what, zn::map_node<Op, A>(a)));
  else if constexpr (op_arity<Op>() == 2)
    cases.push_back(make_case(what, zn::map_node<Op, A, A>(a, b)));
  else
    cases.push_back(make_case(what, zn::map_node<Op, A, A, A>(a, b, c)));
}

template <class... Ops>
void add_catalogue(std::vector<emulated_case>& cases, zn::type_list<Ops...>) {
  (add_special_op<Ops, float>(cases), ...);
  (add_special_op<Ops, double>(cases), ...);
  (add_op<Ops, float>(cases), ...);
  (add_op<Ops, double>(cases), ...);
  (
      [&] {
        if constexpr (!zn::is_floating_only<Ops>()) add_op<Ops, std::int32_t>(cases);
      }(),
      ...);
}

}  // namespace

TEST_CASE("generated kernels compiled for the host compute what the CPU backend computes",
          "[cuda][nvrtc]") {
  std::vector<emulated_case> cases;
  auto a = random_array<float>({37, 29}, -2, 2), c = random_array<float>({37, 29}, -2, 2);
  auto b = random_array<float>({29}, -2, 2);
  cases.push_back(make_case("a * sin(b) + exp(-c * c), b broadcast along rows",
                            a * zn::sin(b) + zn::exp(-c * c)));
  cases.push_back(
      make_case("a * sin(c) + exp(-c * c), contiguous", a * zn::sin(c) + zn::exp(-c * c)));
  auto x = random_array<double>({3, 1}, -1, 1), y = random_array<double>({1, 4}, -1, 1);
  cases.push_back(make_case("x (3, 1) + y (1, 4)", x + y * 2.0));
  auto m = random_array<double>({6, 5}, -1, 1), mt = random_array<double>({5, 6}, -1, 1);
  cases.push_back(make_case("a transposed view", zn::transpose(m) * 3.0 - mt));
  auto v = random_array<float>({1001}, -1, 1);
  auto one = random_array<float>({1}, 1, 2);
  cases.push_back(make_case("a one-element array broadcast to 1001", v / one + 0.5f));
  cases.push_back(make_case("a slice starting one element in (unaligned)",
                            zn::slice(v, {zn::range{1, 1001}}) * 2.0f));
  auto i = random_array<std::int32_t>({4, 9}, 0, 9);
  auto l = random_array<std::int64_t>({9}, -5, 5);
  auto d = random_array<double>({4, 9}, -1, 1);
  cases.push_back(make_case("where over int32 and int64, to double",
                            zn::where(i > 4, zn::cast<double>(l), d * 2.0)));
  auto h = random_array<zn::bfloat16>({8, 33}, -2, 2);
  auto f = random_array<zn::float16>({8, 1}, -2, 2);
  cases.push_back(
      make_case("bfloat16 and float16 to float", zn::cast<float>(h) * zn::cast<float>(f) + 1.0f));
  cases.push_back(
      make_case("float to bfloat16", zn::cast<zn::bfloat16>(zn::exp(zn::cast<float>(h)))));
  cases.push_back(make_case("float to float16", zn::cast<zn::float16>(zn::cast<float>(h) * 0.5f)));
  cases.push_back(make_case("a comparison, to bool", a > c));
  add_catalogue(cases, zn::elementwise_ops{});

  // Every layout is exercised.
  std::map<cu::layout, int> layouts;
  for (auto const& cs : cases) {
    CHECK(cs.kernels.size() == 2);
    auto const& first = cs.kernels.front().text;
    layouts[first.find("zn_geom g") != std::string::npos ? cu::layout::strided
            : first.find("zn_pack") != std::string::npos ? cu::layout::vectorized
                                                         : cu::layout::contiguous]++;
  }
  CHECK(layouts[cu::layout::vectorized] > 0);
  CHECK(layouts[cu::layout::contiguous] > 0);
  CHECK(layouts[cu::layout::strided] > 0);

  host_library lib(cases);
  INFO(lib.error());
  REQUIRE(lib.error().empty());
  for (auto& cs : cases)
    cs.run([&](cu::kernel_source const& k, cu::kernel_args& args) { lib.launch(k, args, 3, 32); });
}

namespace {

// A reduction node r (zn::sum(e, axes), ...): its kernel in both index widths, in one launch and
// split (each output's elements shared by 2 or 7 blocks, whose partial states the finishing
// kernel combines; with 7 splits of a short axis some splits see nothing but the identity),
// against zn::eval(r).
template <class R>
emulated_case make_reduction_case(std::string what, R r) {
  using Op = typename R::op_type;
  using T = zn::value_t<R>;
  using A = zn::compute_t<zn::value_t<decltype(r.child)>>;  // the accumulator
  emulated_case c;
  c.what = what;
  auto const plan = cu::make_device_plan(r.child, zn::cpu);
  c.kernels = {cu::reduction_kernel<Op, T, A>(plan, false),
               cu::reduction_kernel<Op, T, A>(plan, true), cu::reduction_finish_kernel<Op, T, A>()};
  c.run = [r, what](auto launch) {
    zn::array<T> want = zn::eval(r);
    auto const nout = std::int64_t(want.size()), count = std::int64_t(r.count());
    for (bool wide : {false, true}) {
      for (std::int64_t splits : {1, 2, 7}) {
        INFO(what << (wide ? ", 64-bit index" : ", 32-bit index") << ", " << splits << " splits");
        zn::array<T> got = zn::zeros<T>(want.shape());
        auto plan = cu::make_device_plan(r.child, zn::cpu);
        std::vector<std::int64_t> part(
            (std::size_t(nout * splits) * cu::reduction_state_bytes<Op, A>() + 7) / 8, -1);
        cu::kernel_args args = cu::reduction_args(wide, got.data(), r.child.shape(), r.axes,
                                                  plan.operands, splits, part.data());
        launch(cu::reduction_kernel<Op, T, A>(plan, wide), args);
        if (splits > 1) {
          cu::kernel_args fin =
              cu::reduction_finish_args(nout, count, splits, got.data(), part.data());
          launch(cu::reduction_finish_kernel<Op, T, A>(), fin);
        }
        for (std::size_t i = 0; i < want.size(); ++i) {
          double a = double(got.data()[i]), b = double(want.data()[i]);
          INFO("element " << i << ": emulated " << a << ", CPU " << b);
          REQUIRE(std::abs(a - b) <= 8 * tolerance<T>() * (1 + std::abs(b)));
        }
      }
    }
  };
  return c;
}

}  // namespace

TEST_CASE("generated reduction kernels compiled for the host reduce as the CPU backend does",
          "[cuda][nvrtc]") {
  auto x = random_array<float>({5, 6, 7}, -1, 1), y = random_array<float>({6, 7}, -1, 1);
  auto xd = random_array<double>({9, 4, 33}, -2, 2);
  auto i = random_array<std::int32_t>({6, 50}, -9, 9);
  std::vector<emulated_case> cases;
  cases.push_back(make_reduction_case("sum(exp(x) * y, axis 1)", zn::sum(zn::exp(x) * y, 1)));
  cases.push_back(make_reduction_case("mean over axes 0 and 2", zn::mean(x * 2.0f + y, {0, 2})));
  cases.push_back(make_reduction_case("sum of everything", zn::sum(zn::sin(xd))));
  cases.push_back(make_reduction_case("prod over axis 2", zn::prod(xd * 0.1 + 1.0, 2)));
  cases.push_back(make_reduction_case("max over axis 0", zn::max(xd, 0)));
  cases.push_back(make_reduction_case("min over axis 1, keepdims", zn::min(xd, 1, true)));
  cases.push_back(make_reduction_case("logsumexp over axis 2", zn::logsumexp(xd, 2)));
  cases.push_back(make_reduction_case("int32 sum over axis 1", zn::sum(i * 3, 1)));
  cases.push_back(make_reduction_case("argmax over axis 1", zn::argmax(xd * xd, 1)));
  cases.push_back(make_reduction_case("argmin of everything", zn::argmin(zn::sin(xd))));
  auto ties = random_array<std::int32_t>({5, 70}, 0, 3);  // many equal values: the first wins
  cases.push_back(make_reduction_case("argmax with ties", zn::argmax(ties, 1)));
  cases.push_back(make_reduction_case("argmin with ties", zn::argmin(ties, 0)));
  cases.push_back(make_reduction_case("a transposed child", zn::sum(zn::transpose(xd) * 2.0, 0)));
  host_library lib(cases);
  INFO(lib.error());
  REQUIRE(lib.error().empty());
  // 3 blocks of 8 threads: the grid-stride loop and three levels of the block's tree. Each
  // emulated thread is an OS thread meeting the others at a barrier per level, which costs
  // seconds per kernel under the sanitizers at 32 threads a block (the tree is blockDim's).
  for (auto& cs : cases)
    cs.run([&](cu::kernel_source const& k, cu::kernel_args& args) {
      lib.launch(k, args, 3, 8, true);
    });
}
