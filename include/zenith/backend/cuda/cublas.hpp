#pragma once
// The GEMM runner of a build with the CUDA backend (gemm.hpp): cuBLAS's strided batched GEMM
// (cublasGemmStridedBatchedEx_64, every element type through one entry point), on the default
// stream of the device's primary context, where zenith's kernels and copies run too.
//
// cuBLAS is opened with dlopen on the first matmul on a device, like the driver (driver.hpp):
// a program links no CUDA library and starts on any machine; where cuBLAS cannot be opened, a
// matmul on a device is a device_error that says why. Installed by the program's first
// zenith::cuda(i) where this header is included, which zenith/zenith.hpp does where the build
// defines ZENITH_WITH_NVRTC.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "device_memory.hpp"
#include "gemm.hpp"
#include "library.hpp"

namespace zenith::cuda_backend {

// The cuBLAS entry points zenith uses (cublasStatus_t, the enums: ints; the handle: a pointer).
struct cublas_api {
  using status = int;
  using handle = void*;
  status (*create)(handle* h) = nullptr;
  status (*set_stream)(handle h, void* stream) = nullptr;
  status (*gemm_strided_batched)(handle h, int transa, int transb, std::int64_t m, std::int64_t n,
                                 std::int64_t k, void const* alpha, void const* a, int a_type,
                                 std::int64_t lda, long long stride_a, void const* b, int b_type,
                                 std::int64_t ldb, long long stride_b, void const* beta, void* c,
                                 int c_type, std::int64_t ldc, long long stride_c,
                                 std::int64_t batch, int compute_type, int algo) = nullptr;
  char const* (*status_string)(status s) = nullptr;
  std::string missing;  // why cuBLAS cannot be used; empty when it can
};

namespace detail {

// cuBLAS's values (cublas_api.h, library_types.h).
inline constexpr int cublas_op_n = 0, cublas_op_t = 1;
inline constexpr int cuda_r_32f = 0, cuda_r_64f = 1, cuda_r_16f = 2, cuda_r_16bf = 14;
inline constexpr int cublas_compute_32f = 68, cublas_compute_64f = 70;
inline constexpr int cublas_gemm_default = -1;

inline cublas_api load_cublas() {
  cublas_api api;
  void* lib =
      open_library("cuBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, api.missing);
  if (!lib) return api;
  auto bind = [&](auto& fn, char const* name) {
    bind_symbol(lib, fn, "cuBLAS", name, api.missing);
  };
  bind(api.create, "cublasCreate_v2");
  bind(api.set_stream, "cublasSetStream_v2");
  bind(api.gemm_strided_batched, "cublasGemmStridedBatchedEx_64");
  bind(api.status_string, "cublasGetStatusString");
  return api;
}

}  // namespace detail

// cuBLAS, opened on first use.
inline cublas_api const& cublas() {
  static cublas_api const api = detail::load_cublas();
  return api;
}

namespace detail {

[[noreturn]] inline void cublas_fail(std::string const& what, int s) {
  char const* text = cublas().status_string ? cublas().status_string(s) : nullptr;
  throw device_error("zenith: " + what + " failed: " + (text ? text : "cuBLAS status") + " (" +
                     std::to_string(s) + ")");
}

// Device index's cuBLAS handle, made in its primary context on first use and kept for the life
// of the process (like the context itself).
inline void* cublas_handle(int index) {
  static std::mutex mu;
  static std::map<int, void*> handles;
  std::lock_guard lock(mu);
  if (auto it = handles.find(index); it != handles.end()) return it->second;
  cublas_api const& api = cublas();
  device_state& s = state_of(index);
  if (!api.missing.empty())
    throw device_error("zenith: matmul on " + s.context.where() + ": " + api.missing);
  s.context.make_current();
  void* h = nullptr;
  if (int r = api.create(&h); r != 0) cublas_fail(s.context.where() + ": cublasCreate", r);
  if (int r = api.set_stream(h, nullptr); r != 0)
    cublas_fail(s.context.where() + ": cublasSetStream", r);
  return handles[index] = h;
}

inline void gemm_on_cublas(device dev, gemm_call const& g) {
  void* h = cublas_handle(dev.index);
  state_of(dev.index).context.make_current();
  int type = cuda_r_32f, compute = cublas_compute_32f;
  switch (g.type) {
    case gemm_type::f32:
      break;
    case gemm_type::f64:
      type = cuda_r_64f;
      compute = cublas_compute_64f;
      break;
    case gemm_type::f16:
      type = cuda_r_16f;
      break;
    case gemm_type::bf16:
      type = cuda_r_16bf;
      break;
  }
  float const one_f = 1, zero_f = 0;
  double const one_d = 1, zero_d = 0;
  void const* alpha = g.type == gemm_type::f64 ? static_cast<void const*>(&one_d) : &one_f;
  void const* beta = g.type == gemm_type::f64 ? static_cast<void const*>(&zero_d) : &zero_f;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B's storage, read column-
  // major, is B^T (or, stored transposed, B), and the same for A.
  int r = cublas().gemm_strided_batched(
      h, g.trans_b ? cublas_op_t : cublas_op_n, g.trans_a ? cublas_op_t : cublas_op_n, g.n, g.m,
      g.k, alpha, g.b, type, g.trans_b ? g.k : g.n, g.stride_b, g.a, type, g.trans_a ? g.m : g.k,
      g.stride_a, beta, g.c, type, g.n, g.stride_c, g.batch, compute, cublas_gemm_default);
  if (r != 0)
    cublas_fail(dev.str() + ": cublasGemmStridedBatchedEx_64 (" + std::to_string(g.batch) + " x " +
                    std::to_string(g.m) + "x" + std::to_string(g.k) + " @ " + std::to_string(g.k) +
                    "x" + std::to_string(g.n) + ")",
                r);
}

inline constexpr blas_runner cublas_runner{&gemm_on_cublas};

// Installed by the first zenith::cuda(i) (device_memory.hpp).
template <class I>
void install_runtime(blas_runtime, I, int) {
  if (!blas_slot()) install_blas_runner(&cublas_runner);
}

}  // namespace detail

}  // namespace zenith::cuda_backend
