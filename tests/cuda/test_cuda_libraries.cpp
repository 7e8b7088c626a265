// cuBLAS and cuDNN as zenith opens them (backend/cuda/cublas.hpp, cudnn.hpp), without a GPU: the
// libraries of the toolkit zenith was built with open, and have every entry point the GEMM and
// convolution runners call. (The calls themselves run in gpu.device_arrays on a GPU;
// test_device_launch.cpp checks what zenith hands them through host stand-ins.)
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <string>

namespace cu = zenith::cuda_backend;

namespace {
// zenith::cuda(0), which throws on a machine without a GPU after installing the runners.
void install_runtimes() {
  try {
    (void)zenith::cuda(0);
  } catch (zenith::device_error const&) {
  }
}
}  // namespace

TEST_CASE("cuBLAS opens with every entry point the GEMM runner calls", "[cuda][nvrtc]") {
  cu::cublas_api const& api = cu::cublas();
  INFO(api.missing);
  CHECK(api.missing.empty());
  CHECK(api.create != nullptr);
  CHECK(api.set_stream != nullptr);
  CHECK(api.gemm_strided_batched != nullptr);
  REQUIRE(api.status_string != nullptr);
  CHECK(std::string(api.status_string(0)) == "success");  // CUBLAS_STATUS_SUCCESS
  // The first zenith::cuda(i) installs it as the GEMM runner, whether or not there is a device.
  install_runtimes();
  CHECK(cu::install_blas_runner(nullptr) == &cu::detail::cublas_runner);
  cu::install_blas_runner(&cu::detail::cublas_runner);
  // And the kernel runner (NVRTC and the driver).
  CHECK(cu::install_kernel_runner(nullptr) == &cu::detail::driver_runner);
  cu::install_kernel_runner(&cu::detail::driver_runner);
}

TEST_CASE("cuDNN opens with every entry point the convolution runner calls", "[cuda][nvrtc]") {
  cu::cudnn_api const& api = cu::cudnn();
  INFO(api.missing);
  CHECK(api.missing.empty());
  for (auto const* dir : {&api.forward, &api.backward_data, &api.backward_filter}) {
    CHECK(dir->algorithm != nullptr);
    CHECK(dir->workspace != nullptr);
    CHECK(dir->run != nullptr);
  }
  REQUIRE(api.error_string != nullptr);
  CHECK(std::string(api.error_string(0)) == "CUDNN_STATUS_SUCCESS");
  install_runtimes();
  CHECK(cu::install_conv_runner(nullptr) == &cu::detail::cudnn_runner);
  cu::install_conv_runner(&cu::detail::cudnn_runner);
}
