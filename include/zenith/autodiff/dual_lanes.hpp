#pragma once
// The lanes of a dual number (autodiff/dual.hpp): how many a dual<T, N> stores, and the tangent
// arithmetic on them, as GCC/Clang vector code for float and double.
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../backend/cpu/fixed_eval.hpp"  // detail::max_vector_bytes
#include "../core/tensor.hpp"             // ZENITH_FIXED_INLINE

namespace zenith::detail {

// Lanes for float and double: the N tangent lanes and the value, rounded up to a power of two
// while that fits in 64 bytes, else to a multiple of 32 bytes, so that vector code needs no
// tail. N (the tangent only) for other types.
template <class T, std::size_t N>
constexpr std::size_t dual_lanes() {
  if constexpr (!std::is_floating_point_v<T>) {
    return N;
  } else if constexpr ((N + 1) * sizeof(T) <= 64) {
    std::size_t p = 1;
    while (p < N + 1) p *= 2;
    return p;
  } else {
    constexpr std::size_t w = 32 / sizeof(T);
    return (N + 1 + w - 1) / w * w;
  }
}

// Tangent arithmetic on P lanes of T: GCC/Clang vector code for float and double, in chunks of
// W lanes (the widest vector of the target that divides P), else a plain loop (nested duals,
// whose lanes bring their own vector code).
template <class T, std::size_t P>
struct lanes {
  using A = std::array<T, P>;
  static constexpr std::size_t width = [] {
    if constexpr (!std::is_floating_point_v<T>) {
      return std::size_t(1);
    } else {
      std::size_t w = 1;
      while (2 * w * sizeof(T) <= max_vector_bytes && P % (2 * w) == 0) w *= 2;
      return w;
    }
  }();
#if defined(__GNUC__) || defined(__clang__)
  static constexpr bool vector = width >= 2;
#else
  static constexpr bool vector = false;
#endif

  // r[k] = f(a[k]) and r[k] = f(a[k], b[k]), vectorised when `vector`.
  template <class F, class... In>
  ZENITH_FIXED_INLINE static A map(F f, In const&... in) {
    A r;
    if constexpr (vector) {
      typedef T vec __attribute__((vector_size(width * sizeof(T))));
      [&]<std::size_t... C>(std::index_sequence<C...>) ZENITH_FIXED_LAMBDA {
        auto chunk = [&](std::size_t c) ZENITH_FIXED_LAMBDA {
          auto load = [&](A const& x) ZENITH_FIXED_LAMBDA {
            vec v;
            std::memcpy(&v, x.data() + c * width, sizeof(vec));
            return v;
          };
          vec y = f(load(in)...);
          std::memcpy(r.data() + c * width, &y, sizeof(vec));
        };
        (chunk(C), ...);
      }
      (std::make_index_sequence<P / width>{});
    } else {
      for (std::size_t k = 0; k < P; ++k) r[k] = f(in[k]...);
    }
    return r;
  }

  // The last lane, read and written through the whole last vector: the compiler then keeps a
  // number that is used as whole vectors in registers (a scalar access into the middle of it
  // makes GCC keep the whole tensor of duals in memory, with copies of it by memcpy).
  ZENITH_FIXED_INLINE static constexpr T last(A const& a) {
    if constexpr (vector) {
      if (!std::is_constant_evaluated()) {
        typedef T vec __attribute__((vector_size(width * sizeof(T))));
        vec v;
        std::memcpy(&v, a.data() + (P - width), sizeof(vec));
        return v[width - 1];
      }
    }
    return a[P - 1];
  }
  ZENITH_FIXED_INLINE static constexpr void set_last(A& a, T const& x) {
    if constexpr (vector) {
      if (!std::is_constant_evaluated()) {
        typedef T vec __attribute__((vector_size(width * sizeof(T))));
        vec v;
        std::memcpy(&v, a.data() + (P - width), sizeof(vec));
        v[width - 1] = x;
        std::memcpy(a.data() + (P - width), &v, sizeof(vec));
        return;
      }
    }
    a[P - 1] = x;
  }

  // r[k] = f(in[k]...) for the tangent lanes k < P - 1 (OnValue false) or for the last lane
  // only (OnValue true); keep[k] in the other lanes. One masked vector operation.
  template <bool OnValue, class F, class... In>
  ZENITH_FIXED_INLINE static A map_masked(A const& keep, F f, In const&... in) {
    A r;
    if constexpr (vector) {
      typedef T vec __attribute__((vector_size(width * sizeof(T))));
      using I = std::conditional_t<sizeof(T) == 8, std::int64_t, std::int32_t>;
      typedef I ivec __attribute__((vector_size(width * sizeof(T))));
      [&]<std::size_t... C>(std::index_sequence<C...>) ZENITH_FIXED_LAMBDA {
        auto chunk = [&](auto c) ZENITH_FIXED_LAMBDA {
          auto load = [&](A const& x) ZENITH_FIXED_LAMBDA {
            vec v;
            std::memcpy(&v, x.data() + c * width, sizeof(vec));
            return v;
          };
          vec y;
          if constexpr (c == P / width - 1) {
            ivec const m = [&]<std::size_t... L>(std::index_sequence<L...>) ZENITH_FIXED_LAMBDA {
              return ivec{((c * width + L == P - 1) == OnValue ? I(-1) : I(0))...};
            }
            (std::make_index_sequence<width>{});
            y = m ? f(load(in)...) : load(keep);
          } else if constexpr (OnValue) {
            y = load(keep);
          } else {
            y = f(load(in)...);
          }
          std::memcpy(r.data() + c * width, &y, sizeof(vec));
        };
        (chunk(std::integral_constant<std::size_t, C>{}), ...);
      }
      (std::make_index_sequence<P / width>{});
    } else {
      for (std::size_t k = 0; k < P; ++k) r[k] = ((k == P - 1) == OnValue) ? f(in[k]...) : keep[k];
    }
    return r;
  }
};

}  // namespace zenith::detail
