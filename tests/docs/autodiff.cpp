// The examples of docs/autodiff.md, compiled and run by ctest as doc.autodiff.
// Each `// [doc:NAME]` ... `// [/doc:NAME]` region appears verbatim in the page (doc.snippets
// checks that), and every region asserts its results, so the page cannot rot.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <zenith/zenith.hpp>

namespace zn = zenith;

#include "check.hpp"

void grad_basics() {
  // [doc:ad-grad]
  auto loss = [](auto const& w, auto const& x) {
    return zn::mean(zn::square(zn::tanh(zn::matmul(x, w))));
  };
  zn::array<double> w({3, 2}, {0.1, -0.2, 0.3, 0.4, -0.5, 0.6});
  zn::array<double> x({4, 3}, {1, 0, 2, -1, 3, 1, 0.5, 0.5, 0.5, 2, -2, 1});

  zn::array<double> gw = zn::grad(loss)(w, x);  // with respect to argument 0: shaped like w
  auto [value, grads] = zn::value_and_grad(loss, zn::argnums<0, 1>)(w, x);
  auto const& [dw, dx] = grads;  // several argnums: a std::tuple
  // [/doc:ad-grad]
  CHECK(gw.shape() == w.shape() && dx.shape() == x.shape());
  CHECK(zn::allclose(gw, dw, 0, 0));
  CHECK(std::abs(value.item() - zn::eval(loss(w, x)).item()) < 1e-15);
  // One entry against a central difference.
  zn::array<double> w2 = zn::copy_from(w.data(), w.shape());
  double h = 1e-6;
  w2(1, 0) = w(1, 0) + h;
  double up = zn::eval(loss(w2, x)).item();
  w2(1, 0) = w(1, 0) - h;
  double down = zn::eval(loss(w2, x)).item();
  CHECK(std::abs(gw(1, 0) - (up - down) / (2 * h)) < 1e-8);
}

void errors() {
  // [doc:ad-errors]
  zn::array<double> x({3}, {1, 2, 3});
  auto not_scalar = [](auto const& x) { return x * 2.0; };
  auto materializes = [](zn::array<double> const& x) {
    zn::array<double> h = zn::sin(x);  // an intermediate array: needs the tape (not yet)
    return zn::sum(h);
  };
  std::string e1, e2;
  try {
    zn::grad(not_scalar)(x);
  } catch (zn::value_error const& e) {
    e1 = e.what();
  }
  try {
    zn::grad(materializes)(x);
  } catch (zn::value_error const& e) {
    e2 = e.what();
  }
  // e1: "grad: the function must return a scalar (size 1), got shape (3,)"
  // e2: "grad: materializing an expression of a traced argument inside the function is ..."
  // [/doc:ad-errors]
  CHECK(e1 == "grad: the function must return a scalar (size 1), got shape (3,)");
  CHECK(e2.rfind("grad: materializing an expression of a traced argument", 0) == 0);
}

int main() {
  grad_basics();
  errors();
  std::puts("doc.autodiff: ok");
}
