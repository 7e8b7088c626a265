#pragma once
// any_array: an array whose element type is known at run time (a dtype), as the IR's
// interpreter passes values around. It shares the buffer of the array<T> it was made from, and
// converts back to array<T> with the dtype checked.
#include <memory>
#include <string>

#include "array.hpp"
#include "buffer.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "shape.hpp"

namespace zenith {

class any_array {
 public:
  any_array() = default;
  template <element T>
  any_array(array<T> const& a)  // NOLINT: implicit, as a handle of any type
      : dtype_(dtype_of<T>()),
        shape_(a.shape()),
        buf_(a.storage()),
        data_(const_cast<T*>(a.data())) {}

  zenith::dtype dtype() const { return dtype_; }
  zenith::shape const& shape() const { return shape_; }
  void const* data() const { return data_; }
  std::shared_ptr<buffer> const& storage() const { return buf_; }
  bool empty() const { return !buf_; }

  // The same elements under a fresh buffer identity (buffer::alias).
  any_array alias() const {
    any_array r = *this;
    r.buf_ = buffer::alias(buf_);
    return r;
  }

  // The array of element type T; another dtype is a dtype_error naming both.
  template <element T>
  array<T> as() const {
    if (dtype_ != dtype_of<T>())
      throw dtype_error("any_array: holds " + std::string(dtype_name(dtype_)) + ", not " +
                        std::string(dtype_name<T>()) + " (shape " + shape_.str() + ")");
    return array<T>::from_buffer(buf_, static_cast<T*>(data_), shape_);
  }

 private:
  zenith::dtype dtype_ = zenith::dtype::float32;
  zenith::shape shape_;
  std::shared_ptr<buffer> buf_;
  void* data_ = nullptr;
};

// Calls f.template operator()<T>() with T the element type of dtype d.
template <class F>
decltype(auto) with_dtype(zenith::dtype d, F&& f) {
  switch (d) {
    case zenith::dtype::bool_:
      return f.template operator()<bool>();
    case zenith::dtype::int32:
      return f.template operator()<std::int32_t>();
    case zenith::dtype::int64:
      return f.template operator()<std::int64_t>();
    case zenith::dtype::bfloat16:
      return f.template operator()<bfloat16>();
    case zenith::dtype::float16:
      return f.template operator()<float16>();
    case zenith::dtype::float32:
      return f.template operator()<float>();
    case zenith::dtype::float64:
      break;
  }
  return f.template operator()<double>();
}

}  // namespace zenith
