// core/small_vector.hpp: the vector that keeps its first elements inline, against std::vector
// under random pushes, pops, copies, moves and resizes that cross from inline to heap storage,
// with an element type that counts its live objects (every one constructed is destroyed once).
#include <catch2/catch.hpp>
#include <zenith/core/small_vector.hpp>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace zd = zenith::detail;

namespace {

// A value with a heap member (so a missed move or double destruction shows under ASan) that
// counts the objects alive.
struct counted {
  static inline int alive = 0;
  std::string s;
  counted() : s("default") { ++alive; }
  explicit counted(int v) : s("value " + std::to_string(v)) { ++alive; }
  counted(counted const& o) : s(o.s) { ++alive; }
  counted(counted&& o) noexcept : s(std::move(o.s)) { ++alive; }
  counted& operator=(counted const&) = default;
  counted& operator=(counted&&) noexcept = default;
  ~counted() { --alive; }
};

template <std::size_t N>
void check_same(zd::small_vector<counted, N> const& v, std::vector<std::string> const& ref) {
  REQUIRE(v.size() == ref.size());
  REQUIRE(v.empty() == ref.empty());
  REQUIRE(v.capacity() >= v.size());
  std::size_t i = 0;
  for (counted const& c : v) REQUIRE(c.s == ref[i++]);
  if (!ref.empty()) REQUIRE(v.back().s == ref.back());
}

}  // namespace

TEMPLATE_TEST_CASE_SIG("small_vector matches std::vector across inline and heap storage",
                       "[small_vector]", ((std::size_t N), N), 1, 3, 8) {
  {
    std::mt19937 rng(11);
    zd::small_vector<counted, N> v;
    std::vector<std::string> ref;
    for (int step = 0; step < 3000; ++step) {
      int what = int(rng() % 10);
      if (what < 4 || ref.empty()) {
        int x = int(rng() % 1000);
        v.emplace_back(x);
        ref.push_back("value " + std::to_string(x));
      } else if (what < 6) {
        v.pop_back();
        ref.pop_back();
      } else if (what == 6) {  // copy, then move back: both storage kinds, both directions
        zd::small_vector<counted, N> copy(v);
        check_same(copy, ref);
        zd::small_vector<counted, N> moved(std::move(copy));
        check_same(moved, ref);
        REQUIRE(copy.empty());
        v = std::move(moved);
      } else if (what == 7) {
        zd::small_vector<counted, N> other;
        other.emplace_back(-1);
        other = v;  // copy assignment over existing elements
        check_same(other, ref);
        v.clear();
        v = other;  // and into an emptied vector
      } else if (what == 8) {
        std::size_t n = rng() % (2 * N + 3);
        v.resize(n);
        ref.resize(n, "default");
      } else {
        std::size_t i = rng() % v.size();
        int x = int(rng() % 1000);
        v[i] = counted(x);
        ref[i] = "value " + std::to_string(x);
      }
      check_same(v, ref);
      REQUIRE(counted::alive == int(v.size()));
    }
  }
  REQUIRE(counted::alive == 0);
}

TEST_CASE("small_vector keeps its first elements inline and moves heap blocks whole",
          "[small_vector]") {
  zd::small_vector<std::unique_ptr<int>, 2> v;
  v.push_back(std::make_unique<int>(1));
  v.push_back(std::make_unique<int>(2));
  auto const* inline_data = v.data();
  REQUIRE(v.capacity() == 2);
  v.push_back(std::make_unique<int>(3));  // outgrows the inline room
  REQUIRE(v.data() != inline_data);
  REQUIRE(v.capacity() >= 3);
  int* third = v[2].get();
  auto const* heap = v.data();
  zd::small_vector<std::unique_ptr<int>, 2> w(std::move(v));
  REQUIRE(w.data() == heap);  // the block itself changed hands
  REQUIRE(w[2].get() == third);
  REQUIRE(v.empty());
  REQUIRE(v.capacity() == 2);  // back to its inline room
  REQUIRE(*w[0] == 1);
  REQUIRE(*w[1] == 2);
  REQUIRE(*w[2] == 3);
}

TEST_CASE("small_vector appends a copy of its own element while it grows", "[small_vector]") {
  zd::small_vector<std::string, 2> v;
  v.push_back(std::string(40, 'a'));  // longer than the small-string buffer: heap memory
  v.push_back(std::string(40, 'b'));
  v.push_back(v[0]);  // grows: v[0] moves while being copied
  v.push_back(v[2]);  // grows again
  REQUIRE(v.size() == 4);
  REQUIRE(v[0] == std::string(40, 'a'));
  REQUIRE(v[2] == std::string(40, 'a'));
  REQUIRE(v[3] == std::string(40, 'a'));
}

TEST_CASE("small_vector honours over-aligned element types", "[small_vector]") {
  struct alignas(64) wide {
    double v[8];
  };
  zd::small_vector<wide, 1> v;
  for (int i = 0; i < 5; ++i) {
    v.emplace_back();
    v.back().v[0] = i;
    for (auto const& w : v) REQUIRE(reinterpret_cast<std::uintptr_t>(&w) % 64 == 0);
  }
  for (int i = 0; i < 5; ++i) REQUIRE(v[std::size_t(i)].v[0] == i);
}
