#pragma once
// A stand-in CUDA thread's place in its grid (host_grid_shim.hpp's blockIdx, threadIdx,
// blockDim, gridDim), kept in the test program's thread-local storage: the kernel libraries
// reach it through zn_host_position, which the runners pass to zn_emulate.
struct zn_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
struct zn_grid_position {
  zn_dim3 block, thread, block_dim, grid_dim;
};
using zn_position_fn = zn_grid_position* (*)();

// The calling thread's position, in the test program (not in the kernel libraries, which
// include this from host_grid_shim.hpp only for the types).
#ifndef ZN_HOST_GRID_SHIM
inline zn_grid_position* zn_host_position() {
  thread_local zn_grid_position position;
  return &position;
}
#endif
