#pragma once
// zenith: JAX for C++. Include this one header.
//
// Layers (each uses only those below it): core/ -> expr/ -> backend/cpu/ -> autodiff/ ->
// transforms/.
#include "autodiff/backward.hpp"
#include "autodiff/dual.hpp"
#include "autodiff/forward.hpp"
#include "autodiff/ir_jvp.hpp"
#include "autodiff/ir_vjp.hpp"
#include "autodiff/reverse_scalar.hpp"
#include "autodiff/staged_reverse.hpp"
#include "autodiff/sum_to.hpp"
#include "autodiff/tape.hpp"
#include "backend/cpu/concat.hpp"
#include "backend/cpu/conv.hpp"
#include "backend/cpu/evaluate.hpp"
#include "backend/cpu/fixed_eval.hpp"
#include "backend/cpu/interpret.hpp"
#include "backend/cpu/layer_norm.hpp"
#include "backend/cpu/matmul.hpp"
#include "backend/cpu/reduce.hpp"
#include "backend/cpu/softmax.hpp"
#include "backend/cuda/device_memory.hpp"  // zenith::cuda(i), arrays on it: .to(zenith::cuda(i))
#include "backend/cuda/driver.hpp"         // the CUDA driver, opened at run time
#include "backend/cuda/kernel_runner.hpp"  // without NVRTC: a device expression is an error
#ifdef ZENITH_WITH_NVRTC
#include "backend/cuda/cublas.hpp"  // matmul on devices: cuBLAS, opened at run time
#include "backend/cuda/cudnn.hpp"   // conv2d on devices: cuDNN, opened at run time
#include "backend/cuda/launch.hpp"  // expressions over device arrays, kernels printed from them
#include "backend/cuda/runner.hpp"  // device expressions compiled by NVRTC, launched by the driver
#endif
#include "core/array.hpp"
#include "core/creation.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "core/tensor.hpp"
#include "core/tensor_ref.hpp"
#include "core/trace.hpp"
#include "core/tree.hpp"
#include "expr/concat.hpp"
#include "expr/conv.hpp"
#include "expr/elementwise.hpp"
#include "expr/fixed_ops.hpp"
#include "expr/layer_norm.hpp"
#include "expr/matmul.hpp"
#include "expr/reduce.hpp"
#include "expr/reshape.hpp"
#include "expr/scalar_math.hpp"
#include "expr/softmax.hpp"
#include "expr/staged.hpp"
#include "expr/views.hpp"
#include "transforms/array_jacobian.hpp"
#include "transforms/checkpoint.hpp"
#include "transforms/custom_vjp.hpp"
#include "transforms/grad.hpp"
#include "transforms/jacobian.hpp"
#include "transforms/jacrev.hpp"
#include "transforms/jit.hpp"
#include "transforms/jvp.hpp"
#include "transforms/make_jaxpr.hpp"
#include "transforms/staged_grad.hpp"
