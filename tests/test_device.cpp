// zenith::cuda(i) where there is no GPU: a device_error with a one-line message that names the
// call, never a crash or a loader failure. Where a GPU and its driver are present, the devices
// it reports are the ones cuda(i) accepts.
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <string>

namespace zn = zenith;

TEST_CASE("cuda(i) is a device_error with one line where there is no such device", "[device]") {
  int n = zn::cuda_backend::device_count();
  for (int i : {-1, n, n + 3}) {
    INFO("cuda(" << i << ") with " << n << " devices");
    try {
      zn::cuda(i);
      FAIL("no device_error");
    } catch (zn::device_error const& e) {
      std::string m = e.what();
      CHECK(m.rfind("zenith::cuda(" + std::to_string(i) + "): ", 0) == 0);
      CHECK(m.find('\n') == std::string::npos);
      CHECK(m.size() < 200);
      if (n == 0) {  // why: no driver, or a driver without devices
        bool says_why = m.find("no CUDA driver") != std::string::npos ||
                        m.find("did not initialize") != std::string::npos ||
                        m.find("no CUDA device") != std::string::npos;
        CHECK(says_why);
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    zn::device d = zn::cuda(i);
    CHECK(d.type == zn::device::kind::cuda);
    CHECK(d.index == i);
    CHECK(d.str() == "cuda:" + std::to_string(i));
  }
  // An error is an error every time, not only the first.
  if (n == 0) CHECK_THROWS_AS(zn::cuda(0), zn::device_error);
}
