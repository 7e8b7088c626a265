#pragma once
// The parts of zenith that every program compiles the same way, whatever its expressions: the
// IR's interpreter and derivative rules, the tape's runtime. Each is a template (`template <class
// = void>`), so that a program that never traces compiles none of it, and each is followed by a
// line ZENITH_RUNTIME_INSTANCE(declaration) that says what the precompiled runtime holds:
// - by default (header-only), nothing: a program compiles what it uses, as any template;
// - with ZENITH_PRECOMPILED_RUNTIME, an explicit instantiation declaration: the program compiles
//   none of it and links the object of src/zenith_runtime.cpp instead (about a fifth of an MLP
//   train step's build, bench/RESULTS.md);
// - in src/zenith_runtime.cpp (ZENITH_RUNTIME_SOURCE), the explicit instantiation itself.
// That object must be compiled with the program's compiler, flags (-march, -O) and configuration
// (ZENITH_WITH_NVRTC defined or not): it holds the same templates the program would otherwise
// compile, and one definition is kept of each.
#if defined(ZENITH_RUNTIME_SOURCE)
#define ZENITH_RUNTIME_INSTANCE(...) template __VA_ARGS__;
#elif defined(ZENITH_PRECOMPILED_RUNTIME)
#define ZENITH_RUNTIME_INSTANCE(...) extern template __VA_ARGS__;
#else
#define ZENITH_RUNTIME_INSTANCE(...)
#endif

// The configuration the runtime was compiled for, as a symbol that it defines and that every
// program built against it refers to: a program compiled for another instruction set or with the
// CUDA backend on where its runtime has it off (or the reverse) fails to link, and the linker's
// message names the runtime it needs (CMake's zenith_precompiled_runtime() compiles it with the
// program's own flags).
#if defined(ZENITH_RUNTIME_SOURCE) || defined(ZENITH_PRECOMPILED_RUNTIME)
#if defined(__AVX512F__)
#define ZENITH_RUNTIME_ISA avx512
#elif defined(__AVX2__) && defined(__FMA__)
#define ZENITH_RUNTIME_ISA avx2_fma
#elif defined(__AVX2__)
#define ZENITH_RUNTIME_ISA avx2
#elif defined(__AVX__)
#define ZENITH_RUNTIME_ISA avx
#elif defined(__SSE4_2__)
#define ZENITH_RUNTIME_ISA sse4_2
#elif defined(__aarch64__)
#define ZENITH_RUNTIME_ISA aarch64
#else
#define ZENITH_RUNTIME_ISA baseline
#endif
#if defined(ZENITH_WITH_NVRTC)
#define ZENITH_RUNTIME_BACKENDS cpu_cuda
#else
#define ZENITH_RUNTIME_BACKENDS cpu
#endif
#define ZENITH_RUNTIME_CAT_(a, b, c) runtime_built_for_##a##_##b##c
#define ZENITH_RUNTIME_CAT(a, b) ZENITH_RUNTIME_CAT_(a, b, )
#define ZENITH_RUNTIME_TAG ZENITH_RUNTIME_CAT(ZENITH_RUNTIME_ISA, ZENITH_RUNTIME_BACKENDS)
namespace zenith::detail {
extern int const ZENITH_RUNTIME_TAG;
#if defined(ZENITH_RUNTIME_SOURCE)
int const ZENITH_RUNTIME_TAG = 1;
#else
[[gnu::used]] static int const* const runtime_link_check = &ZENITH_RUNTIME_TAG;
#endif
}  // namespace zenith::detail
#endif
