// Expressions over device arrays, end to end without a GPU: evaluate_on_device generates the
// kernel, packs its arguments and hands them to the kernel runner, exactly as on a GPU, but the
// runner installed here compiles the generated source for the host (host_grid_shim.hpp) and
// runs it over a small grid, and the "device memory" is host memory that zenith takes for
// cuda:0. So the dispatch, the variant choice, the arguments and the kernels are checked against
// the CPU backend; only the NVRTC compile and the launch through the driver are not (the
// catalogue's kernels compile with NVRTC in test_kernel_compile.cpp; gpu.device_arrays launches
// on a GPU).
#include <dlfcn.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace zn = zenith;
namespace cu = zenith::cuda_backend;

namespace {

struct host_memory {
  static void* allocate(zn::device, std::size_t bytes) { return std::malloc(bytes); }
  static void deallocate(zn::device, void* p, std::size_t) { std::free(p); }
  static void copy(void* dst, zn::device, void const* src, zn::device, std::size_t bytes) {
    std::memcpy(dst, src, bytes);
  }
  static constexpr zn::device_memory table{&allocate, &deallocate, &copy};
};

// Each kernel compiled once into its own host library, with a trampoline that unpacks the
// launch's void** arguments as cuLaunchKernel does.
struct host_runner {
  static inline std::map<std::string, void*> loaded;  // kernel name -> trampoline
  static inline std::vector<std::string> launches;    // names, in launch order
  static inline std::filesystem::path dir;

  static void* load(cu::kernel_source const& k) {
    if (auto it = loaded.find(k.name); it != loaded.end()) return it->second;
    std::string src = "#include \"host_grid_shim.hpp\"\n" + k.text;
    src += "extern \"C\" void call_" + k.name + "(void** a) {\n  " + k.name + "(";
    for (std::size_t p = 0; p < k.params.size(); ++p)
      src += (p ? ", *(" : "*(") + k.params[p] + "*)a[" + std::to_string(p) + "]";
    src += ");\n}\n";
    auto cpp = dir / (k.name + ".cpp"), so = dir / (k.name + ".so");
    std::ofstream(cpp) << src;
    std::string cmd = std::string(ZENITH_TEST_CXX) + " -std=c++20 -O0 -shared -fPIC -w -I" +
                      ZENITH_TEST_INCLUDE + " -I" + ZENITH_TEST_SHIM_DIR + " " + cpp.string() +
                      " -o " + so.string();
    REQUIRE(std::system(cmd.c_str()) == 0);
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h);
    void* fn = dlsym(h, ("call_" + k.name).c_str());
    void* emulate = dlsym(h, "zn_emulate");
    void* emulate_blocks = dlsym(h, "zn_emulate_blocks");
    REQUIRE(fn);
    REQUIRE(emulate);
    REQUIRE(emulate_blocks);
    loaded[k.name] = fn;
    loaded[k.name + "/emulate"] = emulate;
    loaded[k.name + "/emulate_blocks"] = emulate_blocks;
    return fn;
  }
  static void run(zn::device d, cu::kernel_source const& k, cu::kernel_args& a,
                  cu::launch_shape const& shape) {
    CHECK(d == zn::device{zn::device::kind::cuda, 0});
    CHECK(shape.blocks > 0);
    using call_t = void (*)(void**);
    using emulate_t = void (*)(call_t, void**, unsigned, unsigned);
    auto fn = reinterpret_cast<call_t>(load(k));
    auto emulate = reinterpret_cast<emulate_t>(
        loaded[k.name + (shape.cooperative ? "/emulate_blocks" : "/emulate")]);
    auto args = a.pointers();
    // Fewer threads than elements (and blocks than outputs): the grid-stride loops.
    emulate(fn, args.data(), 3, 32);
    launches.push_back(k.name);
  }
  static constexpr cu::kernel_runner table{&run};
};

// Both stand-ins installed for a test's lifetime.
struct emulated_gpu {
  zn::device_memory const* memory;
  cu::kernel_runner const* runner;
  emulated_gpu()
      : memory(zn::install_cuda_memory(&host_memory::table)),
        runner(cu::install_kernel_runner(&host_runner::table)) {
    host_runner::dir = std::filesystem::temp_directory_path() /
                       ("zenith_device_launch_" + std::to_string(::getpid()));
    std::filesystem::create_directories(host_runner::dir);
    host_runner::launches.clear();
  }
  ~emulated_gpu() {
    zn::install_cuda_memory(memory);
    cu::install_kernel_runner(runner);
    std::error_code ec;  // the libraries stay loaded; their files can go
    std::filesystem::remove_all(host_runner::dir, ec);
  }
};

zn::device const gpu0{zn::device::kind::cuda, 0};

template <class T>
zn::array<T> values(zn::shape s, double lo, double hi) {
  std::vector<T> v(s.numel());
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = T(lo + (hi - lo) * double((i * 7919) % 1009) / 1008.0);
  return zn::array<T>(s, v);
}

template <class T>
void check_close(zn::array<T> const& got_on_device, zn::array<T> const& want, double tol) {
  REQUIRE(got_on_device.device() == gpu0);
  zn::array<T> got = got_on_device.to(zn::cpu);
  REQUIRE(got.shape() == want.shape());
  for (std::size_t i = 0; i < want.size(); ++i) {
    double a = double(got.data()[i]), b = double(want.data()[i]);
    INFO("element " << i << ": device " << a << ", CPU " << b);
    REQUIRE(std::abs(a - b) <= tol * (1 + std::abs(b)));
  }
}

}  // namespace

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
  CHECK(message([&] { zn::array<float> r = zn::softmax(da, 1); }) ==
        "zenith: evaluating on cuda:0: only elementwise expressions (arrays, numbers, "
        "elementwise ops, views) and reductions along axes of them run on CUDA devices so far; "
        "bring the arrays to the CPU with .to(zenith::cpu)");
  // A reduction inside an elementwise expression would be evaluated first, on the CPU's path.
  CHECK(message([&] { zn::array<float> r = da - zn::sum(da, 1, true); }).find("on cuda:0") !=
        std::string::npos);
  CHECK(message([&] { zn::array<float> r = da + a; }).find("mixes") != std::string::npos);
  CHECK(host_runner::launches.empty());
}
