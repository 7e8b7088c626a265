#pragma once
// zenith::array<T>: a dynamic-shape, row-major, refcounted array. Copies share the buffer.
// Assigning an expression evaluates it (see "Assignment rebinds" in docs/arrays.md).
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <ostream>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "expr_base.hpp"
#include "shape.hpp"

namespace zenith {

template <element T>
class array;

namespace detail {
// Defined by the CPU evaluator (backend/cpu/evaluate.hpp): fills a fresh array with e's values.
template <element T, expression E>
array<T> evaluate_as(E const& e);
// Evaluates e into dst's buffer; dst may be reused in place only where that is safe.
template <element T, expression E>
void assign_rebind(array<T>& dst, E const& e, bool temporary);
template <element T>
void print_array(std::ostream& os, array<T> const& a);
}  // namespace detail

namespace detail {
[[noreturn]] inline void fail_allocation(zenith::shape const& s, dtype dt, std::string bytes,
                                         device d) {
  throw memory_error("array: cannot allocate " + bytes + " bytes for shape " + s.str() + " of " +
                     std::string(dtype_name(dt)) + (d == cpu ? "" : " on " + d.str()));
}
// The buffer of a new array: its size checked for overflow, and memory that cannot be had
// reported as a memory_error naming the array rather than a bare std::bad_alloc. Out of line:
// every evaluation of every expression type makes its result with it.
[[gnu::noinline]] inline std::shared_ptr<buffer> allocate_array(zenith::shape const& s,
                                                                std::size_t item, dtype dt,
                                                                device d) {
  std::size_t n = 1, bytes = 0;
  bool overflow = false;
  for (std::size_t x : s) overflow |= __builtin_mul_overflow(n, x, &n);
  overflow |= __builtin_mul_overflow(n, item, &bytes);
  if (overflow) fail_allocation(s, dt, "more than 2^64", d);
  try {
    return buffer::allocate(bytes, d);
  } catch (std::bad_alloc const&) {
    fail_allocation(s, dt, std::to_string(bytes), d);
  }
}
}  // namespace detail

template <element T>
class array : public expr_base<array<T>> {
 public:
  using value_type = T;
  static constexpr bool fixed = false;
  static constexpr bool dense = true;  // a leaf with contiguous row-major storage

  // An empty array of shape (0,).
  array() : shape_{std::size_t(0)} {}

  array(zenith::shape s, std::initializer_list<T> values) : array(s) {
    check_count(values.size());
    std::copy(values.begin(), values.end(), ptr_);
    detail::note_host_written(ptr_, values.size());
  }
  array(zenith::shape s, std::vector<T> const& values) : array(s) {
    check_count(values.size());
    std::copy(values.begin(), values.end(), ptr_);
    detail::note_host_written(ptr_, values.size());
  }
  // Uninitialised storage of the given shape (used by the factories and evaluators), on the CPU
  // or on device d.
  static array empty(zenith::shape s) { return array(s); }
  static array empty(zenith::shape s, zenith::device d) { return array(s, d); }

  array(array const&) = default;
  array(array&&) noexcept = default;
  array& operator=(array const&) = default;
  array& operator=(array&&) noexcept = default;

  // Evaluating constructor: `array<float> y = expr;` runs one fused pass.
  template <expression E>
  requires(!std::same_as<std::remove_cvref_t<E>, array>) array(E const& e)
      : array(detail::evaluate_as<T>(e)) {}  // NOLINT: implicit by design

  // Rebinding assignment: `a = expr` makes a refer to the result (maybe reusing a's buffer).
  // A temporary expression's handles do not count as other owners of this array's buffer.
  template <expression E>
  requires(!std::same_as<std::remove_cvref_t<E>, array>) array& operator=(E&& e) {
    detail::assign_rebind(*this, e, !std::is_lvalue_reference_v<E>);
    return *this;
  }

  zenith::shape const& shape() const { return shape_; }
  std::size_t ndim() const { return shape_.size(); }
  std::size_t size() const { return shape_.numel(); }
  zenith::device device() const { return buf_ ? buf_->where() : cpu; }

  // This array on device d: itself when it is there already, else a copy there (which returns
  // when the copy is done). zenith::cpu brings a device array's values back to the host, into
  // page-locked memory (transfers to and from it run at full speed).
  array to(zenith::device d) const {
    zenith::device from = device();
    if (d == from) return *this;
    device_memory const& m = memory_of(from == cpu ? d : from);
    array out;
    out.buf_ = buffer::allocate(size() * sizeof(T), d, d == cpu ? &m : nullptr);
    out.ptr_ = static_cast<T*>(out.buf_->data());
    out.shape_ = shape_;
    if (std::size_t bytes = size() * sizeof(T)) m.copy(out.ptr_, d, ptr_, from, bytes);
    detail::note_unreplayable("a copy between devices");  // not a step a jit replay repeats
    return out;
  }
  T* data() { return ptr_; }
  T const* data() const { return ptr_; }

  template <std::integral... I>
  T& operator()(I... idx) {
    on_host("array()");
    return ptr_[offset_of(idx...)];
  }
  template <std::integral... I>
  T const& operator()(I... idx) const {
    on_host("array()");
    return ptr_[offset_of(idx...)];
  }

  // The single value of a size-1 array.
  T item() const {
    if (size() != 1)
      throw value_error("item: array of shape " + shape_.str() + " has " + std::to_string(size()) +
                        " elements, not 1");
    on_host("item");
    return ptr_[0];
  }

  // Internals shared with evaluators, interop and factories.
  std::shared_ptr<buffer> const& storage() const { return buf_; }
  static array from_buffer(std::shared_ptr<buffer> b, T* p, zenith::shape s) {
    array a;
    a.buf_ = std::move(b);
    a.ptr_ = p;
    a.shape_ = s;
    return a;
  }
  template <class F>
  void for_each_array(F&& f) const {
    f(*this);
  }

  friend std::ostream& operator<<(std::ostream& os, array const& a) {
    detail::print_array(os, a);
    return os;
  }

 private:
  explicit array(zenith::shape s, zenith::device d = cpu)
      : buf_(detail::allocate_array(s, sizeof(T), dtype_of<T>(), d)),
        ptr_(static_cast<T*>(buf_->data())),
        shape_(s) {}

  // Element access reads host memory: an array on a device must come back first.
  void on_host(char const* what) const {
    if (zenith::device d = device(); d != cpu)
      throw device_error(std::string(what) + ": array of shape " + shape_.str() + " is on " +
                         d.str() + "; read it on the host with .to(zenith::cpu)");
  }

  void check_count(std::size_t n) const {
    if (n != size())
      throw value_error("array: " + std::to_string(n) + " values given for shape " + shape_.str() +
                        " (" + std::to_string(size()) + " elements)");
  }

  template <class... I>
  std::size_t offset_of(I... idx) const {
    if (sizeof...(I) != ndim())
      throw index_error("array(): " + std::to_string(sizeof...(I)) +
                        " indices for array of shape " + shape_.str());
    long long const ii[] = {0LL, static_cast<long long>(idx)...};
    std::size_t off = 0;
    for (std::size_t k = 0; k < ndim(); ++k) {
      long long v = ii[k + 1], d = (long long)shape_[k];
      if (v < -d || v >= d)
        throw index_error("array(): index " + std::to_string(v) + " out of range for axis " +
                          std::to_string(k) + " of shape " + shape_.str());
      off = off * shape_[k] + std::size_t(v < 0 ? v + d : v);
    }
    return off;
  }

  std::shared_ptr<buffer> buf_;
  T* ptr_ = nullptr;
  zenith::shape shape_;
};

template <class T>
inline constexpr bool is_array_v = false;
template <class T>
inline constexpr bool is_array_v<array<T>> = true;

// Raw pointers come in only through these named factories.
// copy_from: a fresh array holding a copy of n = shape.numel() values at ptr.
template <element T>
array<T> copy_from(T const* ptr, shape s) {
  auto a = array<T>::empty(s);
  if (s.numel()) std::memcpy(a.data(), ptr, s.numel() * sizeof(T));
  detail::note_host_written(a.data(), s.numel());
  return a;
}
// view: an array over the caller's memory, zero-copy; the caller keeps it alive.
template <element T>
array<T> view(T* ptr, shape s) {
  auto b = buffer::borrow(ptr, s.numel() * sizeof(T));
  return array<T>::from_buffer(std::move(b), ptr, s);
}

}  // namespace zenith
