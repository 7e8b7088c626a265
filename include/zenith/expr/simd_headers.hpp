#pragma once
// xsimd, for every zenith header that uses it (included through here only).
// GCC 12 reports a false -Wuninitialized inside its own AVX-512 intrinsics (the deliberate
// `__m512i __Y = __Y;` of _mm512_undefined_*, inlined into xsimd's double log and log1p; GCC bug
// 105593, fixed in GCC 13). Silenced for xsimd's headers only, so that zenith's users building
// with -Wall -Werror are not hit.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <xsimd/xsimd.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
