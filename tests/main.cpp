// The one Catch2 main for zenith's tests (Debian's prebuilt Catch2WithMain lacks benchmarking,
// and benchmarks live in bench/ anyway).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
