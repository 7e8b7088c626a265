// An MLP train step as a user writes it: parameters in a ZENITH_FIELDS struct, a loss over a
// runtime loop of layers, value_and_grad and jit(value_and_grad), SGD, and a finite-difference
// check of the gradient in double.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include <zenith/zenith.hpp>

namespace zn = zenith;

template <class T>
struct mlp_params {
  zn::array<T> w1, b1, w2, b2, w3, b3;
};
ZENITH_FIELDS(mlp_params<float>, w1, b1, w2, b2, w3, b3)
ZENITH_FIELDS(mlp_params<double>, w1, b1, w2, b2, w3, b3)

template <class T>
zn::array<T> random_array(std::mt19937& gen, zn::shape s, double scale) {
  std::normal_distribution<double> d(0.0, scale);
  auto a = zn::array<T>::empty(s);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(d(gen));
  return a;
}

template <class T>
mlp_params<T> init(std::mt19937& gen, std::size_t in, std::size_t hidden, std::size_t out) {
  return {random_array<T>(gen, {in, hidden}, 1.0 / std::sqrt(double(in))),
          zn::zeros<T>({hidden}),
          random_array<T>(gen, {hidden, hidden}, 1.0 / std::sqrt(double(hidden))),
          zn::zeros<T>({hidden}),
          random_array<T>(gen, {hidden, out}, 1.0 / std::sqrt(double(hidden))),
          zn::zeros<T>({out})};
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

template <class T>
zn::array<T> one_hot(std::vector<int> const& labels, std::size_t classes) {
  auto y = zn::zeros<T>({labels.size(), classes});
  for (std::size_t i = 0; i < labels.size(); ++i) y(i, std::size_t(labels[i])) = T(1);
  return y;
}

int main() {
  std::mt19937 gen(0);
  std::size_t const batch = 32, in = 16, hidden = 32, classes = 4;
  std::vector<int> labels(batch);
  for (auto& l : labels) l = int(gen() % classes);

  // Training in float: value_and_grad, then the same step under jit.
  auto p = init<float>(gen, in, hidden, classes);
  auto x = random_array<float>(gen, {batch, in}, 1.0);
  auto y = one_hot<float>(labels, classes);
  auto step = zn::value_and_grad(loss);
  auto fast_step = zn::jit(zn::value_and_grad(loss));
  for (int i = 0; i < 20; ++i) {
    auto [value, g] = i < 10 ? step(p, x, y) : fast_step(p, x, y);
    sgd(p, g, 0.1f);
    if (i % 5 == 0) std::printf("step %d: loss %.4f\n", i, double(value.item()));
  }

  // The gradient in double against central differences on a few weights.
  auto pd = init<double>(gen, in, hidden, classes);
  auto xd = random_array<double>(gen, {batch, in}, 1.0);
  auto yd = one_hot<double>(labels, classes);
  auto [value, g] = zn::value_and_grad(loss)(pd, xd, yd);
  double worst = 0;
  for (std::size_t k = 0; k < 5; ++k) {
    std::size_t i = k % in, j = (3 * k) % hidden;
    double const w = pd.w1(i, j), h = 1e-6;
    pd.w1(i, j) = w + h;
    double up = zn::eval(loss(pd, xd, yd)).item();
    pd.w1(i, j) = w - h;
    double down = zn::eval(loss(pd, xd, yd)).item();
    pd.w1(i, j) = w;
    worst = std::max(worst, std::abs((up - down) / (2 * h) - g.w1(i, j)));
  }
  std::printf("loss %.6f, largest gradient error %.2e\n", value.item(), worst);
  return worst < 1e-6 ? 0 : 1;
}
