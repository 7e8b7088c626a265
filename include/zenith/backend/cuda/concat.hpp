#pragma once
// concatenate and stack on a CUDA device (lower.hpp), as on the CPU (backend/cpu/concat.hpp):
// each part is written by one strided kernel into its slice of the output, so a part that is an
// expression is computed in the kernel that writes it, never on its own. A part of another
// element type is converted on the way.
#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

#include "../../core/array.hpp"
#include "../../expr/concat.hpp"
#include "lower.hpp"

namespace zenith::cuda_backend {

namespace detail {
template <class Parts>
inline constexpr bool parts_lowerable_v = false;
template <class E>
inline constexpr bool parts_lowerable_v<std::vector<E>> = lowerable<E>;
template <class... Es>
inline constexpr bool parts_lowerable_v<std::tuple<Es...>> = (lowerable<Es> && ...);
}  // namespace detail

template <class Op, class Parts>
requires detail::parts_lowerable_v<Parts>
struct lowering<concat_node<Op, Parts>> {
  static auto lower(device d, concat_node<Op, Parts> const& node) {
    using T = value_t<concat_node<Op, Parts>>;
    auto out = array<T>::empty(node.shape(), d);
    if (out.size() == 0) return out;
    auto st = row_major_strides(out.shape());
    std::int64_t offset = 0;  // position along the axis of the next part
    node.for_each_part([&](auto const& part, std::size_t) {
      zenith::shape s = part.shape();
      auto slice = zenith::detail::concat_slice_of<Op>(s, node.axis, st, offset);
      run_into_on_device<T>(d, out.data() + slice.start, slice.stride, s, part);
    });
    return out;
  }
};

}  // namespace zenith::cuda_backend
