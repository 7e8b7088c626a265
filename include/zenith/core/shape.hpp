#pragma once
// zenith::shape: up to eight dimensions stored inline. Accepts braces of any integer type,
// std::vector and std::array; negative dimensions are a value_error. Prints as (2, 3).
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "error.hpp"

namespace zenith {

inline constexpr std::size_t max_rank = 8;

class shape {
 public:
  using value_type = std::size_t;

  constexpr shape() = default;

  template <std::integral I>
  shape(std::initializer_list<I> dims) {
    assign(dims.begin(), dims.end());
  }
  template <std::integral... I>
  requires(sizeof...(I) >= 1 && sizeof...(I) <= max_rank)
      shape(I... dims) {  // NOLINT: allows {rows, n} with mixed integer types
    const long long tmp[] = {static_cast<long long>(dims)...};
    if constexpr ((std::unsigned_integral<I> || ...)) {
      std::size_t const raw[] = {static_cast<std::size_t>(dims)...};
      for (std::size_t i = 0; i < sizeof...(I); ++i)
        if (raw[i] > std::size_t(1) << 62) fail_negative((long long)raw[i]);
    }
    assign(std::begin(tmp), std::end(tmp));
  }
  template <std::integral I>
  shape(std::vector<I> const& dims) {  // NOLINT
    assign(dims.begin(), dims.end());
  }
  template <std::integral I, std::size_t N>
  shape(std::array<I, N> const& dims) {  // NOLINT
    assign(dims.begin(), dims.end());
  }

  // Dimensions known valid at compile time (a fixed_shape's): no checks, so that code asking a
  // tensor's shape (x.shape().numel()) folds to a constant.
  template <std::size_t R>
  requires(R <= max_rank) static constexpr shape known(std::array<std::size_t, R> const& d) {
    shape s;
    for (std::size_t i = 0; i < R; ++i) s.dims_[i] = d[i];
    s.rank_ = R;
    return s;
  }

  std::size_t size() const { return rank_; }  // number of dimensions
  bool empty() const { return rank_ == 0; }
  std::size_t operator[](std::size_t i) const { return dims_[i]; }
  std::size_t& operator[](std::size_t i) { return dims_[i]; }
  std::size_t const* begin() const { return dims_.data(); }
  std::size_t const* end() const { return dims_.data() + rank_; }
  std::size_t back() const { return dims_[rank_ - 1]; }

  // Number of elements (1 for rank 0).
  constexpr std::size_t numel() const {
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  void push_back(std::size_t d) {
    if (rank_ == max_rank) throw value_error("shape: rank above " + std::to_string(max_rank));
    dims_[rank_++] = d;
  }
  void resize(std::size_t r) {
    if (r > max_rank) throw value_error("shape: rank above " + std::to_string(max_rank));
    for (std::size_t i = rank_; i < r; ++i) dims_[i] = 1;
    rank_ = r;
  }
  std::vector<std::size_t> to_vector() const { return {begin(), end()}; }

  friend bool operator==(shape const& a, shape const& b) {
    if (a.rank_ != b.rank_) return false;
    for (std::size_t i = 0; i < a.rank_; ++i)
      if (a.dims_[i] != b.dims_[i]) return false;
    return true;
  }

  std::string str() const {
    std::ostringstream os;
    os << '(';
    for (std::size_t i = 0; i < rank_; ++i) os << (i ? ", " : "") << dims_[i];
    if (rank_ == 1) os << ',';
    os << ')';
    return os.str();
  }
  friend std::ostream& operator<<(std::ostream& os, shape const& s) { return os << s.str(); }

 private:
  template <class It>
  void assign(It first, It last) {
    rank_ = 0;
    for (; first != last; ++first) {
      auto v = *first;
      if constexpr (std::is_signed_v<decltype(v)>) {
        if (v < 0) fail_negative((long long)v);
      } else if (std::uint64_t(v) > std::uint64_t(1) << 62) {
        fail_negative((long long)v);  // an unsigned wrap-around, as in {n - 1} with n == 0
      }
      if (rank_ == max_rank) throw value_error("shape: rank above " + std::to_string(max_rank));
      dims_[rank_++] = static_cast<std::size_t>(v);
    }
  }
  [[noreturn]] static void fail_negative(long long v) {
    throw value_error("shape: negative dimension " + std::to_string(v));
  }

  std::array<std::size_t, max_rank> dims_{};
  std::size_t rank_ = 0;
};

// Row-major strides in elements.
inline std::array<std::int64_t, max_rank> row_major_strides(shape const& s) {
  std::array<std::int64_t, max_rank> st{};
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::int64_t(s[i]);
  }
  return st;
}

// Normalises a possibly negative axis against a rank; names the op in the error.
inline std::size_t normalize_axis(int axis, std::size_t rank, std::string_view op) {
  int r = int(rank);
  if (axis < -r || axis >= r)
    throw shape_error(std::string(op) + ": axis " + std::to_string(axis) +
                      " out of range for rank " + std::to_string(rank));
  return std::size_t(axis < 0 ? axis + r : axis);
}

// NumPy broadcasting of two shapes; throws shape_error naming the op and both shapes.
inline shape broadcast_shapes(shape const& a, shape const& b, std::string_view op) {
  std::size_t r = a.size() > b.size() ? a.size() : b.size();
  shape out;
  out.resize(r);
  for (std::size_t i = 0; i < r; ++i) {
    std::size_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    std::size_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      throw shape_error(std::string(op) + ": cannot broadcast shapes " + a.str() + " and " +
                        b.str());
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace zenith
