// core/small_map.hpp: the pointer-keyed map and set of the autodiff bookkeeping, against
// std::unordered_map under random insertions, lookups and erasures that cross the size where the
// linear search hands over to the hash index, in both directions.
#include <catch2/catch.hpp>
#include <zenith/core/small_map.hpp>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace zd = zenith::detail;

namespace {

template <class Map>
void check_same(Map const& m, std::unordered_map<int const*, int> const& ref,
                std::vector<int> const& keys) {
  REQUIRE(m.size() == ref.size());
  for (int const& k : keys) {
    auto it = ref.find(&k);
    int const* v = m.find(&k);
    if (it == ref.end()) {
      REQUIRE(v == nullptr);
      REQUIRE_FALSE(m.contains(&k));
    } else {
      REQUIRE(v != nullptr);
      REQUIRE(*v == it->second);
    }
  }
  std::size_t n = 0;
  for (auto const& [k, v] : m) {
    REQUIRE(ref.at(k) == v);
    ++n;
  }
  REQUIRE(n == ref.size());
}

}  // namespace

TEST_CASE("small_map matches std::unordered_map across the linear limit", "[small_map]") {
  constexpr std::size_t limit = zd::small_map<int const*, int>::linear_limit;
  std::vector<int> keys(3 * limit);
  zd::small_map<int const*, int> m;
  std::unordered_map<int const*, int> ref;
  std::mt19937 rng(7);
  // Phases that grow, shrink and grow again, so the index is built, dropped and rebuilt.
  for (int phase = 0; phase < 6; ++phase) {
    bool grow = phase % 2 == 0;
    for (int step = 0; step < 400; ++step) {
      int const* k = &keys[rng() % keys.size()];
      int action = int(rng() % 10);
      if (action < (grow ? 6 : 2)) {
        int v = int(rng() % 1000);
        m.insert_or_assign(k, v);
        ref.insert_or_assign(k, v);
      } else if (action < (grow ? 8 : 4)) {
        m[k] += 1;
        ref[k] += 1;
      } else {
        REQUIRE(m.erase(k) == ref.erase(k));
      }
      if (step % 50 == 0) check_same(m, ref, keys);
    }
    check_same(m, ref, keys);
  }
  m.clear();
  ref.clear();
  check_same(m, ref, keys);
}

TEST_CASE("small_set inserts once and erases", "[small_map]") {
  std::vector<int> keys(100);
  zd::small_set<int const*> s;
  for (int const& k : keys) REQUIRE(s.insert(&k));
  for (int const& k : keys) REQUIRE_FALSE(s.insert(&k));
  REQUIRE(s.size() == keys.size());
  for (std::size_t i = 0; i < keys.size(); i += 2) REQUIRE(s.erase(&keys[i]) == 1);
  for (std::size_t i = 0; i < keys.size(); ++i) REQUIRE(s.contains(&keys[i]) == (i % 2 == 1));
  REQUIRE(s.erase(&keys[0]) == 0);
  REQUIRE(s.size() == keys.size() / 2);
}
