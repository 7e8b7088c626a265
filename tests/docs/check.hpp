#pragma once
// The documentation programs' assertion: plain, and on in release builds too.
#include <cstdio>
#include <cstdlib>

#define CHECK(...)                                                                         \
  do {                                                                                     \
    if (!(__VA_ARGS__)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #__VA_ARGS__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)
