#pragma once
// Timing shared by the benchmarks: median and fastest wall time of several implementations,
// measured round-robin in one run.
#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace bench {

using clock_type = std::chrono::steady_clock;

inline double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

// Lets OpenMP's spinning workers (a few ms after each parallel region) go idle before another
// implementation runs, so no implementation is timed against another one's spinning threads.
inline void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

// One implementation: its body, and what to do around it (outside the timing).
struct impl {
  std::function<void()> run;
  std::function<void()> before = [] {}, after = [] {};
};

// Implementations that are bodies alone.
inline std::vector<impl> impls_of(std::vector<std::function<void()>> const& bodies) {
  std::vector<impl> out;
  for (auto const& b : bodies) out.push_back({b});
  return out;
}

struct timing {
  double median, min;  // ms
};

// Median and fastest wall time of each implementation. Two warm-up runs each, then the timed runs
// go round-robin (rep 1 of every implementation, then rep 2, ...), so that load from other
// processes on a shared machine falls on all implementations alike.
inline std::vector<timing> median_ms(int reps, std::vector<impl> const& impls) {
  for (auto const& f : impls) {
    f.before();
    f.run();
    f.run();
    f.after();
    settle();
  }
  std::vector<std::vector<double>> t(impls.size());
  for (int r = 0; r < reps; ++r)
    for (std::size_t k = 0; k < impls.size(); ++k) {
      impls[k].before();
      auto t0 = clock_type::now();
      impls[k].run();
      t[k].push_back(ms_since(t0));
      impls[k].after();
      settle();
    }
  std::vector<timing> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back({v[v.size() / 2], v[0]});
  }
  return out;
}

}  // namespace bench
