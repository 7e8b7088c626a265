#pragma once
// Which device an expression's arrays live on. Evaluation runs where the arrays are; an
// expression that mixes devices is an error, as no backend reads another's memory.
#include <atomic>

#include "device.hpp"
#include "device_memory.hpp"
#include "error.hpp"
#include "expr_base.hpp"
#include "shape.hpp"

namespace zenith {
template <element T>
class array;  // core/array.hpp
}  // namespace zenith

namespace zenith::detail {

// The device of every array e reads (the CPU for none); device_error when they are on more than
// one, naming two of them.
[[noreturn, gnu::cold]] inline void fail_mixed_devices(zenith::shape const& s0, device d0,
                                                       zenith::shape const& s1, device d1) {
  throw device_error("zenith: an expression mixes an array of shape " + s0.str() + " on " +
                     d0.str() + " with one of shape " + s1.str() + " on " + d1.str() +
                     "; move them to one device with .to(device)");
}

template <expression E>
device check_one_device(E const& e) {
  device d0 = cpu;
  zenith::shape const* s0 = nullptr;  // the first array's
  e.for_each_array([&](auto const& a) {
    if (!s0) {
      d0 = a.device();
      s0 = &a.shape();
    } else if (a.device() != d0) {
      fail_mixed_devices(*s0, d0, a.shape(), a.device());
    }
  });
  return d0;
}

// Where e's arrays live, and whether that is a device other than the CPU: for the library's own
// evaluations (a gradient's cotangents, a barrier's operands), which a program that never made a
// device array pays one load for.
template <expression E>
device device_of(E const& e) {
  return device_memory_used().load(std::memory_order_relaxed) ? check_one_device(e) : cpu;
}
template <expression E>
bool on_a_device(E const& e) {
  return device_of(e) != cpu;
}

// e evaluated on device d (not the CPU). Declared here so that the CPU backend can hand a
// device expression on without including a device backend; backend/cuda/launch.hpp (included
// by zenith.hpp) defines it.
template <element T, expression E>
array<T> evaluate_on_device_backend(device d, E const& e);

}  // namespace zenith::detail
