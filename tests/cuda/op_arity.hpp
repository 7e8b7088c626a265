#pragma once
// The number of operands an elementwise op takes: zenith::op_arity (expr/ops.hpp).
#include <zenith/expr/ops.hpp>

using zenith::op_arity;
