// The first program of README.md, compiled and run by ctest as doc.first. The region below is
// the whole program as the README shows it; output_check captures what it prints and fails the
// test unless it is exactly the output the README promises.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

namespace {
char const* const expected =
    "[[15.4366, 34.7781, 70.1711],\n"
    " [119.196, 316.826, 836.858]]\n";

struct output_check {
  std::ostringstream captured;
  std::streambuf* old;
  output_check() : old(std::cout.rdbuf(captured.rdbuf())) {}
  ~output_check() {  // runs after main returns
    std::cout.rdbuf(old);
    std::cout << captured.str();
    if (captured.str() != expected) {
      std::fprintf(stderr, "doc.first: printed\n%s\ninstead of\n%s\n", captured.str().c_str(),
                   expected);
      std::fflush(nullptr);
      std::_Exit(1);
    }
  }
} check_output;
}  // namespace

// [doc:readme-first]
#include <iostream>
#include <zenith/zenith.hpp>
namespace zn = zenith;

int main() {
  zn::array<float> m({2, 3}, {1, 2, 3, 4, 5, 6});
  zn::array<float> row({3}, {10, 20, 30});
  auto e = zn::exp(m) * 2.f + row;  // lazy: an expression, not an array yet
  zn::array<float> y = e;           // one fused, vectorised, threaded pass
  std::cout << y << '\n';           // [[15.4366, 34.7781, 70.1711],
                                    //  [119.196, 316.826, 836.858]]
}
// [/doc:readme-first]
