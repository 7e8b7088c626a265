// conv2d (expr/conv.hpp, backend/cpu/conv.hpp) against the definition written as a plain loop:
// strides, padding, dilation, several images and channels, float and double; its two adjoint
// parts against the same loop through the inner-product identities; and the shape errors.
#include <catch2/catch.hpp>
#include <zenith/zenith.hpp>

#include <cmath>
#include <random>
#include <string>

namespace zn = zenith;

namespace {

template <class T>
zn::array<T> random(zn::shape s, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  auto a = zn::array<T>::empty(s);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(d(gen));
  return a;
}

// y[n, o, i, j] = sum_{c, p, q} x[n, c, i sh - ph + p dh, j sw - pw + q dw] w[o, c, p, q]
zn::array<double> reference(zn::array<double> const& x, zn::array<double> const& w,
                            zn::conv2d_options const& o) {
  std::size_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  std::size_t O = w.shape()[0], KH = w.shape()[2], KW = w.shape()[3];
  auto out = [&](std::size_t in, std::size_t k, int s, int p, int d) {
    return (in + 2 * std::size_t(p) - std::size_t(d) * (k - 1) - 1) / std::size_t(s) + 1;
  };
  std::size_t OH = out(H, KH, o.stride[0], o.padding[0], o.dilation[0]);
  std::size_t OW = out(W, KW, o.stride[1], o.padding[1], o.dilation[1]);
  auto y = zn::zeros<double>({N, O, OH, OW});
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t oc = 0; oc < O; ++oc)
      for (std::size_t i = 0; i < OH; ++i)
        for (std::size_t j = 0; j < OW; ++j) {
          double acc = 0;
          for (std::size_t c = 0; c < C; ++c)
            for (std::size_t p = 0; p < KH; ++p)
              for (std::size_t q = 0; q < KW; ++q) {
                long r = long(i) * o.stride[0] - o.padding[0] + long(p) * o.dilation[0];
                long s = long(j) * o.stride[1] - o.padding[1] + long(q) * o.dilation[1];
                if (r < 0 || s < 0 || r >= long(H) || s >= long(W)) continue;
                acc += x.data()[((n * C + c) * H + std::size_t(r)) * W + std::size_t(s)] *
                       w.data()[((oc * C + c) * KH + p) * KW + q];
              }
          y.data()[((n * O + oc) * OH + i) * OW + j] = acc;
        }
  return y;
}

double dot(zn::array<double> const& a, zn::array<double> const& b) {
  return zn::eval(zn::sum(a * b)).item();
}

}  // namespace

TEST_CASE("conv2d against the definition", "[conv]") {
  struct config {
    zn::shape x, w;
    zn::conv2d_options o;
  };
  config configs[] = {
      {{1, 1, 5, 5}, {1, 1, 3, 3}, {}},
      {{2, 3, 9, 7}, {4, 3, 3, 2}, {{2, 1}, {1, 2}, {1, 1}}},
      {{3, 2, 8, 8}, {5, 2, 2, 3}, {{1, 3}, {0, 1}, {2, 2}}},
      {{1, 4, 6, 11}, {2, 4, 1, 1}, {{3, 2}, {0, 0}, {1, 1}}},
  };
  unsigned seed = 1;
  for (auto const& c : configs) {
    INFO("input " << c.x << ", filter " << c.w);
    auto x = random<double>(c.x, seed++), w = random<double>(c.w, seed++);
    zn::array<double> y = zn::conv2d(x, w, c.o);
    auto want = reference(x, w, c.o);
    REQUIRE(y.shape() == want.shape());
    CHECK(zn::allclose(y, want, 1e-12, 1e-12));
    // float, and an expression operand (evaluated first).
    zn::array<float> yf = zn::conv2d(zn::array<float>(x) * 2.f, zn::array<float>(w), c.o);
    CHECK(zn::allclose(zn::array<double>(yf), zn::array<double>(want * 2.0), 1e-5, 1e-5));

    // The adjoint parts, by <g, conv(x, w)> = <input_grad(g, w), x> = <filter_grad(x, g), w>.
    auto g = random<double>(want.shape(), seed++);
    auto geo = zn::conv2d(x, w, c.o).geometry;
    zn::array<double> dx = zn::make_conv2d<zn::conv2d_part::input_grad>(g, w, geo);
    zn::array<double> dw = zn::make_conv2d<zn::conv2d_part::filter_grad>(x, g, geo);
    REQUIRE(dx.shape() == x.shape());
    REQUIRE(dw.shape() == w.shape());
    double both = dot(g, want);
    CHECK(dot(dx, x) == Approx(both).epsilon(1e-12));
    CHECK(dot(dw, w) == Approx(both).epsilon(1e-12));
  }
}

TEST_CASE("conv2d shape errors name the op and both shapes", "[conv][errors]") {
  auto x = zn::zeros<float>({2, 3, 5, 5});
  auto message = [](auto f) -> std::string {
    try {
      f();
    } catch (zn::shape_error const& e) {
      return e.what();
    }
    return "no shape_error";
  };
  CHECK(message([&] {
          (void)zn::conv2d(x, zn::zeros<float>({4, 2, 3, 3}));
        }) ==
        "conv2d: the input has 3 channels, the filter 2 (input (2, 3, 5, 5), filter (4, 2, 3, 3))");
  CHECK(message([&] {
          (void)zn::conv2d(zn::zeros<float>({3, 5, 5}), zn::zeros<float>({4, 3, 3, 3}));
        }) == "conv2d: the input must be (N, C, H, W) (input (3, 5, 5), filter (4, 3, 3, 3))");
  CHECK(message([&] {
          (void)zn::conv2d(x, zn::zeros<float>({4, 3, 7, 3}));
        }) ==
        "conv2d: the filter (7 with dilation) is larger than the padded input (5) (input (2, 3, "
        "5, 5), filter (4, 3, 7, 3))");
  CHECK(message([&] {
          (void)zn::conv2d(x, zn::zeros<float>({4, 3, 3, 3}), {.stride = {0, 1}});
        }).find("stride and dilation must be >= 1") != std::string::npos);
}
