#pragma once
// zenith: JAX for C++. Include this one header.
//
// Layers (each uses only those below it): core/ -> expr/ -> backend/cpu/ -> autodiff/ ->
// transforms/.
#include "autodiff/backward.hpp"
#include "autodiff/sum_to.hpp"
#include "backend/cpu/concat.hpp"
#include "backend/cpu/evaluate.hpp"
#include "backend/cpu/fixed_eval.hpp"
#include "backend/cpu/matmul.hpp"
#include "backend/cpu/reduce.hpp"
#include "backend/cpu/softmax.hpp"
#include "core/array.hpp"
#include "core/creation.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "core/tensor.hpp"
#include "core/trace.hpp"
#include "expr/concat.hpp"
#include "expr/elementwise.hpp"
#include "expr/fixed_ops.hpp"
#include "expr/matmul.hpp"
#include "expr/reduce.hpp"
#include "expr/reshape.hpp"
#include "expr/softmax.hpp"
#include "expr/views.hpp"
#include "transforms/grad.hpp"
