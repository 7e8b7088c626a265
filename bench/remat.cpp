// bench/remat: what checkpoint_sequential saves in memory and costs in time, in one process.
//
//   remat [threads] [reps]      (defaults: hardware threads, 11 reps)
//
// A 16-layer MLP, h = tanh(h @ w_k), width 1024, batch 256, float; one training step is
// zn::value_and_grad of mean(square(out)) with respect to the 16 weights. Variants: the plain
// runtime loop (every layer's intermediates on the tape), then checkpoint_sequential with 2, 4
// (the case), 8 and 16 segments. For each:
//   kept    bytes still held after the forward pass (a vjp's pullback alive): the activation
//           memory kept for the backward pass;
//   peak    the allocator's peak during a whole value_and_grad step, above what was in use
//           before it (parameters and input); it includes the weight gradients (64 MiB);
//   time    median and fastest step over `reps` timed runs, round-robin across variants.
// The gradients of every variant are checked against the plain loop's first. A second
// configuration with the same FLOPs (width 256, batch 4096) has activations, not weights,
// dominating memory: there the step's peak shows the saving too.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>
#include <vector>
#include <zenith/zenith.hpp>

#include "timing.hpp"

namespace zn = zenith;

namespace {

using A = zn::array<float>;

// One layer: returns the expression, materialized by the loop that calls it (one tape entry).
struct layer {
  A w;
  auto operator()(A const& h) const { return zn::tanh(zn::matmul(h, w)); }
};

// The loss with `segments` checkpointed chunks (0: the plain loop).
auto loss_with(std::size_t segments) {
  return [segments](std::vector<A> const& ws, A const& x) {
    A h = x;
    if (segments == 0) {
      for (auto const& w : ws) h = zn::tanh(zn::matmul(h, w));
    } else {
      std::vector<layer> ls;
      for (auto const& w : ws) ls.push_back(layer{w});
      h = zn::checkpoint_sequential(std::move(ls), segments)(h);
    }
    return zn::mean(zn::square(h));
  };
}

double mib(std::size_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

volatile float sink_value;

// One configuration: checks the gradients, measures memory, times the steps, prints a table.
int run(std::size_t depth, std::size_t width, std::size_t batch,
        std::vector<std::size_t> const& variants, int threads, int reps) {
  std::mt19937 gen(1);
  // Weights scaled so that tanh stays out of saturation through the layers.
  std::uniform_real_distribution<float> dw(-1.7f / std::sqrt(float(width)),
                                           1.7f / std::sqrt(float(width)));
  std::uniform_real_distribution<float> dx(-1.f, 1.f);
  std::vector<A> ws;
  for (std::size_t k = 0; k < depth; ++k) {
    auto w = A::empty({width, width});
    for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = dw(gen);
    ws.push_back(w);
  }
  auto x = A::empty({batch, width});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = dx(gen);

  std::vector<std::function<std::pair<A, std::vector<A>>()>> steps;
  for (std::size_t s : variants)
    steps.push_back([s, &ws, &x] { return zn::value_and_grad(loss_with(s))(ws, x); });

  // Gradients first: every variant against the plain loop (variants[0]).
  auto [v0, g0] = steps[0]();
  double worst = 0;
  for (std::size_t k = 1; k < steps.size(); ++k) {
    auto [v, g] = steps[k]();
    worst = std::max(worst, double(std::abs(v.item() - v0.item()) / std::abs(v0.item())));
    for (std::size_t l = 0; l < depth; ++l)
      for (std::size_t i = 0; i < g[l].size(); i += 61)
        worst = std::max(worst, double(std::abs(g[l].data()[i] - g0[l].data()[i])) /
                                    std::max(1e-30, double(std::abs(g0[l].data()[i]))));
  }
  if (worst > 1e-6) {
    std::fprintf(stderr, "remat: checkpointed gradients differ from the plain ones by %g\n", worst);
    return 1;
  }

  // Memory, one variant at a time.
  std::vector<std::size_t> kept, peak;
  for (std::size_t s : variants) {
    std::size_t before = zn::cpu_memory_stats().bytes_in_use;
    {
      auto [y, pullback] = zn::vjp(loss_with(s), ws, x);
      kept.push_back(zn::cpu_memory_stats().bytes_in_use - before);
      sink_value = y.item();
    }
    zn::reset_peak_memory();
    before = zn::cpu_memory_stats().bytes_in_use;
    {
      auto r = zn::value_and_grad(loss_with(s))(ws, x);
      sink_value = r.first.item();
    }
    peak.push_back(zn::cpu_memory_stats().peak_bytes - before);
  }

  std::vector<std::function<void()>> bodies;
  for (auto const& step : steps) bodies.push_back([&step] { sink_value = step().first.item(); });
  auto t = bench::median_ms(reps, bench::impls_of(bodies));

  std::printf("remat: %zu layers, width %zu, batch %zu, float, %d threads, %d reps\n", depth, width,
              batch, threads, reps);
  std::printf(
      "weights %.1f MiB, one activation %.2f MiB; max relative difference of the "
      "checkpointed gradients: %.2g\n\n",
      mib(depth * width * width * 4), mib(batch * width * 4), worst);
  std::printf(
      "| segments | kept after forward, MiB | step peak, MiB | median ms | best ms | kept / plain "
      "| peak / plain | time / plain |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t k = 0; k < variants.size(); ++k) {
    char name[32];
    if (variants[k] == 0)
      std::snprintf(name, sizeof name, "none (plain loop)");
    else
      std::snprintf(name, sizeof name, "%zu", variants[k]);
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f |\n", name, mib(kept[k]),
                mib(peak[k]), t[k].median, t[k].min, double(kept[k]) / double(kept[0]),
                double(peak[k]) / double(peak[0]), t[k].median / t[0].median);
  }
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  int reps = argc > 2 ? std::atoi(argv[2]) : 11;
  zn::set_num_threads(std::size_t(threads));
  // The case: weights (and so their gradients, 64 MiB) outweigh the activations.
  if (run(16, 1024, 256, {0, 2, 4, 8, 16}, threads, reps)) return 1;
  // The same FLOPs with activations dominating (4 MiB each, weights 4 MiB in all).
  return run(16, 256, 4096, {0, 4}, threads, reps);
}
