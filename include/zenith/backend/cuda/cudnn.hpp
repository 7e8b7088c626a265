#pragma once
// The convolution runner of a build with the CUDA backend (conv.hpp): cuDNN's convolution
// forward, backward-data and backward-filter, on the default stream of the device's primary
// context, where zenith's kernels and copies run too. Each call takes the algorithm cuDNN's
// heuristics rank first (cudnnGet*Algorithm_v7, remembered per geometry) and a workspace from
// the device's caching allocator.
//
// cuDNN is opened with dlopen on the first convolution on a device, like the driver and cuBLAS:
// a program links no CUDA library and starts on any machine; where cuDNN cannot be opened, a
// convolution on a device is a device_error that says why. Installed by the program's first
// zenith::cuda(i) where this header is included, which zenith/zenith.hpp does where the build
// defines ZENITH_WITH_NVRTC.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "../../core/device_memory.hpp"
#include "conv.hpp"
#include "device_memory.hpp"
#include "library.hpp"

namespace zenith::cuda_backend {

// The cuDNN entry points zenith uses (cudnnStatus_t and the enums: ints; handles and
// descriptors: pointers). The three convolution directions have calls of one shape:
//   algorithm(handle, d1, d2, conv, d3, requested, &returned, perf)
//   workspace(handle, d1, d2, conv, d3, algo, &bytes)
//   run(handle, alpha, d1, p1, d2, p2, conv, algo, workspace, bytes, beta, d3, out)
// with (d1, d2, d3) = (x, w, y) forward, (w, dy, dx) backward data, (x, dy, dw) backward filter.
struct cudnn_api {
  using status = int;
  using ptr = void*;
  struct direction {
    status (*algorithm)(ptr h, ptr d1, ptr d2, ptr conv, ptr d3, int requested, int* returned,
                        void* perf) = nullptr;
    status (*workspace)(ptr h, ptr d1, ptr d2, ptr conv, ptr d3, int algo,
                        std::size_t* bytes) = nullptr;
    status (*run)(ptr h, void const* alpha, ptr d1, void const* p1, ptr d2, void const* p2,
                  ptr conv, int algo, void* workspace, std::size_t bytes, void const* beta, ptr d3,
                  void* out) = nullptr;
  };
  status (*create)(ptr* h) = nullptr;
  status (*set_stream)(ptr h, void* stream) = nullptr;
  status (*create_tensor)(ptr* d) = nullptr;
  status (*set_tensor_4d)(ptr d, int format, int type, int n, int c, int h, int w) = nullptr;
  status (*destroy_tensor)(ptr d) = nullptr;
  status (*create_filter)(ptr* d) = nullptr;
  status (*set_filter_4d)(ptr d, int type, int format, int k, int c, int h, int w) = nullptr;
  status (*destroy_filter)(ptr d) = nullptr;
  status (*create_conv)(ptr* d) = nullptr;
  status (*set_conv_2d)(ptr d, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w, int mode,
                        int compute_type) = nullptr;
  status (*set_conv_math)(ptr d, int math) = nullptr;
  status (*destroy_conv)(ptr d) = nullptr;
  direction forward, backward_data, backward_filter;
  char const* (*error_string)(status s) = nullptr;
  std::string missing;  // why cuDNN cannot be used; empty when it can
};

namespace detail {

// cuDNN's values (cudnn_graph.h, cudnn_cnn.h).
inline constexpr int cudnn_float = 0, cudnn_double = 1, cudnn_half = 2, cudnn_bfloat16 = 9;
inline constexpr int cudnn_nchw = 0, cudnn_cross_correlation = 1;
inline constexpr int cudnn_default_math = 0, cudnn_tensor_op_math = 1;

// The layout of cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (the same for all three).
struct cudnn_algo_perf {
  int algo;
  int status;
  float time;
  std::size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

inline cudnn_api load_cudnn() {
  cudnn_api api;
  void* lib = open_library("cuDNN", {"libcudnn.so.9", "libcudnn.so"}, api.missing);
  if (!lib) return api;
  auto bind = [&](auto& fn, char const* name) { bind_symbol(lib, fn, "cuDNN", name, api.missing); };
  bind(api.create, "cudnnCreate");
  bind(api.set_stream, "cudnnSetStream");
  bind(api.create_tensor, "cudnnCreateTensorDescriptor");
  bind(api.set_tensor_4d, "cudnnSetTensor4dDescriptor");
  bind(api.destroy_tensor, "cudnnDestroyTensorDescriptor");
  bind(api.create_filter, "cudnnCreateFilterDescriptor");
  bind(api.set_filter_4d, "cudnnSetFilter4dDescriptor");
  bind(api.destroy_filter, "cudnnDestroyFilterDescriptor");
  bind(api.create_conv, "cudnnCreateConvolutionDescriptor");
  bind(api.set_conv_2d, "cudnnSetConvolution2dDescriptor");
  bind(api.set_conv_math, "cudnnSetConvolutionMathType");
  bind(api.destroy_conv, "cudnnDestroyConvolutionDescriptor");
  bind(api.forward.algorithm, "cudnnGetConvolutionForwardAlgorithm_v7");
  bind(api.forward.workspace, "cudnnGetConvolutionForwardWorkspaceSize");
  bind(api.forward.run, "cudnnConvolutionForward");
  bind(api.backward_data.algorithm, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  bind(api.backward_data.workspace, "cudnnGetConvolutionBackwardDataWorkspaceSize");
  bind(api.backward_data.run, "cudnnConvolutionBackwardData");
  bind(api.backward_filter.algorithm, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  bind(api.backward_filter.workspace, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  bind(api.backward_filter.run, "cudnnConvolutionBackwardFilter");
  bind(api.error_string, "cudnnGetErrorString");
  return api;
}

}  // namespace detail

// cuDNN, opened on first use.
inline cudnn_api const& cudnn() {
  static cudnn_api const api = detail::load_cudnn();
  return api;
}

namespace detail {

[[noreturn]] inline void cudnn_fail(std::string const& what, int s) {
  char const* text = cudnn().error_string ? cudnn().error_string(s) : nullptr;
  throw device_error("zenith: " + what + " failed: " + (text ? text : "cuDNN status") + " (" +
                     std::to_string(s) + ")");
}

// Device index's cuDNN handle, made in its primary context on first use and kept for the life
// of the process.
inline void* cudnn_handle(int index) {
  static std::mutex mu;
  static std::map<int, void*> handles;
  std::lock_guard lock(mu);
  if (auto it = handles.find(index); it != handles.end()) return it->second;
  cudnn_api const& api = cudnn();
  device_state& s = state_of(index);
  if (!api.missing.empty())
    throw device_error("zenith: conv2d on " + s.context.where() + ": " + api.missing);
  s.context.make_current();
  void* h = nullptr;
  if (int r = api.create(&h); r != 0) cudnn_fail(s.context.where() + ": cudnnCreate", r);
  if (int r = api.set_stream(h, nullptr); r != 0)
    cudnn_fail(s.context.where() + ": cudnnSetStream", r);
  return handles[index] = h;
}

// The descriptors of one call, destroyed on every path out.
struct cudnn_descriptors {
  void* x = nullptr;  // the input (n, c, h, w)
  void* y = nullptr;  // the output (n, o, oh, ow)
  void* w = nullptr;  // the filter (o, c, kh, kw)
  void* conv = nullptr;
  ~cudnn_descriptors() {
    cudnn_api const& api = cudnn();
    if (x) api.destroy_tensor(x);
    if (y) api.destroy_tensor(y);
    if (w) api.destroy_filter(w);
    if (conv) api.destroy_conv(conv);
  }
};

inline void run_on_cudnn(device dev, conv_call const& c) {
  cudnn_api const& api = cudnn();
  void* h = cudnn_handle(dev.index);
  state_of(dev.index).context.make_current();
  conv2d_geometry const& g = c.g;
  std::string where = dev.str() + ": conv2d " + g.input().str() + " * " + g.filter().str() + ": ";
  auto check = [&](int r, char const* call) {
    if (r != 0) cudnn_fail(where + call, r);
  };
  int type = cudnn_float, compute = cudnn_float, math = cudnn_default_math;
  switch (c.type) {
    case gemm_type::f32:
      break;
    case gemm_type::f64:
      type = compute = cudnn_double;
      break;
    case gemm_type::f16:
      type = cudnn_half;
      math = cudnn_tensor_op_math;
      break;
    case gemm_type::bf16:
      type = cudnn_bfloat16;
      math = cudnn_tensor_op_math;
      break;
  }
  cudnn_descriptors d;
  check(api.create_tensor(&d.x), "cudnnCreateTensorDescriptor");
  check(api.set_tensor_4d(d.x, cudnn_nchw, type, int(g.n), int(g.c), int(g.h), int(g.w)),
        "cudnnSetTensor4dDescriptor (input)");
  check(api.create_tensor(&d.y), "cudnnCreateTensorDescriptor");
  check(api.set_tensor_4d(d.y, cudnn_nchw, type, int(g.n), int(g.o), int(g.oh), int(g.ow)),
        "cudnnSetTensor4dDescriptor (output)");
  check(api.create_filter(&d.w), "cudnnCreateFilterDescriptor");
  check(api.set_filter_4d(d.w, type, cudnn_nchw, int(g.o), int(g.c), int(g.kh), int(g.kw)),
        "cudnnSetFilter4dDescriptor");
  check(api.create_conv(&d.conv), "cudnnCreateConvolutionDescriptor");
  check(api.set_conv_2d(d.conv, int(g.pad[0]), int(g.pad[1]), int(g.stride[0]), int(g.stride[1]),
                        int(g.dil[0]), int(g.dil[1]), cudnn_cross_correlation, compute),
        "cudnnSetConvolution2dDescriptor");
  check(api.set_conv_math(d.conv, math), "cudnnSetConvolutionMathType");

  // The direction, its descriptors and operands, in the order its calls take them.
  cudnn_api::direction const* dir = &api.forward;
  void *d1 = d.x, *d2 = d.w, *d3 = d.y;
  void const *p1 = c.a, *p2 = c.b;
  if (c.part == conv2d_part::input_grad) {  // a = dy, b = w
    dir = &api.backward_data;
    d1 = d.w, d2 = d.y, d3 = d.x;
    p1 = c.b, p2 = c.a;
  } else if (c.part == conv2d_part::filter_grad) {  // a = x, b = dy
    dir = &api.backward_filter;
    d1 = d.x, d2 = d.y, d3 = d.w;
  }

  // The heuristics' first algorithm that works, remembered per direction, type and geometry.
  using key_t = std::tuple<int, int, int, std::array<std::size_t, 13>>;
  static std::mutex mu;
  static std::map<key_t, int> chosen;
  key_t key{int(c.part),
            type,
            dev.index,
            {g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.stride[0], g.stride[1], g.pad[0], g.pad[1],
             g.dil[0], g.dil[1]}};
  int algo = -1;
  {
    std::lock_guard lock(mu);
    if (auto it = chosen.find(key); it != chosen.end()) algo = it->second;
  }
  if (algo < 0) {
    cudnn_algo_perf perf[8] = {};
    int returned = 0;
    check(dir->algorithm(h, d1, d2, d.conv, d3, 8, &returned, perf), "choosing an algorithm");
    for (int i = 0; i < returned && algo < 0; ++i)
      if (perf[i].status == 0) algo = perf[i].algo;
    if (algo < 0) throw device_error("zenith: " + where + "cuDNN has no algorithm for it");
    std::lock_guard lock(mu);
    chosen[key] = algo;
  }
  std::size_t bytes = 0;
  check(dir->workspace(h, d1, d2, d.conv, d3, algo, &bytes), "sizing the workspace");
  device_memory const& mem = memory_of(dev);
  void* workspace = bytes ? mem.allocate(dev, bytes) : nullptr;
  float const one_f = 1, zero_f = 0;
  double const one_d = 1, zero_d = 0;
  void const* alpha = c.type == gemm_type::f64 ? static_cast<void const*>(&one_d) : &one_f;
  void const* beta = c.type == gemm_type::f64 ? static_cast<void const*>(&zero_d) : &zero_f;
  int r = dir->run(h, alpha, d1, p1, d2, p2, d.conv, algo, workspace, bytes, beta, d3, c.out);
  // Freed at once: work on a device runs in order on one stream, so the next user of the block
  // runs after this convolution (device_memory.hpp).
  if (workspace) mem.deallocate(dev, workspace, bytes);
  check(r, c.part == conv2d_part::output       ? "cudnnConvolutionForward"
           : c.part == conv2d_part::input_grad ? "cudnnConvolutionBackwardData"
                                               : "cudnnConvolutionBackwardFilter");
}

inline constexpr conv_runner cudnn_runner{&run_on_cudnn};

// Installed by the first zenith::cuda(i) (device_memory.hpp).
template <class I>
void install_runtime(conv_runtime, I, int) {
  if (!conv_slot()) install_conv_runner(&cudnn_runner);
}

}  // namespace detail

}  // namespace zenith::cuda_backend
