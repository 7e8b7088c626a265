#pragma once
// A stand-in GPU for tests without one: "device memory" is host memory that only kernels and
// copies may touch, and the kernel runner compiles each generated kernel for the host
// (host_grid_shim.hpp) and runs it over a small grid. Installed for a test's lifetime by
// emulated_gpu; the dispatch, the variant choice, the arguments and the kernels then run exactly
// as on a GPU, and results are compared with the CPU backend's.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <zenith/backend/cuda/nvrtc.hpp>
#include <zenith/zenith.hpp>

#include "device_values.hpp"
#include "grid_position.hpp"
#include "host_compile.hpp"

#include <algorithm>
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

namespace emulated {

// "Device memory" is host memory that the host cannot touch outside a kernel or a copy: each
// block is mapped with no access and opened only while the stand-in runner or the copy runs. So
// any host code that reads a device array (as a CPU loop would) crashes the test, as it would
// crash on a GPU, instead of passing on memory that happens to be the host's.
struct host_memory {
  static inline std::map<void*, std::size_t> live;  // block -> mapped bytes

  static std::size_t mapped(std::size_t bytes) {
    std::size_t page = std::size_t(::sysconf(_SC_PAGESIZE));
    return std::max<std::size_t>(page, (bytes + page - 1) / page * page);
  }
  static void* allocate(zn::device d, std::size_t bytes) {
    if (d == zn::cpu) return std::malloc(bytes);  // "page-locked" host memory
    std::size_t m = mapped(bytes);
    void* p = ::mmap(nullptr, m, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    live[p] = m;
    return p;
  }
  static void deallocate(zn::device d, void* p, std::size_t) {
    if (d == zn::cpu) return std::free(p);
    auto it = live.find(p);
    REQUIRE(it != live.end());
    ::munmap(p, it->second);
    live.erase(it);
  }
  // Opens (or closes) every device block to the host.
  static void open_all(bool open) {
    for (auto const& [p, m] : live) ::mprotect(p, m, open ? PROT_READ | PROT_WRITE : PROT_NONE);
  }
  static void copy(void* dst, zn::device, void const* src, zn::device, std::size_t bytes) {
    open_all(true);
    std::memcpy(dst, src, bytes);
    open_all(false);
  }
  static constexpr zn::device_memory table{&allocate, &deallocate, &copy};
};

// Each kernel compiled once with NVRTC (so every kernel these tests generate is known to build
// for a GPU) and once into its own host library, with a trampoline that unpacks the
// launch's void** arguments as cuLaunchKernel does.
struct host_runner {
  static inline std::map<std::string, void*> loaded;  // kernel name -> trampoline
  static inline std::vector<void*> libraries;         // dlopen handles, closed by the test's end
  static inline std::vector<std::string> launches;    // names, in launch order
  static inline std::filesystem::path dir;

  static void* load(cu::kernel_source const& k) {
    if (auto it = loaded.find(k.name); it != loaded.end()) return it->second;
    // What a GPU would be given: the same source must compile with NVRTC (for sm_80).
    REQUIRE(!cu::nvrtc_compile(k.text, k.name, 80).image.empty());
    std::string src = "#include \"host_grid_shim.hpp\"\n" + k.text;
    src += "extern \"C\" void call_" + k.name + "(void** a) {\n  " + k.name + "(";
    for (std::size_t p = 0; p < k.params.size(); ++p)
      src += (p ? ", *(" : "*(") + k.params[p] + "*)a[" + std::to_string(p) + "]";
    src += ");\n}\n";
    auto cpp = dir / (k.name + ".cpp"), so = dir / (k.name + ".so");
    std::ofstream(cpp) << src;
    std::string cmd = host_compile_command(cpp, so);
    REQUIRE(std::system(cmd.c_str()) == 0);
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h);
    libraries.push_back(h);
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
    using emulate_t = void (*)(call_t, void**, unsigned, unsigned, zn_position_fn);
    auto fn = reinterpret_cast<call_t>(load(k));
    auto emulate = reinterpret_cast<emulate_t>(
        loaded[k.name + (shape.cooperative ? "/emulate_blocks" : "/emulate")]);
    auto args = a.pointers();
    // Fewer threads than elements (and blocks than outputs): the grid-stride loops. A
    // cooperative kernel's threads are OS threads meeting at a barrier (host_grid_shim.hpp):
    // 8 a block, three levels of a reduction's tree, since 32 cost seconds per launch under the
    // sanitizers.
    host_memory::open_all(true);
    emulate(fn, args.data(), 3, shape.cooperative ? 8 : 32, &zn_host_position);
    host_memory::open_all(false);
    launches.push_back(k.name);
  }
  static constexpr cu::kernel_runner table{&run};
};

// GEMMs as cuBLAS would run them (gemm.hpp's row-major contract), on the host, accumulated in
// double: float and double only.
struct host_blas {
  static inline std::vector<cu::gemm_call> calls;

  template <class T>
  static void gemm_as(cu::gemm_call const& g) {
    auto a = static_cast<T const*>(g.a);
    auto b = static_cast<T const*>(g.b);
    auto c = static_cast<T*>(g.c);
    for (std::int64_t q = 0; q < g.batch; ++q)
      for (std::int64_t i = 0; i < g.m; ++i)
        for (std::int64_t j = 0; j < g.n; ++j) {
          double acc = 0;
          for (std::int64_t p = 0; p < g.k; ++p) {
            T x = g.trans_a ? a[q * g.stride_a + p * g.m + i] : a[q * g.stride_a + i * g.k + p];
            T y = g.trans_b ? b[q * g.stride_b + j * g.k + p] : b[q * g.stride_b + p * g.n + j];
            acc += double(x) * double(y);
          }
          c[q * g.stride_c + i * g.n + j] = T(acc);
        }
  }
  static void gemm(zn::device d, cu::gemm_call const& g) {
    CHECK(d == zn::device{zn::device::kind::cuda, 0});
    REQUIRE((g.type == cu::gemm_type::f32 || g.type == cu::gemm_type::f64));
    calls.push_back(g);
    host_memory::open_all(true);
    if (g.type == cu::gemm_type::f32)
      gemm_as<float>(g);
    else
      gemm_as<double>(g);
    host_memory::open_all(false);
  }
  static constexpr cu::blas_runner table{&gemm};
};

// Convolutions as cuDNN would run them (conv.hpp's contract), on the host, written as the
// definition's loops (float and double).
struct host_conv {
  static inline std::vector<cu::conv_call> calls;

  template <class T>
  static void run_as(cu::conv_call const& cc) {
    auto const& g = cc.g;
    auto a = static_cast<T const*>(cc.a);
    auto b = static_cast<T const*>(cc.b);
    auto out = static_cast<T*>(cc.out);
    zn::shape s = cc.part == zn::conv2d_part::output       ? g.output()
                  : cc.part == zn::conv2d_part::input_grad ? g.input()
                                                           : g.filter();
    for (std::size_t i = 0; i < s.numel(); ++i) out[i] = T(0);
    for (std::size_t n = 0; n < g.n; ++n)
      for (std::size_t o = 0; o < g.o; ++o)
        for (std::size_t i = 0; i < g.oh; ++i)
          for (std::size_t j = 0; j < g.ow; ++j)
            for (std::size_t c = 0; c < g.c; ++c)
              for (std::size_t p = 0; p < g.kh; ++p)
                for (std::size_t q = 0; q < g.kw; ++q) {
                  auto r = std::int64_t(i * g.stride[0] + p * g.dil[0]) - std::int64_t(g.pad[0]);
                  auto t = std::int64_t(j * g.stride[1] + q * g.dil[1]) - std::int64_t(g.pad[1]);
                  if (r < 0 || t < 0 || r >= std::int64_t(g.h) || t >= std::int64_t(g.w)) continue;
                  std::size_t xi = ((n * g.c + c) * g.h + std::size_t(r)) * g.w + std::size_t(t);
                  std::size_t wi = ((o * g.c + c) * g.kh + p) * g.kw + q;
                  std::size_t yi = ((n * g.o + o) * g.oh + i) * g.ow + j;
                  if (cc.part == zn::conv2d_part::output)
                    out[yi] += a[xi] * b[wi];
                  else if (cc.part == zn::conv2d_part::input_grad)
                    out[xi] += a[yi] * b[wi];
                  else
                    out[wi] += a[xi] * b[yi];
                }
  }
  static void run(zn::device d, cu::conv_call const& c) {
    CHECK(d == zn::device{zn::device::kind::cuda, 0});
    REQUIRE((c.type == cu::gemm_type::f32 || c.type == cu::gemm_type::f64));
    calls.push_back(c);
    host_memory::open_all(true);
    if (c.type == cu::gemm_type::f32)
      run_as<float>(c);
    else
      run_as<double>(c);
    host_memory::open_all(false);
  }
  static constexpr cu::conv_runner table{&run};
};

// The stand-ins installed for a test's lifetime.
struct emulated_gpu {
  zn::device_memory const* memory;
  cu::kernel_runner const* runner;
  cu::blas_runner const* blas;
  cu::conv_runner const* conv;
  emulated_gpu()
      : memory(zn::install_cuda_memory(&host_memory::table)),
        runner(cu::install_kernel_runner(&host_runner::table)),
        blas(cu::install_blas_runner(&host_blas::table)),
        conv(cu::install_conv_runner(&host_conv::table)) {
    host_blas::calls.clear();
    host_conv::calls.clear();
    host_runner::dir = std::filesystem::temp_directory_path() /
                       ("zenith_device_launch_" + std::to_string(::getpid()));
    std::filesystem::create_directories(host_runner::dir);
    host_runner::launches.clear();
  }
  ~emulated_gpu() {
    // The kernels' libraries are closed: a process that ends with a hundred extra modules
    // loaded is one more thing for LeakSanitizer's exit scan to walk. (They hold no
    // thread-local storage: host_grid_shim.hpp.)
    host_runner::loaded.clear();
    for (void* h : host_runner::libraries) dlclose(h);
    host_runner::libraries.clear();
    zn::install_cuda_memory(memory);
    cu::install_kernel_runner(runner);
    cu::install_blas_runner(blas);
    cu::install_conv_runner(conv);
    std::error_code ec;
    std::filesystem::remove_all(host_runner::dir, ec);
  }
};

zn::device const gpu0{zn::device::kind::cuda, 0};

using zenith_test::values;

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

}  // namespace emulated
