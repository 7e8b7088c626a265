#pragma once
// The CPU kernel of concat_node (expr/concat.hpp): each part's evaluator runs one fused pass
// into a strided view of its slice of the output, so a part that is an expression is never
// materialized on its own (only a barrier inside a part is, as everywhere).
#include <cstdint>

#include "../../expr/concat.hpp"
#include "evaluate.hpp"

namespace zenith {

template <class Op, class E>
array<value_t<concat_node<Op, E>>> eval_barrier(concat_node<Op, E> const& node) {
  using T = value_t<concat_node<Op, E>>;
  auto out = array<T>::empty(node.shape());
  if (out.size() == 0) return out;
  auto st = row_major_strides(out.shape());
  std::size_t axis = node.axis;
  std::int64_t offset = 0;  // position along axis of the next part
  for (auto const& part : node.parts) {
    zenith::shape s = part.shape();
    dest_view<T> dst{out.data() + offset * st[axis], {}};
    if constexpr (Op::new_axis) {
      // The part's axes are the output's without `axis`.
      for (std::size_t k = 0, o = 0; k < s.size(); ++k, ++o) {
        if (o == axis) ++o;
        dst.stride[k] = st[o];
      }
      offset += 1;
    } else {
      dst.stride = st;
      offset += std::int64_t(s[axis]);
    }
    auto ev = make_evaluator(part);
    run_fused(dst, ev, s);
  }
  return out;
}

}  // namespace zenith
