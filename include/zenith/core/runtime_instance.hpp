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
