#pragma once
// Host definitions under which zenith's generated CUDA kernel source compiles as plain C++
// (test_host_emulation.cpp): the CUDA keywords as nothing, blockIdx / threadIdx / blockDim /
// gridDim as the running thread's grid position (grid_position.hpp) that zn_emulate loops over,
// and the device math functions the op snippets call, for float and double, from the host's
// libm. Kernels whose threads cooperate (__shared__, __syncthreads: the reductions) run with
// zn_emulate_blocks, one std::thread per CUDA thread and a std::barrier per block; blocks run one
// after another, so a function-local static is the block's shared memory.
//
// The library this is compiled into has no thread_local of its own: the position lives in the
// test program's thread-local storage and is reached through the function the runner passes to
// zn_emulate. A dlopen'ed library's thread_local is dynamic TLS, and LeakSanitizer's exit scan
// of dynamic TLS blocks that a thread allocated in a library since closed crashes its tracer.
#include <math.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <thread>
#include <vector>

#include <zenith/core/dtype.hpp>  // the 16-bit floats' rounding, as the CPU backend does it

#define ZN_HOST_GRID_SHIM
#include "grid_position.hpp"

#define __global__
#define __device__
#define __forceinline__ inline
#define __align__(n) alignas(n)
#define __shared__ static

inline zn_position_fn zn_position = nullptr;  // set by zn_emulate / zn_emulate_blocks
#define blockIdx (zn_position()->block)
#define threadIdx (zn_position()->thread)
#define blockDim (zn_position()->block_dim)
#define gridDim (zn_position()->grid_dim)

inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
// CUDA's min and max on floating point are fminf / fmin: a NaN operand gives the other one.
inline float min(float a, float b) { return std::fmin(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline int min(int a, int b) { return std::min(a, b); }
inline int max(int a, int b) { return std::max(a, b); }
inline long long min(long long a, long long b) { return std::min(a, b); }
inline long long max(long long a, long long b) { return std::max(a, b); }

inline float zn_host_bf16(unsigned short h) { return float(zenith::bfloat16::from_bits(h)); }
inline unsigned short zn_host_to_bf16(float f) { return zenith::bfloat16(f).bits; }
inline float zn_host_f16(unsigned short h) { return float(zenith::float16::from_bits(h)); }
inline unsigned short zn_host_to_f16(float f) { return zenith::float16(f).bits; }

// Runs fn(args) once per thread of a grid x block launch, one thread after another.
extern "C" void zn_emulate(void (*fn)(void**), void** args, unsigned grid, unsigned block,
                           zn_position_fn position) {
  zn_position = position;
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < block; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      fn(args);
    }
}

inline std::barrier<>* zn_block_barrier = nullptr;
inline void __syncthreads() { zn_block_barrier->arrive_and_wait(); }

// Runs a grid x block launch of a kernel whose threads synchronize: each block's threads at
// once, as threads of their own.
extern "C" void zn_emulate_blocks(void (*fn)(void**), void** args, unsigned grid, unsigned block,
                                  zn_position_fn position) {
  zn_position = position;
  for (unsigned b = 0; b < grid; ++b) {
    std::barrier<> bar(block);
    zn_block_barrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([=] {
        gridDim.x = grid;
        blockDim.x = block;
        blockIdx.x = b;
        threadIdx.x = t;
        fn(args);
      });
    for (auto& th : threads) th.join();
  }
}
