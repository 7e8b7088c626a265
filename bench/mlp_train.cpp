// bench/mlp_train: one training step of an MLP, 784-256-256-10, batch 128, float.
//
//   mlp_train [threads] [reps] [steps]      (defaults: hardware threads, 15 reps, 20 steps)
//
// The model is written as a user writes it (bench/compile_programs/mlp_step.cpp): parameters in
// a ZENITH_FIELDS struct, relu layers, softmax cross-entropy against one-hot targets averaged
// over the batch. One step is value_and_grad of the loss with respect to the parameters, then
// SGD, p = p - lr * g for every leaf (lr 0.01). Two variants, each training its own copy of the
// same initial parameters:
//   zenith       zn::value_and_grad(loss)           (traced on every call)
//   zenith jit   zn::jit(zn::value_and_grad(loss))  (recorded once, replayed)
// A timed run is `steps` consecutive steps; the table gives the median and fastest of `reps`
// runs (round-robin across variants, bench/timing.hpp), divided by `steps`: ms per step. The
// peers (PyTorch eager, JAX jit) are bench/mlp_train_peers.py; bench/mlp_train.sh runs both.
//
// Before timing: the gradient in double on a batch of 4 against central differences, the two
// variants' float gradients against each other, and a finite loss after one step of each.
// The output names the OpenBLAS kernel used (the matrix products are most of a step); the last
// lines, `zenith_ms <median>` and so on, are for scripts.
#include <cblas.h>

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

template <class T>
struct mlp_params {
  zn::array<T> w1, b1, w2, b2, w3, b3;
};
ZENITH_FIELDS(mlp_params<float>, w1, b1, w2, b2, w3, b3)
ZENITH_FIELDS(mlp_params<double>, w1, b1, w2, b2, w3, b3)

constexpr std::size_t n_in = 784, n_hidden = 256, n_out = 10, n_batch = 128;
constexpr float learning_rate = 0.01f;

template <class T>
zn::array<T> random_array(std::mt19937& gen, zn::shape s, double scale) {
  std::normal_distribution<double> d(0.0, scale);
  auto a = zn::array<T>::empty(s);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(d(gen));
  return a;
}

// Weights normal with standard deviation 1/sqrt(fan_in), biases zero.
template <class T>
mlp_params<T> init(std::mt19937& gen) {
  return {random_array<T>(gen, {n_in, n_hidden}, 1.0 / std::sqrt(double(n_in))),
          zn::zeros<T>({n_hidden}),
          random_array<T>(gen, {n_hidden, n_hidden}, 1.0 / std::sqrt(double(n_hidden))),
          zn::zeros<T>({n_hidden}),
          random_array<T>(gen, {n_hidden, n_out}, 1.0 / std::sqrt(double(n_hidden))),
          zn::zeros<T>({n_out})};
}

template <class T>
zn::array<T> one_hot(std::vector<int> const& labels) {
  auto y = zn::zeros<T>({labels.size(), n_out});
  for (std::size_t i = 0; i < labels.size(); ++i) y(i, std::size_t(labels[i])) = T(1);
  return y;
}

// Inputs normal, labels uniform over the classes.
template <class T>
std::pair<zn::array<T>, zn::array<T>> make_batch(std::mt19937& gen, std::size_t batch) {
  auto x = random_array<T>(gen, {batch, n_in}, 1.0);
  std::vector<int> labels(batch);
  for (auto& l : labels) l = int(gen() % n_out);
  return {x, one_hot<T>(labels)};
}

// Softmax cross-entropy against one-hot targets, averaged over the batch.
auto loss = [](auto const& p, auto const& x, auto const& y) {
  using A = std::remove_cvref_t<decltype(x)>;
  A h = zn::relu(zn::matmul(x, p.w1) + p.b1);
  h = zn::relu(zn::matmul(h, p.w2) + p.b2);
  A logits = zn::matmul(h, p.w3) + p.b3;
  return -zn::mean(zn::sum(y * zn::log_softmax(logits, -1), -1));
};

template <class T>
void sgd(mlp_params<T>& p, mlp_params<T> const& g, T lr) {
  p.w1 = p.w1 - lr * g.w1;
  p.b1 = p.b1 - lr * g.b1;
  p.w2 = p.w2 - lr * g.w2;
  p.b2 = p.b2 - lr * g.b2;
  p.w3 = p.w3 - lr * g.w3;
  p.b3 = p.b3 - lr * g.b3;
}

// Largest |a - b| / max(1, |b|) over two gradients.
template <class T>
double max_difference(mlp_params<T> const& a, mlp_params<T> const& b) {
  double worst = 0;
  auto leaf = [&worst](zn::array<T> const& u, zn::array<T> const& v) {
    for (std::size_t i = 0; i < u.size(); ++i)
      worst = std::max(worst, std::abs(double(u.data()[i]) - double(v.data()[i])) /
                                  std::max(1.0, std::abs(double(v.data()[i]))));
  };
  leaf(a.w1, b.w1);
  leaf(a.b1, b.b1);
  leaf(a.w2, b.w2);
  leaf(a.b2, b.b2);
  leaf(a.w3, b.w3);
  leaf(a.b3, b.b3);
  return worst;
}

// The gradient in double on a batch of 4 against central differences, on a few entries of every
// leaf. Returns the largest absolute error.
double check_gradient() {
  std::mt19937 gen(1);
  auto p = init<double>(gen);
  // Nonzero biases, so that their gradients are checked away from the initial point too.
  p.b1 = random_array<double>(gen, {n_hidden}, 0.1);
  p.b2 = random_array<double>(gen, {n_hidden}, 0.1);
  p.b3 = random_array<double>(gen, {n_out}, 0.1);
  auto const batch = make_batch<double>(gen, 4);
  zn::array<double> const x = batch.first, y = batch.second;
  auto [value, g] = zn::value_and_grad(loss)(p, x, y);
  double worst = 0, largest = 0;
  auto probe = [&](zn::array<double>& w, zn::array<double> const& gw, std::size_t i) {
    double const keep = w.data()[i], h = 1e-6;
    w.data()[i] = keep + h;
    double up = zn::eval(loss(p, x, y)).item();
    w.data()[i] = keep - h;
    double down = zn::eval(loss(p, x, y)).item();
    w.data()[i] = keep;
    worst = std::max(worst, std::abs((up - down) / (2 * h) - gw.data()[i]));
    largest = std::max(largest, std::abs(gw.data()[i]));
  };
  for (std::size_t k = 0; k < 6; ++k) {
    probe(p.w1, g.w1, (k * 7919) % p.w1.size());
    probe(p.b1, g.b1, (k * 41) % p.b1.size());
    probe(p.w2, g.w2, (k * 7907) % p.w2.size());
    probe(p.b2, g.b2, (k * 43) % p.b2.size());
    probe(p.w3, g.w3, (k * 397) % p.w3.size());
    probe(p.b3, g.b3, k % p.b3.size());
  }
  std::printf(
      "gradient check (double, batch 4): loss %.6f, largest |finite difference - gradient| "
      "%.2e over 36 entries (largest |gradient| %.2e)\n",
      value.item(), worst, largest);
  return worst;
}

volatile float sink_value;

}  // namespace

int main(int argc, char** argv) {
  int const threads = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  int const reps = argc > 2 ? std::atoi(argv[2]) : 15;
  int const steps = argc > 3 ? std::atoi(argv[3]) : 20;
  if (threads < 1 || reps < 1 || steps < 1) {
    std::fprintf(stderr, "usage: mlp_train [threads] [reps] [steps]\n");
    return 2;
  }
  zn::set_num_threads(std::size_t(threads));
  openblas_set_num_threads(threads);

  if (check_gradient() > 1e-6) {
    std::fprintf(stderr, "mlp_train: the gradient disagrees with finite differences\n");
    return 1;
  }

  std::mt19937 data_gen(0);
  auto const batch = make_batch<float>(data_gen, n_batch);
  zn::array<float> const x = batch.first, y = batch.second;
  // Each variant trains its own parameters, from the same initial values.
  auto fresh = [] {
    std::mt19937 gen(0);
    return init<float>(gen);
  };
  mlp_params<float> p_plain = fresh(), p_jit = fresh();
  auto step = zn::value_and_grad(loss);
  auto jit_step = zn::jit(zn::value_and_grad(loss));

  {
    auto [v0, g0] = step(p_plain, x, y);
    auto [v1, g1] = jit_step(p_jit, x, y);
    double const diff = max_difference(g1, g0);
    sgd(p_plain, g0, learning_rate);
    sgd(p_jit, g1, learning_rate);
    float const after_plain = zn::eval(loss(p_plain, x, y)).item();
    float const after_jit = zn::eval(loss(p_jit, x, y)).item();
    std::printf(
        "initial loss %.6f (jit %.6f); after one step %.6f (jit %.6f); jit gradient vs traced: "
        "%.2g\n",
        double(v0.item()), double(v1.item()), double(after_plain), double(after_jit), diff);
    if (!std::isfinite(after_plain) || !std::isfinite(after_jit) || !(after_plain < v0.item()) ||
        diff > 1e-5) {
      std::fprintf(stderr, "mlp_train: the first step is wrong\n");
      return 1;
    }
  }
  // A recording that cannot replay would make the jit variant time the traced path.
  if (jit_step.replayable_recordings() != 1) {
    std::fprintf(stderr, "mlp_train: jit(value_and_grad) did not record a replayable step\n");
    return 1;
  }

  auto run_steps = [steps, &x, &y](auto& f, mlp_params<float>& p) {
    for (int s = 0; s < steps; ++s) {
      auto [value, g] = f(p, x, y);
      sgd(p, g, learning_rate);
      sink_value = value.item();
    }
  };
  auto t = bench::median_ms(reps, bench::impls_of({[&] { run_steps(step, p_plain); },
                                                   [&] { run_steps(jit_step, p_jit); }}));
  float const final_plain = zn::eval(loss(p_plain, x, y)).item();
  float const final_jit = zn::eval(loss(p_jit, x, y)).item();
  if (!std::isfinite(final_plain) || !std::isfinite(final_jit)) {
    std::fprintf(stderr, "mlp_train: the loss is not finite after training\n");
    return 1;
  }

  std::printf(
      "\nmlp_train: %zu-%zu-%zu-%zu, batch %zu, float, SGD lr %g, %d threads, %d reps of %d "
      "steps; loss after training %.4f (jit %.4f)\n",
      n_in, n_hidden, n_hidden, n_out, n_batch, double(learning_rate), threads, reps, steps,
      double(final_plain), double(final_jit));
  // The GEMMs are most of the step: which OpenBLAS kernel ran matters (an OpenBLAS that does not
  // know the CPU falls back to an older kernel; OPENBLAS_CORETYPE overrides it).
  std::printf("OpenBLAS core: %s (%s)\n\n", openblas_get_corename(), openblas_get_config());
  std::printf("| variant | median ms/step | best ms/step |\n|---|---:|---:|\n");
  char const* names[] = {"zenith value_and_grad", "zenith jit(value_and_grad)"};
  for (std::size_t k = 0; k < t.size(); ++k)
    std::printf("| %s | %.3f | %.3f |\n", names[k], t[k].median / steps, t[k].min / steps);
  std::printf(
      "\nzenith_ms %.4f\nzenith_best_ms %.4f\nzenith_jit_ms %.4f\nzenith_jit_best_ms %.4f\n",
      t[0].median / steps, t[0].min / steps, t[1].median / steps, t[1].min / steps);
  return 0;
}
