#pragma once
// The CPU kernel of concat_node (expr/concat.hpp): each part's evaluator runs one fused pass
// into a strided view of its slice of the output, so a part that is an expression is never
// materialized on its own (only a barrier inside a part is, as everywhere). A part of another
// element type is converted on the way.
#include <cstdint>

#include "../../expr/concat.hpp"
#include "evaluate.hpp"

namespace zenith {

template <class Op, class Parts>
array<value_t<concat_node<Op, Parts>>> eval_barrier(concat_node<Op, Parts> const& node) {
  using T = value_t<concat_node<Op, Parts>>;
  auto out = array<T>::empty(node.shape());
  if (out.size() == 0) return out;
  auto st = row_major_strides(out.shape());
  std::int64_t offset = 0;  // position along the axis of the next part
  node.for_each_part([&](auto const& part, std::size_t) {
    zenith::shape s = part.shape();
    auto slice = detail::concat_slice_of<Op>(s, node.axis, st, offset);
    dest_view<T> dst{out.data() + slice.start, slice.stride};
    auto x = detail::convert<T>(part);
    auto ev = make_evaluator(x);
    run_fused(dst, ev, s);
  });
  return out;
}

}  // namespace zenith
