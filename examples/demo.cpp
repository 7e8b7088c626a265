// zenith demo: lazy expressions evaluated in one fused pass. Run it with scripts/demo.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <typeinfo>
#include <zenith/zenith.hpp>
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

namespace zn = zenith;

namespace {

// The readable name of a type, with "zenith::" dropped.
template <class T>
std::string type_name() {
  std::string name = typeid(T).name();
#if __has_include(<cxxabi.h>)
  int status = 0;
  if (char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status)) {
    name = d;
    std::free(d);
  }
#endif
  for (std::size_t p; (p = name.find("zenith::")) != std::string::npos;) name.erase(p, 8);
  for (std::size_t p; (p = name.find(" >")) != std::string::npos;) name.erase(p, 1);
  return name;
}

// Best of `reps` runs of f, in milliseconds.
template <class F>
double best_ms(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

std::size_t allocations() { return zn::cpu_memory_stats().allocations; }

void section(char const* title) { std::cout << "\n== " << title << " ==\n"; }

}  // namespace

int main() {
  std::cout << "zenith demo: lazy expressions, fused evaluation (" << zn::get_num_threads()
            << " threads, " << xsimd::batch<float>::size << " floats per SIMD batch)\n";

  section("1. An expression is a type, not an array");
  zn::array<float> m({2, 3}, {1, 2, 3, 4, 5, 6});
  zn::array<float> row({3}, {10, 20, 30});
  std::size_t before = allocations();
  auto e = zn::exp(m) * 2.f + row;  // nothing is computed here
  std::cout << "auto e = zn::exp(m) * 2.f + row;\n"
            << "  type of e:   " << type_name<decltype(e)>() << "\n"
            << "  shape of e:  " << e.shape() << "\n"
            << "  allocations while building e: " << allocations() - before << "\n";
  zn::array<float> y = e;  // one fused pass over the whole tree
  std::cout << "zn::array<float> y = e;   // evaluates: one pass, " << allocations() - before
            << " allocation (y itself)\n"
            << y << "\n";

  section("2. Fused vs step by step, 2^22 floats");
  std::size_t const n = std::size_t(1) << 22;
  auto a = zn::linspace<float>(-1, 1, n);
  auto b = zn::linspace<float>(0, 3, n);
  auto c = zn::linspace<float>(2, -2, n);
  zn::array<float> fused, stepwise;
  std::size_t fused_allocs = 0, step_allocs = 0;
  double t_fused = best_ms(5, [&] {
    std::size_t k = allocations();
    fused = a * zn::sin(b) + zn::exp(-(c * c)) * 0.5f;  // one pass, no temporaries
    fused_allocs = allocations() - k;
  });
  double t_step = best_ms(5, [&] {
    std::size_t k = allocations();
    zn::array<float> t1 = zn::sin(b);  // the same maths, one array per step
    zn::array<float> t2 = a * t1;
    zn::array<float> t3 = c * c;
    zn::array<float> t4 = -t3;
    zn::array<float> t5 = zn::exp(t4);
    zn::array<float> t6 = t5 * 0.5f;
    stepwise = t2 + t6;
    step_allocs = allocations() - k;
  });
  std::printf("  y = a * sin(b) + exp(-(c * c)) * 0.5f\n");
  std::printf("  fused:        %7.2f ms  %zu temporaries (written in place into the result)\n",
              t_fused, fused_allocs);
  std::printf("  step by step: %7.2f ms  %zu temporaries\n", t_step, step_allocs);
  // Fused, a * sin(b) + ... may become one FMA instruction: equal up to float rounding.
  std::printf("  fused is %.1fx faster; results agree: %s\n", t_step / t_fused,
              zn::allclose(fused, stepwise, 1e-5, 1e-6) ? "yes" : "NO");

  section("3. Reductions with axes");
  zn::array<float> t = zn::reshape(zn::arange<float>(12), {3, 4});
  std::cout << "t =\n"
            << t << "\n"
            << "sum(t, 0)            = " << zn::sum(t, 0) << "\n"
            << "max(t)               = " << zn::max(t) << "\n"
            << "mean(t, 1, keepdims) has shape " << zn::mean(t, 1, true).shape() << "\n"
            << "t - mean(t, 1, true) =\n"
            << t - zn::mean(t, 1, true) << "   // the mean, then one fused pass\n"
            << "argmax(cos(t), 1)    = " << zn::argmax(zn::cos(t), 1) << "\n";
  before = allocations();
  zn::array<float> dot = zn::sum(a * b);  // reads a and b once: no a * b temporary
  std::cout << "sum(a * b) over 2^22 floats = " << dot
            << "   (allocations: " << allocations() - before << ", the result)\n";

  section("4. matmul + tanh: one GEMM, then one fused pass");
  auto x = zn::reshape(zn::linspace<float>(-1, 1, 6), {2, 3});
  auto w = zn::transpose(x);  // a view: no copy
  zn::array<float> h = zn::tanh(zn::matmul(x, w)) * 2.f + 1.f;
  std::cout << "x =\n" << x << "\ntanh(x @ x^T) * 2 + 1 =\n" << h << "\n";
  zn::array<float> p = zn::softmax(h, 1);
  std::cout << "softmax(h, axis 1) =\n" << p << "\n";

  section("5. Fixed-size tensors: shape in the type, no heap");
  zn::tensor<double, 3> q{0.1, 0.2, 0.3};
  before = allocations();
  zn::tensor<double, 3> r = zn::sin(q) * 2.0 + q;  // unrolled, inline storage
  zn::tensor<double, 3, 3> rot{0, -1, 0, 1, 0, 0, 0, 0, 1};
  zn::tensor<double, 3> turned = zn::matmul(rot, r);
  double len = zn::norm(turned);
  std::size_t heap = allocations() - before;
  std::cout << "q = " << q << "\nr = sin(q) * 2 + q = " << r << "\nrot @ r = " << turned
            << "\n|rot @ r| = " << len << "   (heap allocations: " << heap << ")\n";

  section("6. Gradients: the backward pass is an expression too");
  auto loss = [](auto const& w, auto const& x) {
    return zn::mean(zn::square(zn::tanh(zn::matmul(x, w))));
  };
  zn::array<double> wd({3, 2}, {0.1, -0.2, 0.3, 0.4, -0.5, 0.6});
  zn::array<double> xd({4, 3}, {1, 0, 2, -1, 3, 1, 0.5, 0.5, 0.5, 2, -2, 1});
  before = allocations();
  auto [value, dw] = zn::value_and_grad(loss)(wd, xd);
  std::size_t grad_allocs = allocations() - before;
  std::cout << "loss(w, x) = mean(tanh(x @ w)^2) = " << value << "\nd loss / d w =\n"
            << dw << "\n(allocations for the value and the gradient: " << grad_allocs << ")\n";
  // The demo checks what it printed, so the test suite can run it (ctest example.demo).
  int failures = 0;
  auto expect = [&](bool ok, char const* what) {
    if (!ok) {
      std::printf("CHECK FAILED: %s\n", what);
      ++failures;
    }
  };
  expect(std::abs(y(0, 0) - 15.4366f) < 1e-3f && std::abs(y(1, 2) - 836.858f) < 1e-2f,
         "exp(m) * 2 + row");
  expect(zn::allclose(fused, stepwise, 1e-5, 1e-6), "fused and step-by-step results agree");
  expect(fused_allocs == 0, "the fused pass writes into its result in place");
  expect(zn::allclose(zn::sum(t, 0), zn::array<float>({4}, {12, 15, 18, 21})), "sum(t, 0)");
  expect(heap == 0, "fixed-size tensors allocate nothing");
  // The gradient against central differences.
  for (std::size_t i = 0; i < wd.size(); ++i) {
    zn::array<double> up = zn::eval(wd * 1.0), down = zn::eval(wd * 1.0);
    up.data()[i] += 1e-6;
    down.data()[i] -= 1e-6;
    double fd = (zn::eval(loss(up, xd)).item() - zn::eval(loss(down, xd)).item()) / 2e-6;
    expect(std::abs(fd - dw.data()[i]) < 1e-8, "d loss / d w against finite differences");
  }
  std::cout << (failures ? "\nFAILED\n" : "\ndone.\n");
  return failures == 0 ? 0 : 1;
}
