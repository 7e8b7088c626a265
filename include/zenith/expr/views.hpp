#pragma once
// Views: transpose, broadcast_to, expand_dims, squeeze and slice. Each is an affine map from
// the view's index to its child's index, so evaluation pushes it down to the leaves' strides:
// a view of an expression costs nothing and never copies. reshape is in reshape.hpp.
// Like map nodes, views move an rvalue child in: a temporary sub-expression must leave no extra
// handle on an array's buffer behind, or `a = f(view(a))` could not reuse a's buffer.
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/expr_base.hpp"
#include "../core/shape.hpp"

namespace zenith {

// child_index[i] = offset[i] + sum_k coef[i][k] * view_index[k]
struct affine_map {
  std::size_t in_rank = 0, out_rank = 0;
  std::array<std::array<std::int64_t, max_rank>, max_rank> coef{};
  std::array<std::int64_t, max_rank> offset{};
};

// Strides read through m: stride (one per input axis, in elements) becomes one per output axis;
// returns the offset of the first element read. What a leaf of either backend does when a view
// or a broadcast is pushed down to it.
// Out of line: every leaf of every evaluator that a view or a broadcast reaches calls it once.
[[gnu::noinline]] inline std::int64_t map_strides(affine_map const& m,
                                                  std::array<std::int64_t, max_rank>& stride) {
  std::int64_t off = 0;
  std::array<std::int64_t, max_rank> st{};
  for (std::size_t i = 0; i < m.in_rank; ++i) {
    off += stride[i] * m.offset[i];
    for (std::size_t k = 0; k < m.out_rank; ++k) st[k] += stride[i] * m.coef[i][k];
  }
  stride = st;
  return off;
}

// How a leaf reads a contiguous array of shape s: row-major strides, 0 along axes of size 1.
inline std::array<std::int64_t, max_rank> leaf_strides(zenith::shape const& s) {
  auto st = row_major_strides(s);
  for (std::size_t k = 0; k < s.size(); ++k)
    if (s[k] == 1) st[k] = 0;
  return st;
}

// A strided window into a row-major buffer, in elements: an offset and one stride per axis.
struct placement {
  std::int64_t offset = 0;
  std::array<std::int64_t, max_rank> stride{};
};

namespace views {

struct transpose {
  static constexpr std::string_view name = "transpose";
  std::array<std::size_t, max_rank> perm{};
  zenith::shape out_shape(zenith::shape const& in) const {
    zenith::shape s;
    for (std::size_t k = 0; k < in.size(); ++k) s.push_back(in[perm[k]]);
    return s;
  }
  affine_map map(zenith::shape const& in) const {
    affine_map m;
    m.in_rank = m.out_rank = in.size();
    for (std::size_t k = 0; k < in.size(); ++k) m.coef[perm[k]][k] = 1;
    return m;
  }
};

struct broadcast_to {
  static constexpr std::string_view name = "broadcast_in_dim";
  zenith::shape target;
  zenith::shape out_shape(zenith::shape const&) const { return target; }
  affine_map map(zenith::shape const& in) const {
    affine_map m;
    m.in_rank = in.size();
    m.out_rank = target.size();
    std::size_t off = target.size() - in.size();
    for (std::size_t i = 0; i < in.size(); ++i) m.coef[i][i + off] = in[i] == 1 ? 0 : 1;
    return m;
  }
};

struct expand_dims {
  static constexpr std::string_view name = "expand_dims";
  std::size_t axis = 0;
  zenith::shape out_shape(zenith::shape const& in) const {
    zenith::shape s;
    for (std::size_t i = 0; i <= in.size(); ++i) {
      if (i == axis) s.push_back(1);
      if (i < in.size()) s.push_back(in[i]);
    }
    return s;
  }
  affine_map map(zenith::shape const& in) const {
    affine_map m;
    m.in_rank = in.size();
    m.out_rank = in.size() + 1;
    for (std::size_t i = 0; i < in.size(); ++i) m.coef[i][i < axis ? i : i + 1] = 1;
    return m;
  }
};

struct squeeze {
  static constexpr std::string_view name = "squeeze";
  std::uint32_t axes = 0;  // bit i: drop axis i (of size 1)
  zenith::shape out_shape(zenith::shape const& in) const {
    zenith::shape s;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (!(axes >> i & 1)) s.push_back(in[i]);
    return s;
  }
  affine_map map(zenith::shape const& in) const {
    affine_map m;
    m.in_rank = in.size();
    std::size_t k = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (!(axes >> i & 1)) m.coef[i][k++] = 1;
    m.out_rank = k;
    return m;
  }
};

struct slice {
  static constexpr std::string_view name = "slice";
  std::array<std::int64_t, max_rank> start{}, step{};
  zenith::shape out;
  zenith::shape out_shape(zenith::shape const&) const { return out; }
  // Where the slice's elements lie in a row-major buffer of shape `in`: the first one's offset and
  // each axis's stride, in elements (what the slice's adjoint writes through).
  placement place(zenith::shape const& in) const {
    placement p;
    auto st = row_major_strides(in);
    for (std::size_t k = 0; k < in.size(); ++k) {
      p.offset += start[k] * st[k];
      p.stride[k] = step[k] * st[k];
    }
    return p;
  }
  affine_map map(zenith::shape const& in) const {
    affine_map m;
    m.in_rank = m.out_rank = in.size();
    for (std::size_t i = 0; i < in.size(); ++i) {
      m.coef[i][i] = step[i];
      m.offset[i] = start[i];
    }
    return m;
  }
};

}  // namespace views

template <class View, expression C>
struct view_node : expr_base<view_node<View, C>> {
  using value_type = value_t<C>;
  using view_type = View;
  static constexpr bool fixed = false;
  C child;
  View view;
  zenith::shape shape_;
  view_node(C c, View v) : child(std::move(c)), view(std::move(v)) {
    shape_ = view.out_shape(child.shape());
  }
  zenith::shape shape() const { return shape_; }
  std::tuple<C const&> operands() const { return {child}; }  // the node protocol (expr/node.hpp)
  template <class D>
  view_node<View, D> with_operands(D d) const {
    return view_node<View, D>(std::move(d), view);
  }
  template <class F>
  void for_each_array(F&& f) const {
    child.for_each_array(f);
  }
};

template <class E>
inline constexpr bool is_view_node_v = false;
template <class V, class C>
inline constexpr bool is_view_node_v<view_node<V, C>> = true;

// Reverses all axes.
template <expression E>
auto transpose(E&& e) {
  views::transpose v;
  std::size_t r = e.shape().size();
  for (std::size_t k = 0; k < r; ++k) v.perm[k] = r - 1 - k;
  return view_node<views::transpose, std::remove_cvref_t<E>>(std::forward<E>(e), v);
}

// Permutes axes: result axis k is input axis perm[k] (negative axes count from the end).
template <expression E>
auto transpose(E&& e, std::vector<int> const& perm) {
  zenith::shape s = e.shape();
  if (perm.size() != s.size())
    throw shape_error("transpose: permutation of length " + std::to_string(perm.size()) +
                      " for shape " + s.str());
  views::transpose v;
  std::uint32_t seen = 0;
  for (std::size_t k = 0; k < perm.size(); ++k) {
    std::size_t a = normalize_axis(perm[k], s.size(), "transpose");
    if (seen >> a & 1)
      throw shape_error("transpose: axis " + std::to_string(perm[k]) + " repeated for shape " +
                        s.str());
    seen |= 1u << a;
    v.perm[k] = a;
  }
  return view_node<views::transpose, std::remove_cvref_t<E>>(std::forward<E>(e), v);
}

template <expression E>
auto broadcast_to(E&& e, zenith::shape const& target) {
  zenith::shape s = e.shape();
  bool ok = target.size() >= s.size();
  for (std::size_t i = 0; ok && i < s.size(); ++i) {
    std::size_t t = target[i + target.size() - s.size()];
    ok = s[i] == t || s[i] == 1;
  }
  if (!ok)
    throw shape_error("broadcast_to: cannot broadcast shape " + s.str() + " to " + target.str());
  return view_node<views::broadcast_to, std::remove_cvref_t<E>>(std::forward<E>(e),
                                                                views::broadcast_to{target});
}

template <expression E>
auto expand_dims(E&& e, int axis) {
  views::expand_dims v{normalize_axis(axis, e.shape().size() + 1, "expand_dims")};
  return view_node<views::expand_dims, std::remove_cvref_t<E>>(std::forward<E>(e), v);
}

// Drops every axis of size 1.
template <expression E>
auto squeeze(E&& e) {
  zenith::shape s = e.shape();
  views::squeeze v;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (s[i] == 1) v.axes |= 1u << i;
  return view_node<views::squeeze, std::remove_cvref_t<E>>(std::forward<E>(e), v);
}
// Drops the given axis, which must have size 1.
template <expression E>
auto squeeze(E&& e, int axis) {
  zenith::shape s = e.shape();
  std::size_t a = normalize_axis(axis, s.size(), "squeeze");
  if (s[a] != 1)
    throw shape_error("squeeze: axis " + std::to_string(axis) + " has size " +
                      std::to_string(s[a]) + " in shape " + s.str() + ", not 1");
  return view_node<views::squeeze, std::remove_cvref_t<E>>(std::forward<E>(e),
                                                           views::squeeze{1u << a});
}

// One axis of a slice, Python style: negative indices count from the end, stop is clamped,
// step may be negative. `range{}` is the whole axis.
struct range {
  static constexpr std::int64_t none = std::numeric_limits<std::int64_t>::min();
  std::int64_t start = none, stop = none, step = 1;
};

// slice(e, {range{0, 3}, range{1, 9, 2}}): one range per leading axis; later axes are whole.
template <expression E>
auto slice(E&& e, std::vector<range> const& ranges) {
  zenith::shape s = e.shape();
  if (ranges.size() > s.size())
    throw shape_error("slice: " + std::to_string(ranges.size()) + " ranges for shape " + s.str());
  views::slice v;
  v.out = s;
  for (std::size_t i = 0; i < s.size(); ++i) {
    range r = i < ranges.size() ? ranges[i] : range{};
    std::int64_t n = std::int64_t(s[i]);
    if (r.step == 0) throw value_error("slice: step 0 on axis " + std::to_string(i));
    auto clamp = [&](std::int64_t x, std::int64_t dflt, std::int64_t lo, std::int64_t hi) {
      if (x == range::none) return dflt;
      if (x < 0) x += n;
      return std::clamp(x, lo, hi);
    };
    std::int64_t start, stop, len;
    if (r.step > 0) {
      start = clamp(r.start, 0, 0, n);
      stop = clamp(r.stop, n, 0, n);
      len = stop > start ? (stop - start + r.step - 1) / r.step : 0;
    } else {
      start = clamp(r.start, n - 1, -1, n - 1);
      stop = clamp(r.stop, -1, -1, n - 1);
      len = start > stop ? (start - stop - r.step - 1) / (-r.step) : 0;
    }
    v.start[i] = len ? start : 0;
    v.step[i] = r.step;
    v.out[i] = std::size_t(len);
  }
  return view_node<views::slice, std::remove_cvref_t<E>>(std::forward<E>(e), v);
}

// slice along one axis.
template <expression E>
auto slice(E&& e, int axis, std::int64_t start, std::int64_t stop, std::int64_t step = 1) {
  std::size_t a = normalize_axis(axis, e.shape().size(), "slice");
  std::vector<range> rs(a + 1);
  rs[a] = range{start, stop, step};
  return slice(std::forward<E>(e), rs);
}

}  // namespace zenith
