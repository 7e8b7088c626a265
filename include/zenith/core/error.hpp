#pragma once
// The error hierarchy: every failure zenith reports is a zenith::error, and the message names
// the op and the shapes involved in one line.
#include <stdexcept>
#include <string>

namespace zenith {

struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Shapes that do not fit together (broadcasting, reshape, matmul, axes out of range).
struct shape_error : error {
  using error::error;
};
// An element type an op cannot take.
struct dtype_error : error {
  using error::error;
};
// An element index out of range.
struct index_error : error {
  using error::error;
};
// A bad value: negative dimension, zero step, empty reduction without identity, ...
struct value_error : error {
  using error::error;
};
// Memory that cannot be had: the message names the array's shape, dtype and bytes.
struct memory_error : error {
  using error::error;
};
// A device that does not exist or cannot be mixed with another.
struct device_error : error {
  using error::error;
};

}  // namespace zenith
