// cuBLAS as zenith opens it (backend/cuda/cublas.hpp), without a GPU: the library of the toolkit
// zenith was built with opens, and has every entry point the GEMM runner calls. (The GEMMs
// themselves run in gpu.device_arrays on a GPU; test_device_launch.cpp checks what zenith hands
// them through a host stand-in.)
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <string>

namespace cu = zenith::cuda_backend;

TEST_CASE("cuBLAS opens with every entry point the GEMM runner calls", "[cuda][nvrtc]") {
  cu::cublas_api const& api = cu::cublas();
  INFO(api.missing);
  CHECK(api.missing.empty());
  CHECK(api.create != nullptr);
  CHECK(api.set_stream != nullptr);
  CHECK(api.gemm_strided_batched != nullptr);
  REQUIRE(api.status_string != nullptr);
  CHECK(std::string(api.status_string(0)) == "success");  // CUBLAS_STATUS_SUCCESS
  // zenith::zenith.hpp installed it as the GEMM runner.
  CHECK(cu::install_blas_runner(nullptr) == &cu::detail::cublas_runner);
  cu::install_blas_runner(&cu::detail::cublas_runner);
}
