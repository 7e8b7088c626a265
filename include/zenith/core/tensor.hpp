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
#include <cstdint>
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
// Only where the optimizer runs: at -O0 forcing makes nothing faster, and it has the compiler
// build each fixed-size expression as one huge function (the fixed-size gradient tests compiled
// four to eight times more slowly at -O0 with it).
#if (defined(__GNUC__) || defined(__clang__)) && defined(__OPTIMIZE__)
#define ZENITH_FIXED_INLINE inline __attribute__((always_inline))
#define ZENITH_FIXED_LAMBDA __attribute__((always_inline))
#else
#define ZENITH_FIXED_INLINE inline
#define ZENITH_FIXED_LAMBDA
#endif

// True where the compiler can see x's value after inlining; false where it cannot (or cannot
// tell), so code guarded by it stays correct either way.
// ZENITH_SEES_CONSTANTS: whether it ever can (an optimizing GCC or clang build); code that only
// computes something for ZENITH_KNOWN_CONSTANT to look at skips the computation where not.
#if defined(__GNUC__) || defined(__clang__)
#define ZENITH_KNOWN_CONSTANT(x) __builtin_constant_p(x)
#else
#define ZENITH_KNOWN_CONSTANT(x) false
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(__OPTIMIZE__)
#define ZENITH_SEES_CONSTANTS 1
#else
#define ZENITH_SEES_CONSTANTS 0
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

// Which entries of a tensor of derivative numbers (user_number: a dual) are constants: given as
// plain numbers (a shallower type), so with no derivative, and which of those are exactly zero.
// One flags byte per entry, for tensors of up to 64 entries. The fixed-size matmul of duals
// skips the derivative terms of constants and every product with a zero where the compiler can
// see the flags (after inlining, a tensor built from `{c, -s, 0.0, a, ...}` has known flags):
// most of the tangent work of a chain of homogeneous transforms. Anything that may write an
// entry clears the flags, so a set flag is always true; a clear one means "not known".
// A constant flag also comes from a derivative number the compiler sees has a zero derivative
// part (`T(0.0)`, `T(a)`, `T(a) * T(b)`: number_traits::known_flags). A zero flag comes from a
// literal zero the compiler can see in a brace initialiser, from value-initialisation, or from
// a product whose every term has a zero factor.
// constant_flag: no derivative; zero_flag (always with constant_flag): exactly zero.
inline constexpr std::uint8_t constant_flag = 1, zero_flag = 2;

template <class T, std::size_t Count>
struct constant_entries {  // other element types, or too many entries: nothing is tracked
  static constexpr bool tracked = false;
  static constexpr std::uint8_t flag(std::size_t) { return 0; }
  constexpr void set_all(std::uint8_t) {}
  constexpr void set(std::size_t, std::uint8_t) {}
};
template <class T, std::size_t Count>
requires(user_number<T>&& Count <= 64) struct constant_entries<T, Count> {
  static constexpr bool tracked = true;
  std::array<std::uint8_t, Count> f{};
  constexpr std::uint8_t flag(std::size_t i) const { return f[i]; }
  constexpr void set_all(std::uint8_t v) {
    for (auto& x : f) x = v;
  }
  constexpr void set(std::size_t i, std::uint8_t v) { f[i] = v; }
};

// The flags where the compiler can see their value after inlining, else 0: the only flags the
// matmul may act on, since flags known only at run time would put a branch on every term.
// Every flag stored in a tensor has been through this, so that a later test of it is not of an
// expression holding a test the compiler has yet to decide (GCC decides those that are still
// open as false in one pass, and would drop the flags built on them).
// Bit by bit: an entry may be known constant while whether it is zero is not.
ZENITH_FIXED_INLINE constexpr std::uint8_t if_known(std::uint8_t flags) {
  std::uint8_t const c = flags & constant_flag, z = flags & zero_flag;
  return std::uint8_t((ZENITH_KNOWN_CONSTANT(c) ? c : 0) | (ZENITH_KNOWN_CONSTANT(z) ? z : 0));
}

// A plain-number initialiser that the compiler can see is zero (a literal 0.0).
template <class T, class U>
ZENITH_FIXED_INLINE constexpr bool known_zero(U const& v) {
  if constexpr (number_depth<U> < number_depth<T> && std::is_arithmetic_v<U>)
    return ZENITH_KNOWN_CONSTANT(v) && v == U(0);
  else
    return false;
}

// The flags of an initialiser of type U for an entry of type T. A derivative number of type T
// is flagged where the compiler sees that its derivative part is zero (`T(0.0)`, `T(a)`).
template <class T, class U>
ZENITH_FIXED_INLINE constexpr std::uint8_t initial_flags(U const& v) {
  if constexpr (number_depth<U> < number_depth<T>)
    return constant_flag | (known_zero<T>(v) ? zero_flag : 0);
  else if constexpr (ZENITH_SEES_CONSTANTS && std::is_same_v<U, T> &&
                     requires { number_traits<T>::known_flags(v); })
    return std::is_constant_evaluated() ? std::uint8_t(0)
                                        : if_known(number_traits<T>::known_flags(v));
  else
    return 0;
}

// The largest power of two up to 64 bytes (a cache line, an AVX-512 vector) that divides
// `bytes`, at least `least`: an alignment that adds no padding to an object of that size.
constexpr std::size_t vector_align(std::size_t bytes, std::size_t least) {
  std::size_t a = least;
  while (bytes > 0 && a < 64 && bytes % (2 * a) == 0) a *= 2;
  return a;
}

// The tag of tensor's constructor that leaves the elements unset.
struct uninitialized_t {
  explicit uninitialized_t() = default;
};
inline constexpr uninitialized_t uninitialized{};

template <class T>
struct is_tensor : std::false_type {};
template <class T, std::size_t... N>
struct is_tensor<tensor<T, N...>> : std::true_type {};
}  // namespace detail

template <class T>
inline constexpr bool is_tensor_v = detail::is_tensor<std::remove_cvref_t<T>>::value;

// The tag of tensor's constructor that leaves the elements unset, for code that writes every
// element next: `zn::tensor<double, 4096> u(zn::uninitialized);` (a default-constructed tensor
// is zeros, a pass over its memory).
using detail::uninitialized;
using detail::uninitialized_t;

template <class T, std::size_t... N>
class tensor : public expr_base<tensor<T, N...>> {
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
  // Whether entry_flags are kept (tensors of up to 64 derivative numbers).
  static constexpr bool tracks_entry_flags = detail::constant_entries<T, count>::tracked;

  // Zeros (value-initialised elements): constants.
  constexpr tensor() : data_{} { constants_.set_all(detail::constant_flag | detail::zero_flag); }
  // Elements left unset, for code that writes every one of them next (a staged gradient,
  // autodiff/staged_reverse.hpp): not zeroing a large tensor is a pass over its memory saved.
  explicit tensor(detail::uninitialized_t) {}

  // Row-major values, one per element: tensor<double, 2, 2> m{1, 2, 3, 4}. Always inlined: the
  // entry flags are seen only where the initialisers are.
  template <class... U>
  requires(sizeof...(U) == count && (!expression<U> && ...) &&
           (std::is_convertible_v<U const&, T> && ...)) ZENITH_FIXED_INLINE
      constexpr tensor(U const&... v)
      : data_{static_cast<T>(v)...} {  // NOLINT: implicit, so rank 0 takes a plain value
    std::size_t i = 0;
    (constants_.set(i++, detail::initial_flags<T>(v)), ...);
  }
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
    t.constants_.set_all(0);
    return t;
  }
  static constexpr tensor zeros() { return tensor(); }
  static constexpr tensor ones() { return full(T(1)); }
  // The identity matrix (square rank-2 tensors only).
  static constexpr tensor identity() requires(rank == 2 && dims[0] == dims[rank - 1]) {
    tensor t;
    for (std::size_t i = 0; i < dims[0]; ++i) {
      t.data_[i * dims[0] + i] = T(1);
      t.constants_.set(i * dims[0] + i, detail::constant_flag);  // a constant, not a zero
    }
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
  // Mutable access forgets which entries are constants (see detail::constant_entries).
  constexpr T* data() {
    constants_.set_all(0);
    return data_.data();
  }
  constexpr T const* data() const { return data_.data(); }
  constexpr T* begin() { return data(); }
  constexpr T* end() { return data() + count; }
  constexpr T const* begin() const { return data_.data(); }
  constexpr T const* end() const { return data_.data() + count; }
  constexpr std::array<T, count>& values() {
    constants_.set_all(0);
    return data_;
  }
  constexpr std::array<T, count> const& values() const { return data_; }

  // Element access by one index per axis (unchecked, like std::array::operator[]).
  template <std::integral... I>
  constexpr T& operator()(I... idx) {
    constants_.set_all(0);
    return data_[offset_of(idx...)];
  }
  template <std::integral... I>
  constexpr T const& operator()(I... idx) const {
    return data_[offset_of(idx...)];
  }
  // Flat row-major access (unchecked).
  constexpr T& operator[](std::size_t i) {
    constants_.set_all(0);
    return data_[i];
  }
  constexpr T const& operator[](std::size_t i) const { return data_[i]; }

  // The flags of flat entry i (detail::constant_flag, detail::zero_flag; see
  // detail::constant_entries). Always 0 for tensors of plain numbers.
  constexpr std::uint8_t entry_flags(std::size_t i) const { return constants_.flag(i); }
  constexpr void set_entry_flags(std::size_t i, std::uint8_t f) { constants_.set(i, f); }

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
    // An expression of shallower numbers (a tensor<double> into a tensor of duals) is constant.
    constants_.set_all(number_depth<value_t<E>> < number_depth<T> ? detail::constant_flag : 0);
  }
  template <class E>
  void assign_dynamic(E const& e) {
    array<T> a = e;
    detail::note_unreplayable("an array expression read into a tensor");  // read on the host
    if (!(a.shape() == shape()))
      throw shape_error("tensor: cannot assign an expression of shape " + a.shape().str() +
                        " to a tensor of shape " + shape().str());
    for (std::size_t i = 0; i < count; ++i) data_[i] = a.data()[i];
    constants_.set_all(0);
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

  // Aligned to the largest power of two up to 64 bytes (a cache line, an AVX-512 vector) that
  // divides the elements' size, so a tensor grows no larger. A vector load or store of a fixed
  // expression then never straddles a cache line, nor a page: on the stack at a 32-byte
  // boundary, a page split in a value_and_grad's result or input made a 6-10 ns call take
  // 26-41 ns (bench/RESULTS.md, "Exp with vscalefpd, tensors aligned to the vector").
  alignas(detail::vector_align(count * sizeof(T), alignof(T))) std::array<T, count> data_;
  [[no_unique_address]] detail::constant_entries<T, count> constants_;
};

}  // namespace zenith
