// zenith::cuda(i) where there is no GPU: a device_error with a one-line message that names the
// call, never a crash or a loader failure. Where a GPU and its driver are present, the devices
// it reports are the ones cuda(i) accepts.
//
// Device arrays without a GPU: the caching allocator's policy over a counting source, and
// arrays on cuda:0 and cuda:1 through a stand-in for the driver's memory (host memory that
// zenith takes for device memory): copies, errors on host access and on mixed devices, buffers
// given back. tests/cuda/gpu_device_arrays.cpp runs the same through the driver on a GPU.
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

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

namespace {

// A memory source that counts, and runs out past `limit` bytes held.
struct counting_source {
  std::size_t held = 0, limit = std::size_t(1) << 40;
  int allocs = 0, releases = 0;

  static void* allocate(std::size_t bytes, void* c) {
    auto& s = *static_cast<counting_source*>(c);
    if (s.held + bytes > s.limit) return nullptr;
    s.held += bytes;
    ++s.allocs;
    return std::malloc(bytes);
  }
  static void release(void* p, std::size_t bytes, void* c) {
    auto& s = *static_cast<counting_source*>(c);
    s.held -= bytes;
    ++s.releases;
    std::free(p);
  }
  static void fail(std::size_t bytes, zn::memory_stats const& st, void*) {
    throw std::runtime_error("out: " + std::to_string(bytes) + " " +
                             std::to_string(st.bytes_in_use));
  }
  zn::memory_source source() { return {&allocate, &release, &fail, this}; }
};

}  // namespace

TEST_CASE("the caching allocator reuses blocks by size class and counts them", "[device][memory]") {
  counting_source src;
  {
    zn::caching_allocator a(src.source());
    void* p = a.allocate(1000);  // class 1024
    CHECK(src.allocs == 1);
    CHECK(a.stats().bytes_in_use == 1024);
    a.deallocate(p, 1000);
    CHECK(a.stats().bytes_in_use == 0);
    CHECK(a.stats().cached_bytes == 1024);
    void* q = a.allocate(1024);  // the same class: the cached block, no new one
    CHECK(q == p);
    CHECK(src.allocs == 1);
    void* r = a.allocate(10000);  // class 10240 (a sixteenth of 16384)
    CHECK(zn::caching_allocator::size_class(10000) == 10240);
    zn::memory_stats s = a.stats();
    CHECK(s.allocations == 3);
    CHECK(s.system_allocations == 2);
    CHECK(s.bytes_in_use == 1024 + 10240);
    CHECK(s.peak_bytes == 1024 + 10240);
    a.deallocate(q, 1024);
    a.deallocate(r, 10000);
    a.reset_peak();
    CHECK(a.stats().peak_bytes == 0);
    a.empty_cache();
    CHECK(src.releases == 2);
    CHECK(src.held == 0);
    CHECK(a.stats().cached_bytes == 0);
  }
  // Out of room: the cache is given back and the request tried again; then the source's error.
  src = counting_source{};
  src.limit = 8192;
  {
    zn::caching_allocator a(src.source());
    void* p = a.allocate(4096);
    a.deallocate(p, 4096);       // cached: the source still holds 4096
    void* q = a.allocate(8192);  // fits only once the cached block went back
    CHECK(src.releases == 1);
    CHECK(a.stats().bytes_in_use == 8192);
    try {
      a.allocate(64);
      FAIL("no error");
    } catch (std::runtime_error const& e) {
      CHECK(std::string(e.what()) == "out: 64 8192");  // the source's error, with the figures
    }
    CHECK(a.stats().bytes_in_use == 8192);  // the failed request is not counted
    a.deallocate(q, 8192);
  }
  CHECK(src.held == 0);  // the destructor gives the cache back
}

namespace {

// Host memory standing in for two CUDA devices: what zenith does with device memory, checked
// without a GPU. Counts live blocks per device and every copy.
struct stand_in_devices {
  static inline std::map<void*, zn::device> live;
  static inline std::vector<std::string> copies;

  static void* allocate(zn::device d, std::size_t bytes) {
    void* p = std::malloc(bytes);
    live[p] = d;
    return p;
  }
  static void deallocate(zn::device d, void* p, std::size_t) {
    auto it = live.find(p);
    REQUIRE(it != live.end());
    CHECK(it->second == d);
    live.erase(it);
    std::free(p);
  }
  static void copy(void* dst, zn::device to, void const* src, zn::device from, std::size_t bytes) {
    if (to != zn::cpu) CHECK(live.at(dst) == to);
    if (from != zn::cpu) CHECK(live.at(const_cast<void*>(src)) == from);
    copies.push_back(from.str() + "->" + to.str() + " " + std::to_string(bytes));
    std::memcpy(dst, src, bytes);
  }
  static constexpr zn::device_memory memory{&allocate, &deallocate, &copy};

  zn::device_memory const* saved;
  stand_in_devices() : saved(zn::install_cuda_memory(&memory)) { copies.clear(); }
  ~stand_in_devices() { zn::install_cuda_memory(saved); }
};

std::string error_of(auto&& f) {
  try {
    f();
  } catch (zn::device_error const& e) {
    return e.what();
  }
  return "no device_error";
}

}  // namespace

TEST_CASE("arrays move between the host and devices with to()", "[device]") {
  stand_in_devices devices;
  zn::device gpu0{zn::device::kind::cuda, 0}, gpu1{zn::device::kind::cuda, 1};
  {
    zn::array<float> x({2, 3}, {1, 2, 3, 4, 5, 6});
    zn::array<float> d = x.to(gpu0);
    CHECK(d.device() == gpu0);
    CHECK(d.shape() == x.shape());
    CHECK(d.data() != x.data());
    CHECK(stand_in_devices::live.size() == 1);
    CHECK(d.to(gpu0).data() == d.data());  // already there: the same array

    zn::array<float> d1 = d.to(gpu1);  // device to device
    zn::array<float> back = d1.to(zn::cpu);
    CHECK(back.device() == zn::cpu);
    // Into page-locked host memory from the device's backend (here host memory it counts).
    CHECK(stand_in_devices::live.at(back.storage()->data()) == zn::cpu);
    CHECK(std::memcmp(back.data(), x.data(), 6 * sizeof(float)) == 0);
    CHECK(stand_in_devices::copies ==
          std::vector<std::string>{"cpu->cuda:0 24", "cuda:0->cuda:1 24", "cuda:1->cpu 24"});

    zn::array<double> z = zn::zeros<double>({4}, gpu1), o = zn::ones<double>({4}, gpu0);
    CHECK(z.device() == gpu1);
    CHECK(o.device() == gpu0);
    CHECK(zn::allclose(o.to(zn::cpu), zn::ones<double>({4})));
    CHECK(zn::allclose(zn::full<double>({4}, 2.5, gpu0).to(zn::cpu), zn::full<double>({4}, 2.5)));

    std::ostringstream os;  // printed from a host copy
    os << d;
    std::ostringstream want;
    want << x;
    CHECK(os.str() == want.str());
  }
  CHECK(stand_in_devices::live.empty());  // every device block given back to its device
}

TEST_CASE("host access to a device array, and mixed devices, are device_errors",
          "[device][errors]") {
  stand_in_devices devices;
  zn::device gpu0{zn::device::kind::cuda, 0};
  zn::array<float> x({3}, {1, 2, 3});
  zn::array<float> d = x.to(gpu0);
  zn::array<float> y({2, 3}, {1, 2, 3, 4, 5, 6});

  zn::array<float> one = zn::full<float>({1}, 2.f, gpu0);
  std::string m = error_of([&] { (void)one.item(); });
  CHECK(m == "item: array of shape (1,) is on cuda:0; read it on the host with .to(zenith::cpu)");
  CHECK(one.to(zn::cpu).item() == 2.f);
  m = error_of([&] { (void)d(1); });
  CHECK(m.find("array(): array of shape (3,) is on cuda:0") == 0);

  // Mixed: names both devices and both shapes.
  m = error_of([&] { zn::array<float> r = y + d; });
  CHECK(m.find("mixes an array of shape (2, 3) on cpu with one of shape (3,) on cuda:0") !=
        std::string::npos);
  m = error_of([&] { zn::array<float> r = d * 2.f + x; });
  CHECK(m.find("on cuda:0 with one of shape (3,) on cpu") != std::string::npos);

  // One device, not the CPU: evaluated there (tests/cuda/test_device_launch.cpp), given a
  // kernel runner; without one, an error that says what is missing.
  auto* runner = zn::cuda_backend::install_kernel_runner(nullptr);
  m = error_of([&] { zn::array<float> r = zn::exp(d); });
  CHECK(m.find("zenith: evaluating on cuda:0: this program has no CUDA kernel compiler") == 0);
  zn::cuda_backend::install_kernel_runner(runner);
  // What does not run on a device yet: an error, never host code reading device memory.
  m = error_of([&] { zn::array<float> r = zn::softmax(d); });
  CHECK(m.find("on cuda:0") != std::string::npos);
  CHECK(m.find('\n') == std::string::npos);
  m = error_of([&] { (void)zn::grad([](auto const& v) { return zn::sum(v * v); })(d); });
  CHECK(m.find("on cuda:0") != std::string::npos);

  // Without a backend for the device: an error, not a crash.
  zn::install_cuda_memory(nullptr);
  m = error_of([&] { (void)x.to(gpu0); });
  CHECK(m == "zenith: memory on cuda:0 needs its backend, which this program does not include");
  zn::install_cuda_memory(&stand_in_devices::memory);
}
