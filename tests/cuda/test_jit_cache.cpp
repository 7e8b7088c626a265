// The kernel cache (backend/cuda/jit_cache.hpp) with real NVRTC output: keys, the LRU bound, the
// disk round trip, and files that are truncated, corrupt or another kernel's being rejected and
// rebuilt rather than loaded.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <zenith/backend/cuda/jit_cache.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace cu = zenith::cuda_backend;
namespace fs = std::filesystem;

namespace {

// A fresh directory, removed afterwards.
struct temp_dir {
  fs::path path;
  explicit temp_dir(std::string const& tag) {
    static int n = 0;
    path = fs::temp_directory_path() / ("zenith_cache_test_" + tag + "_" +
                                        std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Small distinct kernels: out = in * k.
cu::kernel_source kernel(int k) {
  std::string name = "scale_" + std::to_string(k);
  return {name,
          "extern \"C\" __global__ void " + name +
              "(int n, float* out, const float* in) {\n"
              "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "  if (i < n) out[i] = in[i] * " +
              std::to_string(k) + ".0f;\n}\n",
          {}};
}

std::vector<char> read_all(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("cache keys: source, architecture and NVRTC version", "[cuda][nvrtc]") {
  auto a = kernel(1), b = kernel(2);
  CHECK(cu::make_cache_key(a.text, 90) == cu::make_cache_key(a.text, 90));
  CHECK_FALSE(cu::make_cache_key(a.text, 90) == cu::make_cache_key(b.text, 90));
  CHECK_FALSE(cu::make_cache_key(a.text, 80) == cu::make_cache_key(a.text, 90));
  CHECK_FALSE(cu::make_cache_key(a.text, 90, 13000) == cu::make_cache_key(a.text, 90, 13010));
  CHECK(cu::make_cache_key(a.text, 90).file.find(".sm90.cubin") != std::string::npos);
}

TEST_CASE("memory cache: a hit compiles nothing, the LRU keeps its bound", "[cuda][nvrtc]") {
  cu::jit_cache cache(2, "");  // memory only
  auto k1 = kernel(1), k2 = kernel(2), k3 = kernel(3);
  auto first = cache.get(k1.text, k1.name, 90);
  REQUIRE(first);
  CHECK(first->image.size() > 0);
  CHECK(cache.get(k1.text, k1.name, 90) == first);  // the same compiled object
  CHECK(cache.stats().compiles == 1);
  CHECK(cache.stats().memory_hits == 1);
  cache.get(k2.text, k2.name, 90);
  cache.get(k1.text, k1.name, 90);  // k1 is now the most recent, k2 the least
  cache.get(k3.text, k3.name, 90);  // evicts k2
  CHECK(cache.size() == 2);
  CHECK(cache.stats().evictions == 1);
  CHECK(cache.get(k1.text, k1.name, 90) == first);  // still there
  auto compiles = cache.stats().compiles;
  cache.get(k2.text, k2.name, 90);  // gone: compiled again
  CHECK(cache.stats().compiles == compiles + 1);
  // Another architecture is another entry.
  cache.get(k1.text, k1.name, 80);
  CHECK(cache.stats().compiles == compiles + 2);
}

TEST_CASE("disk cache: a second cache loads what the first compiled", "[cuda][nvrtc]") {
  temp_dir dir("roundtrip");
  auto k = kernel(7);
  std::vector<char> image;
  {
    cu::jit_cache first(8, dir.path);
    image = first.get(k.text, k.name, 90)->image;
    CHECK(first.stats().compiles == 1);
  }
  fs::path file = dir.path / cu::make_cache_key(k.text, 90).file;
  REQUIRE(fs::exists(file));
  for (auto const& e : fs::directory_iterator(dir.path))  // no temporary left behind
    CHECK(e.path().string().find(".tmp") == std::string::npos);
  cu::jit_cache second(8, dir.path);
  auto loaded = second.get(k.text, k.name, 90);
  CHECK(second.stats().compiles == 0);
  CHECK(second.stats().disk_hits == 1);
  CHECK(loaded->image == image);
}

TEST_CASE("disk cache: truncated, corrupt and foreign files are rebuilt, not loaded",
          "[cuda][nvrtc]") {
  temp_dir dir("corrupt");
  auto k = kernel(5), other = kernel(6);
  fs::path file = dir.path / cu::make_cache_key(k.text, 90).file;
  std::vector<char> good;
  {
    cu::jit_cache c(8, dir.path);
    c.get(k.text, k.name, 90);
    c.get(other.text, other.name, 90);
    good = read_all(file);
  }
  REQUIRE(good.size() > 100);

  auto expect_rebuilt = [&](char const* what) {
    INFO(what);
    cu::jit_cache c(8, dir.path);
    auto got = c.get(k.text, k.name, 90);
    CHECK(c.stats().rejected_files == 1);
    CHECK(c.stats().compiles == 1);
    CHECK(c.stats().disk_hits == 0);
    CHECK(read_all(file) == good);  // rewritten whole
    // and the rewritten file loads
    cu::jit_cache again(8, dir.path);
    again.get(k.text, k.name, 90);
    CHECK(again.stats().disk_hits == 1);
    CHECK(again.stats().rejected_files == 0);
  };

  {  // truncated in the image
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(good.data(), std::streamsize(good.size() / 2));
    expect_rebuilt("truncated");
  }
  {  // truncated inside the header
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(good.data(), 10);
    expect_rebuilt("header only");
  }
  {  // one byte of the image changed
    auto bad = good;
    bad[bad.size() - 7] ^= 0x5a;
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(bad.data(), std::streamsize(bad.size()));
    expect_rebuilt("a flipped byte");
  }
  {  // another kernel's file under this kernel's name
    fs::copy_file(dir.path / cu::make_cache_key(other.text, 90).file, file,
                  fs::copy_options::overwrite_existing);
    expect_rebuilt("another kernel's file");
  }
  {  // not a cache file at all
    std::ofstream(file, std::ios::trunc) << "not a kernel";
    expect_rebuilt("text");
  }
}

TEST_CASE("a cache directory that cannot be written leaves the memory cache working",
          "[cuda][nvrtc]") {
  temp_dir dir("blocked");
  std::ofstream(dir.path) << "a file where the directory would be";
  cu::jit_cache c(4, dir.path / "sub");
  auto k = kernel(3);
  auto a = c.get(k.text, k.name, 90);
  CHECK(a->image.size() > 0);
  CHECK(c.get(k.text, k.name, 90) == a);
  CHECK(c.stats().compiles == 1);
}

TEST_CASE("the cache is thread-safe", "[cuda][nvrtc]") {
  temp_dir dir("threads");
  cu::jit_cache c(16, dir.path);
  std::vector<cu::kernel_source> ks;
  for (int i = 0; i < 4; ++i) ks.push_back(kernel(10 + i));
  std::vector<std::vector<std::vector<char>>> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (auto const& k : ks) seen[t].push_back(c.get(k.text, k.name, 90)->image);
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < 4; ++t) CHECK(seen[t] == seen[0]);
  auto s = c.stats();
  CHECK(s.compiles + s.disk_hits + s.memory_hits == 4 * 3 * 4);
  CHECK(c.size() == 4);
  CHECK(s.compiles + s.disk_hits >= 4);
}

TEST_CASE("the default cache directory follows ZENITH_CACHE_DIR", "[cuda][nvrtc]") {
  char const* saved = std::getenv("ZENITH_CACHE_DIR");
  std::string keep = saved ? saved : "";
  ::setenv("ZENITH_CACHE_DIR", "/tmp/zenith_cache_dir_test", 1);
  CHECK(cu::default_cache_dir() == fs::path("/tmp/zenith_cache_dir_test"));
  if (saved)
    ::setenv("ZENITH_CACHE_DIR", keep.c_str(), 1);
  else
    ::unsetenv("ZENITH_CACHE_DIR");
  if (!saved && std::getenv("HOME"))
    CHECK(cu::default_cache_dir().string().find("zenith") != std::string::npos);
}
