#pragma once
// Element types: the five native ones plus the 16-bit float storage types bfloat16 and float16,
// which convert to float for arithmetic. Promotion follows JAX's lattice.
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string_view>
#include <type_traits>

namespace zenith {

// bfloat16: the top 16 bits of an IEEE float. Conversion rounds to nearest even; NaN stays NaN.
struct bfloat16 {
  std::uint16_t bits = 0;
  constexpr bfloat16() = default;
  bfloat16(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a built-in float
  operator float() const { return std::bit_cast<float>(std::uint32_t(bits) << 16); }
  static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 r;
    r.bits = b;
    return r;
  }

 private:
  static std::uint16_t from_float(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if (std::isnan(f)) return std::uint16_t((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return std::uint16_t(u >> 16);
  }
};

// float16: IEEE binary16. Conversion rounds to nearest even, handles subnormals, inf and NaN.
struct float16 {
  std::uint16_t bits = 0;
  constexpr float16() = default;
  float16(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a built-in float
  operator float() const { return to_float(bits); }
  static float16 from_bits(std::uint16_t b) {
    float16 r;
    r.bits = b;
    return r;
  }

 private:
  static float to_float(std::uint16_t h) {
    std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
    std::uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    std::uint32_t u;
    if (exp == 0) {
      if (man == 0) {
        u = sign;
      } else {  // subnormal: value = man * 2^-24
        float v = std::ldexp(float(man), -24);
        return sign ? -v : v;
      }
    } else if (exp == 31) {
      u = sign | 0x7f800000u | (man << 13);
    } else {
      u = sign | ((exp + 112) << 23) | (man << 13);
    }
    return std::bit_cast<float>(u);
  }
  static std::uint16_t from_float(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000);
    std::uint32_t au = u & 0x7fffffffu;
    if (au >= 0x7f800000u) return std::uint16_t(sign | 0x7c00 | (au > 0x7f800000u ? 0x200 : 0));
    if (au >= 0x477ff000u) return std::uint16_t(sign | 0x7c00);  // rounds to >= 65520: inf
    if (au < 0x38800000u) {  // below the smallest normal half: subnormal or zero
      float a = std::bit_cast<float>(au);
      float scaled = a * 16777216.0f;  // 2^24: exact, then round to an integer (nearest even)
      return std::uint16_t(sign | std::uint16_t(std::nearbyint(scaled)));
    }
    std::uint32_t mant_odd = (au >> 13) & 1;
    au += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return std::uint16_t(sign | (au >> 13));
  }
};

inline std::ostream& operator<<(std::ostream& os, bfloat16 v) { return os << float(v); }
inline std::ostream& operator<<(std::ostream& os, float16 v) { return os << float(v); }

enum class dtype { bool_, int32, int64, bfloat16, float16, float32, float64 };

template <class T>
concept element = std::same_as<T, bool> || std::same_as<T, std::int32_t> ||
    std::same_as<T, std::int64_t> || std::same_as<T, bfloat16> || std::same_as<T, float16> ||
    std::same_as<T, float> || std::same_as<T, double>;

template <class T>
concept storage_float = std::same_as<T, bfloat16> || std::same_as<T, float16>;

template <class T>
concept floating_element = std::floating_point<T> || storage_float<T>;

template <class T>
concept integral_element = std::same_as<T, std::int32_t> || std::same_as<T, std::int64_t>;

template <element T>
constexpr dtype dtype_of() {
  if constexpr (std::same_as<T, bool>)
    return dtype::bool_;
  else if constexpr (std::same_as<T, std::int32_t>)
    return dtype::int32;
  else if constexpr (std::same_as<T, std::int64_t>)
    return dtype::int64;
  else if constexpr (std::same_as<T, bfloat16>)
    return dtype::bfloat16;
  else if constexpr (std::same_as<T, float16>)
    return dtype::float16;
  else if constexpr (std::same_as<T, float>)
    return dtype::float32;
  else
    return dtype::float64;
}

constexpr std::string_view dtype_name(dtype d) {
  switch (d) {
    case dtype::bool_:
      return "bool";
    case dtype::int32:
      return "int32";
    case dtype::int64:
      return "int64";
    case dtype::bfloat16:
      return "bfloat16";
    case dtype::float16:
      return "float16";
    case dtype::float32:
      return "float32";
    case dtype::float64:
      return "float64";
  }
  return "?";
}
template <class T>
constexpr std::string_view dtype_name() {
  return dtype_name(dtype_of<T>());
}

// The type arithmetic happens in: storage floats compute in float, everything else in itself.
template <class T>
struct compute_type {
  using type = T;
};
template <storage_float T>
struct compute_type<T> {
  using type = float;
};
template <class T>
using compute_t = typename compute_type<T>::type;

// The floating type a transcendental op gives for an input type (JAX: ints and bools -> float32).
template <class T>
using float_of_t = std::conditional_t<floating_element<T>, T, float>;

namespace detail {
// JAX's type lattice restricted to zenith's types: bool < int32 < int64 < {bf16, f16} < f32 < f64,
// with bf16 + f16 joining at f32.
template <class T>
constexpr int rank_of() {
  if constexpr (std::same_as<T, bool>)
    return 0;
  else if constexpr (std::same_as<T, std::int32_t>)
    return 1;
  else if constexpr (std::same_as<T, std::int64_t>)
    return 2;
  else if constexpr (storage_float<T>)
    return 3;
  else if constexpr (std::same_as<T, float>)
    return 4;
  else
    return 5;
}
}  // namespace detail

// User number types: types other than the elements that fixed-size tensors compute with, such
// as the forward-mode derivative scalar zenith::dual<T, N> (autodiff/dual.hpp). A number type
// specialises number_traits with
//   using value_type = ...;        the number one level down (double for dual<double, 7>)
//   static constexpr int depth;    how deeply it nests: 1 for dual<double, N>, 2 for a dual of
//   duals
// and may add
//   static std::uint8_t known_flags(T const&);   the entry flags of core/tensor.hpp that hold
//   for a value: constant where its derivative part is zero (fixed-size ops act on those the
//   compiler sees)
template <class T>
struct number_traits {};

template <class T>
concept user_number = requires {
  typename number_traits<T>::value_type;
  { number_traits<T>::depth } -> std::convertible_to<int>;
};

// 0 for plain numbers.
template <class T>
inline constexpr int number_depth = 0;
template <user_number T>
inline constexpr int number_depth<T> = number_traits<T>::depth;

template <class A, class B>
struct promote;
template <element A, element B>
struct promote<A, B> {
  using type = std::conditional_t<(detail::rank_of<A>() >= detail::rank_of<B>()), A, B>;
};
template <element A>
struct promote<A, A> {
  using type = A;
};
// A user number meets a plain number (or a shallower user number, such as the value type of a
// dual of duals) at itself: the other side is a constant and keeps its own representation in
// arithmetic (a double times a dual scales the dual; it is never widened into one first).
template <class A, class B>
requires((user_number<A> || user_number<B>)&&!std::is_same_v<A, B>) struct promote<A, B> {
  static_assert(number_depth<A> != number_depth<B>,
                "zenith: two different number types of the same depth do not mix");
  using type = std::conditional_t<(number_depth<A> > number_depth<B>), A, B>;
};
template <user_number A>
struct promote<A, A> {
  using type = A;
};
template <>
struct promote<bfloat16, float16> {
  using type = float;
};
template <>
struct promote<float16, bfloat16> {
  using type = float;
};
template <class A, class B>
using promote_t = typename promote<A, B>::type;

// A C++ scalar is weakly typed (JAX): it takes the array's type, except that a floating scalar
// with an integer or bool array gives float32, and an integer scalar with a bool array int32.
template <element T, class S>
struct weak_promote {
  using type = T;
};
template <element T, class S>
requires(!floating_element<T> &&
         (std::floating_point<S> || storage_float<S>)) struct weak_promote<T, S> {
  using type = float;
};
template <class S>
requires(std::integral<S> && !std::same_as<S, bool>) struct weak_promote<bool, S> {
  using type = std::int32_t;
};
template <element T, class S>
using weak_promote_t = typename weak_promote<T, S>::type;

// Arithmetic scalars a user may mix into expressions.
template <class S>
concept scalar = std::is_arithmetic_v<S> || storage_float<S>;

}  // namespace zenith
