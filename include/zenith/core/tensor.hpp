#pragma once
// zenith::tensor<T, N...>: a fixed-size tensor whose shape lives in its type and whose storage
// is inline (a std::array, row-major). Nothing about it touches the heap.
//
//   zn::tensor<double, 3> q{0.1, 0.2, 0.3};
//   zn::tensor<double, 3> r = zn::sin(q) * 2.0 + q;   // unrolled: r[i] = sin(q[i]) * 2 + q[i]
//   double s = zn::sum(r);                             // rank-0 tensor<double> converts to double
//
// A tensor is an expression leaf. An expression built only from tensors and scalars is a
// fixed_expression: assigning it to a tensor evaluates it element by element at compile-time
// indices (backend/cpu/fixed_eval.hpp). Mixed with an array, a tensor is read as a dense leaf
// by the dynamic evaluator and the result is an array.
//
// T is any arithmetic-like type (float, double, the library's storage floats, or a user type
// such as a dual number): the tensor itself only copies, stores and converts elements.
#include <array>
#include <cstddef>
#include <ostream>
#include <string>
#include <type_traits>

#include "array.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "expr_base.hpp"
#include "shape.hpp"

// Fixed-size code is many tiny functions that only pay off once inlined into one another;
// compilers' inlining budgets give up too early on them, so they are forced (as Eigen does).
#if defined(__GNUC__) || defined(__clang__)
#define ZENITH_FIXED_INLINE inline __attribute__((always_inline))
#define ZENITH_FIXED_LAMBDA __attribute__((always_inline))
#else
#define ZENITH_FIXED_INLINE inline
#define ZENITH_FIXED_LAMBDA
#endif

namespace zenith {

template <std::size_t... N>
struct fixed_shape;  // expr/fixed_shape.hpp

template <class T, std::size_t... N>
class tensor;

namespace detail {
// Defined by backend/cpu/fixed_eval.hpp: dst[i] = T(e.at(i)) for every flat index i of Shape,
// unrolled at compile-time indices.
template <class T, std::size_t Size, class E>
void fixed_assign(T* dst, E const& e);

template <class T>
struct is_tensor : std::false_type {};
template <class T, std::size_t... N>
struct is_tensor<tensor<T, N...>> : std::true_type {};
}  // namespace detail

template <class T>
inline constexpr bool is_tensor_v = detail::is_tensor<std::remove_cvref_t<T>>::value;

template <class T, std::size_t... N>
class tensor : public expr_base {
  static_assert(std::is_object_v<T> && !std::is_const_v<T> && !std::is_volatile_v<T> &&
                    std::is_default_constructible_v<T> && std::is_copy_constructible_v<T>,
                "zenith: tensor<T, N...> needs a plain, default-constructible, copyable T");
  static_assert(sizeof...(N) <= max_rank, "zenith: tensor rank above 8");

 public:
  using value_type = T;
  using static_shape = fixed_shape<N...>;
  static constexpr bool fixed = true;
  static constexpr bool dense = true;  // the dynamic evaluator reads data() / shape() as a leaf
  static constexpr std::size_t rank = sizeof...(N);
  static constexpr std::size_t count = (N * ... * std::size_t(1));
  static constexpr std::array<std::size_t, rank> dims{N...};

  // Zeros (value-initialised elements).
  constexpr tensor() : data_{} {}

  // Row-major values, one per element: tensor<double, 2, 2> m{1, 2, 3, 4}.
  template <class... U>
  requires(sizeof...(U) == count && (!expression<U> && ...) &&
           (std::is_convertible_v<U const&, T> && ...)) constexpr tensor(U const&... v)
      : data_{static_cast<T>(v)...} {}  // NOLINT: implicit, so rank 0 takes a plain value
  template <class... U>
  requires(sizeof...(U) != count && sizeof...(U) >= 1 && (!expression<U> && ...) &&
           (std::is_convertible_v<U const&, T> && ...)) explicit tensor(U const&...) {
    static_assert(sizeof...(U) == count,
                  "zenith: a tensor's brace initialiser needs exactly one value per element");
  }

  explicit constexpr tensor(std::array<T, count> const& values) : data_(values) {}

  // Evaluating constructor: an expression of tensors and scalars, unrolled; no heap.
  template <fixed_expression E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, tensor>) ZENITH_FIXED_INLINE
      tensor(E const& e) {  // NOLINT: implicit by design
    assign_fixed(e);
  }
  // From an expression with a runtime shape (reads arrays): evaluated through an array, so it
  // may allocate; the shape is checked when it runs. Explicit, since it is not free.
  template <expression E>
  requires(!fixed_expression<E> && element<T>) explicit tensor(E const& e) { assign_dynamic(e); }

  tensor(tensor const&) = default;
  tensor(tensor&&) = default;
  tensor& operator=(tensor const&) = default;
  tensor& operator=(tensor&&) = default;

  template <fixed_expression E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, tensor>) ZENITH_FIXED_INLINE tensor& operator=(
      E const& e) {
    // The expression holds its tensor leaves by value, so reading this tensor while writing it
    // is safe: the expression reads its own copy.
    assign_fixed(e);
    return *this;
  }

  static constexpr tensor full(T const& v) {
    tensor t;
    for (auto& x : t.data_) x = v;
    return t;
  }
  static constexpr tensor zeros() { return tensor(); }
  static constexpr tensor ones() { return full(T(1)); }
  // The identity matrix (square rank-2 tensors only).
  static constexpr tensor identity() requires(rank == 2 && dims[0] == dims[rank - 1]) {
    tensor t;
    for (std::size_t i = 0; i < dims[0]; ++i) t.data_[i * dims[0] + i] = T(1);
    return t;
  }

  zenith::shape shape() const {
    if constexpr (rank == 0)
      return zenith::shape{};
    else
      return zenith::shape{N...};
  }
  static constexpr std::size_t ndim() { return rank; }
  static constexpr std::size_t size() { return count; }
  constexpr T* data() { return data_.data(); }
  constexpr T const* data() const { return data_.data(); }
  constexpr T* begin() { return data_.data(); }
  constexpr T* end() { return data_.data() + count; }
  constexpr T const* begin() const { return data_.data(); }
  constexpr T const* end() const { return data_.data() + count; }
  constexpr std::array<T, count>& values() { return data_; }
  constexpr std::array<T, count> const& values() const { return data_; }

  // Element access by one index per axis (unchecked, like std::array::operator[]).
  template <std::integral... I>
  constexpr T& operator()(I... idx) {
    return data_[offset_of(idx...)];
  }
  template <std::integral... I>
  constexpr T const& operator()(I... idx) const {
    return data_[offset_of(idx...)];
  }
  // Flat row-major access (unchecked).
  constexpr T& operator[](std::size_t i) { return data_[i]; }
  constexpr T const& operator[](std::size_t i) const { return data_[i]; }

  // The fixed-size evaluation protocol (see map_node::at): the value at flat index i.
  ZENITH_FIXED_INLINE constexpr compute_t<T> at(std::size_t i) const {
    return compute_t<T>(data_[i]);
  }

  template <class F>
  void for_each_array(F&&) const {}  // holds no array

  // A rank-0 tensor is its value.
  constexpr operator T() const requires(rank == 0) { return data_[0]; }  // NOLINT

  friend std::ostream& operator<<(std::ostream& os, tensor const& t) {
    if constexpr (element<T>) {
      os << copy_from(t.data(), t.shape());  // the same format as arrays
    } else {
      t.print(os, 0, 0);
    }
    return os;
  }

 private:
  template <class E>
  ZENITH_FIXED_INLINE void assign_fixed(E const& e) {
    static_assert(std::is_same_v<typename std::remove_cvref_t<E>::static_shape, static_shape>,
                  "zenith: the expression's fixed shape differs from the tensor's");
    detail::fixed_assign<T, count>(data_.data(), e);
  }
  template <class E>
  void assign_dynamic(E const& e) {
    array<T> a = e;
    if (!(a.shape() == shape()))
      throw shape_error("tensor: cannot assign an expression of shape " + a.shape().str() +
                        " to a tensor of shape " + shape().str());
    for (std::size_t i = 0; i < count; ++i) data_[i] = a.data()[i];
  }

  template <class... I>
  static constexpr std::size_t offset_of(I... idx) {
    static_assert(sizeof...(I) == rank, "zenith: tensor(): give one index per axis");
    if constexpr (rank == 0) {
      return 0;
    } else {
      std::size_t const ii[] = {static_cast<std::size_t>(idx)...};
      std::size_t off = 0;
      for (std::size_t k = 0; k < rank; ++k) off = off * dims[k] + ii[k];
      return off;
    }
  }

  void print(std::ostream& os, std::size_t axis, std::size_t off) const requires
      requires(std::ostream& o, T const& v) {
    o << v;
  }
  {
    if (axis == rank) {
      os << data_[off];
      return;
    }
    std::size_t stride = 1;
    for (std::size_t k = axis + 1; k < rank; ++k) stride *= dims[k];
    os << '[';
    for (std::size_t i = 0; i < dims[axis]; ++i) {
      if (i) os << ", ";
      print(os, axis + 1, off + i * stride);
    }
    os << ']';
  }

  std::array<T, count> data_;
};

}  // namespace zenith
