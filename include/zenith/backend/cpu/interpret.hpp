#pragma once
// Running an IR graph (ir/graph.hpp) on the CPU:
//
//   std::vector<zn::any_array> out = zn::ir::run(graph, {x, w});
//
// Consecutive elementwise equations of one shape form a region, run as a block interpreter in
// the manner of numexpr: the region's elements are walked in tiles of `tile` elements, and for
// each tile every equation runs its op's kernel over the tile, its operands read from the
// inputs or from the tiles of earlier equations (which stay in L1), its result written to a
// tile, or to memory where a later equation outside the region or the graph's result reads it.
// A kernel exists once per (op, compute type), instantiated from the op's tag (its simd() on
// xsimd batches, apply() for the tail and for types without a batch form), and is found in an
// op table where the program registered it when it emitted the op (backend/cpu/op_kernels.hpp);
// 16-bit floats compute in float, as everywhere. Other equations (broadcasts, views,
// reductions, dot_general, softmax, layer_norm, concatenate, conv2d) run one at a time as plain
// loops (backend/cpu/interpret_barriers.hpp); those of reductions, softmax, layer_norm and
// conv2d are registered per op like the elementwise kernels (backend/cpu/barrier_kernels.hpp).
//
// Everything here is a template that only a call of run() instantiates: a program that never
// runs a graph compiles none of it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../core/any_array.hpp"
#include "../../core/runtime_instance.hpp"
#include "../../core/small_vector.hpp"
#include "../../expr/to_ir.hpp"
#include "barrier_kernels.hpp"
#include "evaluate.hpp"
#include "interpret_barriers.hpp"
#include "op_kernels.hpp"

namespace zenith::ir {

namespace detail {

inline constexpr std::size_t tile = 1024;

// The compute type's dtype: float for the 16-bit floats, the dtype itself otherwise.
inline zenith::dtype compute_dtype(zenith::dtype d) {
  return d == zenith::dtype::bfloat16 || d == zenith::dtype::float16 ? zenith::dtype::float32 : d;
}
template <class = void>
std::size_t compute_size(zenith::dtype d) {
  return with_dtype(compute_dtype(d), []<class T>() { return sizeof(T); });
}
ZENITH_RUNTIME_INSTANCE(std::size_t compute_size<>(zenith::dtype d))

// The kernel of an elementwise equation and the order its operands go in; nullptr for an
// equation that is not elementwise.
struct elementwise_plan {
  tile_kernel kernel = nullptr;
  std::vector<value_id> operands;
};

template <class = void>
elementwise_plan plan_elementwise(graph const& g, equation const& e) {
  elementwise_plan p;
  if (e.inputs.empty()) return p;
  zenith::dtype in = compute_dtype(g.at(e.inputs.back()).dtype);
  p.operands = e.inputs;
  if (e.op == "convert_element_type") {
    zenith::dtype to = g.at(e.output).dtype;
    p.kernel = with_dtype(compute_dtype(g.at(e.inputs[0]).dtype), [&]<class C>() -> tile_kernel {
      if constexpr (!std::is_same_v<C, compute_t<C>>)
        return nullptr;
      else
        return with_dtype(to, []<class To>() -> tile_kernel { return &convert_kernel<C, To>; });
    });
    return p;
  }
  std::string_view op = e.op;
  if (op == "select_n") {  // select_n(c, false, true) is where(c, true, false)
    p.operands = {e.inputs[0], e.inputs[2], e.inputs[1]};
    op = "select";
  } else if (op == "clamp") {  // clamp(lo, x, hi) is clip(x, lo, hi)
    p.operands = {e.inputs[1], e.inputs[0], e.inputs[2]};
  }
  p.kernel = table_of<tile_kernel>().find(op, in);
  if (!p.kernel && is_elementwise_name(op, elementwise_ops{})) fail_unregistered("kernel", op, in);
  return p;
}
ZENITH_RUNTIME_INSTANCE(elementwise_plan plan_elementwise<>(graph const& g, equation const& e))

// A constant's array: the graph's memory, as it holds it.
template <class = void>
any_array constant_array(value const& x) {
  return with_dtype(x.dtype, [&]<class T>() -> any_array {
    return array<T>::from_buffer(std::const_pointer_cast<buffer>(x.data),
                                 static_cast<T*>(const_cast<void*>(x.ptr)), x.shape);
  });
}
ZENITH_RUNTIME_INSTANCE(any_array constant_array<>(value const& x))

// What running equations `order` of a graph needs besides the values, computed from the graph
// alone, once for a run or once for every replay of a recorded one (autodiff/ir_tape_run.hpp).
struct run_plan {
  std::vector<std::size_t> order;     // the equations that run, in graph order
  std::vector<std::size_t> last_use;  // per value: the last position in order reading it
  // Transposes of the last two axes that only dot_general reads are not run: the product reads
  // their operand transposed (BLAS's flag) instead of a transposed copy.
  std::vector<value_id> folded;                // per value: the transposed operand + 1, or 0
  std::vector<elementwise_plan> plans;         // per position in order
  std::vector<std::vector<value_id>> release;  // per position: results no later one reads
};

// The plan of running equations `order` of g (ascending). Values read after the last equation
// (kept) are stored whatever else reads them; with release_dead, a result is released once no
// later equation reads it (and it is not kept): a backward pass holds its cotangents only while
// they are needed.
template <class = void>
run_plan prepare_run(graph const& g, std::vector<std::size_t> order,
                     std::vector<value_id> const& kept, bool release_dead) {
  run_plan rp;
  rp.order = std::move(order);
  auto const& eqs = g.equations();
  std::size_t nv = g.values().size(), n = rp.order.size();
  rp.last_use.assign(nv, 0);
  for (std::size_t k = 0; k < n; ++k)
    for (value_id v : eqs[rp.order[k]].inputs) rp.last_use[v] = k;
  for (value_id v : kept) rp.last_use[v] = n;

  rp.folded.assign(nv, 0);
  std::vector<int> readers(nv, 0), dots(nv, 0);
  for (std::size_t i : rp.order)
    for (value_id v : eqs[i].inputs) {
      ++readers[v];
      if (eqs[i].op == "dot_general") ++dots[v];
    }
  for (value_id v : kept) readers[v] = -1;
  for (std::size_t i : rp.order) {
    equation const& e = eqs[i];
    if (e.op != "transpose" || readers[e.output] <= 0 || readers[e.output] != dots[e.output])
      continue;
    auto perm = e.attrs.get<std::vector<std::int64_t>>("permutation");
    std::size_t r = perm.size();
    bool swap = r >= 2 && perm[r - 1] == std::int64_t(r - 2) && perm[r - 2] == std::int64_t(r - 1);
    for (std::size_t k = 0; swap && k + 2 < r; ++k) swap = perm[k] == std::int64_t(k);
    if (!swap) continue;
    rp.folded[e.output] = e.inputs[0] + 1;
    rp.last_use[e.inputs[0]] = std::max(rp.last_use[e.inputs[0]], rp.last_use[e.output]);
  }

  rp.plans.resize(n);
  for (std::size_t k = 0; k < n; ++k) rp.plans[k] = plan_elementwise(g, eqs[rp.order[k]]);
  rp.release.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    value_id y = eqs[rp.order[k]].output;
    std::size_t last = std::max(k, rp.last_use[y]);
    if (release_dead && last < n) rp.release[last].push_back(y);
  }
  return rp;
}
ZENITH_RUNTIME_INSTANCE(run_plan prepare_run<>(graph const& g, std::vector<std::size_t> order,
                                               std::vector<value_id> const& kept,
                                               bool release_dead))

// The interpreter's state: every value's array once computed (vals, by value id), and the plan
// of the equations that run. A template, as everything here, so that only a program that runs a
// graph compiles it.
template <class = void>
struct machine {
  graph const& g;
  std::vector<any_array>& vals;
  run_plan const& rp;

  machine(graph const& gr, std::vector<any_array>& v, run_plan const& p) : g(gr), vals(v), rp(p) {
    vals.resize(gr.values().size());
  }

  any_array const& operand(value_id v) {
    if (vals[v].empty()) {
      value const& x = g.at(v);
      if (x.kind == value_kind::constant)
        vals[v] = constant_array(x);
      else if (x.kind == value_kind::literal)
        vals[v] = with_dtype(x.dtype, [&]<class T>() -> any_array {
          return full<T>({}, T(compute_t<T>(x.literal)));
        });
      else
        throw value_error("ir::run: value " + std::to_string(v) + " read before it is computed");
    }
    return vals[v];
  }

  // The equations at positions [first, last) of order are elementwise, of one output shape,
  // with plans p (p[0] is position first's).
  void run_region(std::size_t first, std::size_t last, elementwise_plan const* p) {
    auto const& eqs = g.equations();
    zenith::shape s = g.at(eqs[rp.order[first]].output).shape;
    std::size_t n = s.numel();
    std::size_t const tn = std::min(tile, n);  // a tile's elements: a small region is one tile
    // Values the region computes: memory where read after the region, written in place when of
    // the compute type, else a tile each.
    struct slot {
      value_id id;
      std::size_t tile_at = npos;  // the tile's offset in the arena, npos for none
      char* stored = nullptr;      // the array's memory, when stored
      bool direct = false;         // the stored array is of the compute type: written in place
      zenith::dtype dtype{};
    };
    // Values read from outside: a splatted tile for a rank-0 one (a literal), read in place
    // when of the compute type, else converted into a tile at each step.
    struct outside {
      value_id id;
      char const* base;
      zenith::dtype dtype;
      std::size_t tile_at = npos;
      bool scalar;
    };
    // Every tile in one uninitialized block, each at a multiple of 64 bytes.
    std::size_t arena_bytes = 0;
    auto reserve = [&](zenith::dtype d) {
      std::size_t at = arena_bytes;
      arena_bytes += (tn * compute_size(d) + 63) / 64 * 64;
      return at;
    };
    zenith::detail::small_vector<slot, 16> made;
    auto slot_of = [&](value_id v) -> slot* {
      for (auto& sl : made)
        if (sl.id == v) return &sl;
      return nullptr;
    };
    for (std::size_t i = first; i < last; ++i) {
      value_id y = eqs[rp.order[i]].output;
      value const& x = g.at(y);
      slot sl;
      sl.id = y;
      sl.dtype = x.dtype;
      if (rp.last_use[y] >= last) {
        vals[y] =
            with_dtype(x.dtype, [&]<class T>() -> any_array { return array<T>::empty(x.shape); });
        sl.stored = static_cast<char*>(const_cast<void*>(vals[y].data()));
        sl.direct = compute_dtype(x.dtype) == x.dtype;
      }
      if (!sl.direct) sl.tile_at = reserve(x.dtype);
      made.push_back(sl);
    }
    zenith::detail::small_vector<outside, 16> reads;
    auto outside_of = [&](value_id v) -> outside* {
      for (auto& o : reads)
        if (o.id == v) return &o;
      return nullptr;
    };
    for (std::size_t i = first; i < last; ++i)
      for (value_id v : p[i - first].operands) {
        if (slot_of(v) || outside_of(v)) continue;
        any_array const& a = operand(v);
        outside o{v, static_cast<char const*>(a.data()), a.dtype(), npos, a.shape().numel() == 1};
        if (!o.scalar && !(a.shape() == s))
          throw shape_error("ir::run: " + std::string(eqs[rp.order[i]].op) + " reads shape " +
                            a.shape().str() + " in a region of shape " + s.str());
        if (o.scalar || compute_dtype(o.dtype) != o.dtype) o.tile_at = reserve(o.dtype);
        reads.push_back(o);
      }
    // (None at all where every value is written in place and no operand is splatted.)
    std::unique_ptr<std::byte[]> arena;
    std::byte* base = nullptr;
    if (arena_bytes > 0) {
      arena.reset(new std::byte[arena_bytes + 63]);
      base = arena.get() + (64 - reinterpret_cast<std::uintptr_t>(arena.get()) % 64) % 64;
    }
    for (auto& o : reads)
      if (o.scalar) fill_tile(base + o.tile_at, o.base, o.dtype, tn);
    zenith::detail::small_vector<void const*, 8> args;
    for (std::size_t at = 0; at < n; at += tile) {
      std::size_t m = std::min(tile, n - at);
      for (auto& o : reads)
        if (!o.scalar && o.tile_at != npos)
          load_tile(base + o.tile_at, o.base + at * dtype_size(o.dtype), o.dtype, m);
      for (std::size_t i = first; i < last; ++i) {
        args.clear();
        for (value_id v : p[i - first].operands) {
          if (slot* sl = slot_of(v)) {
            args.push_back(sl->direct ? sl->stored + at * dtype_size(sl->dtype)
                                      : static_cast<void const*>(base + sl->tile_at));
          } else {
            outside* o = outside_of(v);
            args.push_back(o->tile_at == npos ? o->base + at * dtype_size(o->dtype)
                                              : static_cast<void const*>(base + o->tile_at));
          }
        }
        slot& out = *slot_of(eqs[rp.order[i]].output);
        void* dst = out.direct ? out.stored + at * dtype_size(out.dtype)
                               : static_cast<void*>(base + out.tile_at);
        p[i - first].kernel(m, dst, args.data());
        if (out.stored && !out.direct)
          store_tile(out.stored + at * dtype_size(out.dtype), base + out.tile_at, out.dtype, m);
      }
    }
  }
  static constexpr std::size_t npos = std::size_t(-1);

  static std::size_t dtype_size(zenith::dtype d) {
    return with_dtype(d, []<class T>() { return sizeof(T); });
  }
  // m elements of dtype d at src, in d's compute type at dst.
  static void load_tile(void* dst, char const* src, zenith::dtype d, std::size_t m) {
    with_dtype(d, [&]<class T>() {
      auto o = static_cast<compute_t<T>*>(dst);
      auto s = reinterpret_cast<T const*>(src);
      for (std::size_t i = 0; i < m; ++i) o[i] = compute_t<T>(s[i]);
    });
  }
  static void store_tile(char* dst, void const* src, zenith::dtype d, std::size_t m) {
    with_dtype(d, [&]<class T>() {
      auto s = static_cast<compute_t<T> const*>(src);
      auto o = reinterpret_cast<T*>(dst);
      for (std::size_t i = 0; i < m; ++i) o[i] = T(s[i]);
    });
  }
  static void fill_tile(void* dst, char const* src, zenith::dtype d, std::size_t m) {
    with_dtype(d, [&]<class T>() {
      auto o = static_cast<compute_t<T>*>(dst);
      compute_t<T> v = compute_t<T>(*reinterpret_cast<T const*>(src));
      for (std::size_t i = 0; i < m; ++i) o[i] = v;
    });
  }

  void run_barrier(equation const& e);
  void run_dot(equation const& e);
};
ZENITH_RUNTIME_INSTANCE(struct machine<>)

// numpy's matmul of a and b, the dot_general that expr/to_ir.hpp records for it; other
// dimension numbers are an error naming them.
inline void check_matmul_form(graph const& g, equation const& e) {
  auto const& a = g.at(e.inputs[0]).shape;
  auto const& b = g.at(e.inputs[1]).shape;
  auto list = [&](std::string_view n) { return e.attrs.get<std::vector<std::int64_t>>(n); };
  auto lc = list("lhs_contracting"), rc = list("rhs_contracting"), lb = list("lhs_batch");
  bool ok = lc.size() == 1 && rc.size() == 1 && lc[0] == std::int64_t(a.size()) - 1 &&
            (b.size() == 1 ? rc[0] == 0 : rc[0] == std::int64_t(b.size()) - 2) &&
            lb.size() == (a.size() >= 2 && b.size() >= 2 ? a.size() - 2 : 0);
  if (!ok)
    throw value_error(
        "ir::run: dot_general with dimension numbers other than numpy's matmul "
        "(operands " +
        a.str() + " and " + b.str() + ")");
}

// f.template operator()<T>() for T float or double (the dtype d), else a dtype_error naming op.
template <class F>
any_array with_float(zenith::dtype d, std::string_view op, F&& f) {
  if (d == zenith::dtype::float32) return f.template operator()<float>();
  if (d == zenith::dtype::float64) return f.template operator()<double>();
  throw dtype_error("ir::run: " + std::string(op) + " of " + std::string(dtype_name(d)) +
                    " values (float32 and float64 run here)");
}

template <class U>
void machine<U>::run_dot(equation const& e) {
  value const& out = g.at(e.output);
  check_matmul_form(g, e);
  value_id ia = e.inputs[0], ib = e.inputs[1];
  bool ta = rp.folded[ia] != 0, tb = rp.folded[ib] != 0;
  any_array const& a = operand(ta ? rp.folded[ia] - 1 : ia);
  any_array const& b = operand(tb ? rp.folded[ib] - 1 : ib);
  vals[e.output] = with_float(out.dtype, e.op, [&]<class T>() -> any_array {
    return matmul_blas(a.as<T>(), b.as<T>(), out.shape, ta, tb);
  });
}

template <class U>
void machine<U>::run_barrier(equation const& e) {
  value const& out = g.at(e.output);
  std::string_view op = e.op;
  if (op == "dot_general") return run_dot(e);
  any_array const& a = operand(e.inputs.at(0));
  auto ints = [&](std::string_view n) { return e.attrs.get<std::vector<std::int64_t>>(n); };
  auto src = row_major_strides(a.shape());
  std::array<std::int64_t, max_rank> st{};
  any_array r;
  if (op == "reshape" || op == "squeeze") {
    r = with_dtype(a.dtype(), [&]<class T>() -> any_array {
      array<T> x = a.as<T>();
      // Under an identity of its own: a buffer names one value (the tape binds it to one).
      return array<T>::from_buffer(buffer::alias(x.storage()), x.data(), out.shape);
    });
  } else if (op == "broadcast_in_dim") {
    auto dims = ints("broadcast_dimensions");
    for (std::size_t j = 0; j < dims.size(); ++j)
      st[std::size_t(dims[j])] = a.shape()[j] == 1 ? 0 : src[j];
    r = gather(a, out.shape, st, 0);
  } else if (op == "transpose") {
    auto perm = ints("permutation");
    for (std::size_t k = 0; k < perm.size(); ++k) st[k] = src[std::size_t(perm[k])];
    r = gather(a, out.shape, st, 0);
  } else if (op == "rev" || op == "slice") {
    std::int64_t offset = 0;
    st = src;
    if (op == "rev") {
      for (std::int64_t k : ints("dimensions")) {
        offset += (std::int64_t(a.shape()[std::size_t(k)]) - 1) * src[std::size_t(k)];
        st[std::size_t(k)] = -src[std::size_t(k)];
      }
    } else {
      auto start = ints("start_indices");
      auto const* strides = e.attrs.find("strides");
      for (std::size_t k = 0; k < start.size(); ++k) {
        std::int64_t step = 1;
        if (strides && strides->holds<std::vector<std::int64_t>>())
          step = strides->get<std::vector<std::int64_t>>()[k];
        offset += start[k] * src[k];
        st[k] = step * src[k];
      }
    }
    r = gather(a, out.shape, st, offset);
  } else if (op == "pad") {
    // Operand 1 (rank 0) everywhere, operand 0's elements at low + i * (interior + 1).
    auto low = ints("padding_low"), interior = ints("padding_interior");
    for (std::size_t k = 0; k < low.size(); ++k)
      if (low[k] < 0 || interior[k] < 0)
        throw value_error("ir::run: pad with negative padding (cropping) is not supported");
    any_array const& fill = operand(e.inputs.at(1));
    r = with_dtype(a.dtype(), [&]<class T>() -> any_array {
      return full<T>(out.shape, fill.as<T>().data()[0]);
    });
    auto dst = row_major_strides(out.shape);
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < low.size(); ++k) {
      offset += low[k] * dst[k];
      st[k] = (interior[k] + 1) * dst[k];
    }
    copy_strided(bytes(r), st.data(), offset, bytes(a), src.data(), 0, a.shape(),
                 element_size(a.dtype()));
  } else if (op == "concatenate") {
    std::size_t axis = std::size_t(e.attrs.get<std::int64_t>("dimension"));
    r = empty_like_dtype(out.dtype, out.shape);
    auto dst = row_major_strides(out.shape);
    std::int64_t at = 0;
    for (value_id v : e.inputs) {
      any_array const& p = operand(v);
      copy_strided(bytes(r), dst.data(), at * dst[axis], bytes(p),
                   row_major_strides(p.shape()).data(), 0, p.shape(), element_size(p.dtype()));
      at += std::int64_t(p.shape()[axis]);
    }
  } else if (op == "softmax" || op == "log_softmax" || op == "layer_norm" ||
             op.starts_with("conv2d")) {
    barrier_kernel k = table_of<barrier_kernel>().find(op, out.dtype);
    if (!k && out.dtype != zenith::dtype::float32 && out.dtype != zenith::dtype::float64)
      throw dtype_error("ir::run: " + std::string(op) + " of " +
                        std::string(dtype_name(out.dtype)) +
                        " values (float32 and float64 run here)");
    if (!k) fail_unregistered("kernel", op, out.dtype);
    any_array const* b = e.inputs.size() > 1 ? &operand(e.inputs[1]) : nullptr;
    r = k(e, a, b, out.shape);
  } else if (op.starts_with("reduce_") || op == "argmax" || op == "argmin") {
    std::uint32_t mask = 0;
    for (std::int64_t k : ints("axes")) mask |= 1u << k;
    r = reduce(op, a, mask);
  } else {
    throw value_error("ir::run: no CPU implementation of op " + std::string(op));
  }
  if (r.dtype() != out.dtype || !(r.shape() == out.shape))
    throw value_error("ir::run: " + std::string(op) + " gave " +
                      std::string(dtype_name(r.dtype())) + r.shape().str() +
                      " where the graph has " + std::string(dtype_name(out.dtype)) +
                      out.shape.str());
  vals[e.output] = std::move(r);
}

}  // namespace detail

// The equations that compute what `outputs` need and vals does not hold yet, in graph order.
template <class = void>
std::vector<std::size_t> needed_equations(graph const& g, std::vector<any_array> const& vals,
                                          std::vector<value_id> const& outputs) {
  auto const& eqs = g.equations();
  std::vector<char> needed(g.values().size(), 0);
  auto missing = [&](value_id v) { return v >= vals.size() || vals[v].empty(); };
  for (value_id v : outputs) needed[v] = 1;
  std::vector<std::size_t> order;
  for (std::size_t i = eqs.size(); i-- > 0;)
    if (needed[eqs[i].output] && missing(eqs[i].output)) {
      order.push_back(i);
      for (value_id v : eqs[i].inputs) needed[v] = 1;
    }
  return {order.rbegin(), order.rend()};
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::size_t> needed_equations<>(
    graph const& g, std::vector<any_array> const& vals, std::vector<value_id> const& outputs))

// Runs the equations of plan rp (prepare_run) on g. vals holds, by value id, every value they
// read that none of them computes (inputs, constants and literals are filled in when read);
// each equation's result is stored into it when a later one outside its fused region reads it,
// when it is a barrier's, or when it is kept.
template <class = void>
void run_planned(graph const& g, std::vector<any_array>& vals, detail::run_plan const& rp) {
  detail::machine<> m(g, vals, rp);
  auto const& eqs = g.equations();
  auto done = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to; ++k)
      for (value_id y : rp.release[k]) vals[y] = {};
  };
  std::size_t const n = rp.order.size();
  for (std::size_t i = 0; i < n;) {
    if (!rp.plans[i].kernel) {
      if (!rp.folded[eqs[rp.order[i]].output]) m.run_barrier(eqs[rp.order[i]]);
      done(i, i + 1);
      ++i;
      continue;
    }
    zenith::shape s = g.at(eqs[rp.order[i]].output).shape;
    std::size_t j = i + 1;
    while (j < n && rp.plans[j].kernel && g.at(eqs[rp.order[j]].output).shape == s) ++j;
    m.run_region(i, j, rp.plans.data() + i);
    done(i, j);
    i = j;
  }
}
ZENITH_RUNTIME_INSTANCE(void run_planned<>(graph const& g, std::vector<any_array>& vals,
                                           detail::run_plan const& rp))

// Runs the equations at positions `order` (ascending) of g (run_planned), kept being the values
// read after them.
template <class = void>
void run_equations(graph const& g, std::vector<any_array>& vals, std::vector<std::size_t> order,
                   std::vector<value_id> const& kept, bool release_dead = false) {
  run_planned(g, vals, detail::prepare_run(g, std::move(order), kept, release_dead));
}
ZENITH_RUNTIME_INSTANCE(void run_equations<>(graph const& g, std::vector<any_array>& vals,
                                             std::vector<std::size_t> order,
                                             std::vector<value_id> const& kept, bool release_dead))

// Runs g on the given inputs (one per g.inputs(), of its dtype and shape); returns one array per
// g.outputs(). Constants come from the graph. `known` gives values already computed (a tape's
// materialized results): the equations that compute them do not run. Neither do equations no
// output needs.
// Any graph, built by hand too: every op's kernel is compiled in (register_all).
template <class = void>
std::vector<any_array> run(graph const& g, std::vector<any_array> const& inputs,
                           std::vector<std::pair<value_id, any_array>> const& known = {}) {
  register_all();
  if (inputs.size() != g.inputs().size())
    throw value_error("ir::run: " + std::to_string(inputs.size()) + " inputs given to a graph of " +
                      std::to_string(g.inputs().size()));
  std::vector<any_array> vals(g.values().size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    value const& x = g.at(g.inputs()[i]);
    if (inputs[i].dtype() != x.dtype || !(inputs[i].shape() == x.shape))
      throw shape_error("ir::run: input " + std::to_string(i) + " is " +
                        std::string(dtype_name(inputs[i].dtype())) + inputs[i].shape().str() +
                        ", the graph's " + std::string(dtype_name(x.dtype)) + x.shape.str());
    vals[g.inputs()[i]] = inputs[i];
  }
  for (auto const& [v, a] : known) {
    value const& x = g.at(v);
    if (a.dtype() != x.dtype || !(a.shape() == x.shape))
      throw shape_error("ir::run: known value " + std::to_string(v) + " is " +
                        std::string(dtype_name(a.dtype())) + a.shape().str() + ", the graph's " +
                        std::string(dtype_name(x.dtype)) + x.shape.str());
    vals[v] = a;
  }
  run_equations(g, vals, needed_equations(g, vals, g.outputs()), g.outputs());
  std::vector<any_array> out;
  for (value_id v : g.outputs()) {
    if (vals[v].empty()) {  // an input, a constant or a literal given as an output
      detail::run_plan none;
      detail::machine<> m(g, vals, none);
      m.operand(v);
    }
    out.push_back(vals[v]);
  }
  return out;
}
ZENITH_RUNTIME_INSTANCE(
    std::vector<any_array> run<>(graph const& g, std::vector<any_array> const& inputs,
                                 std::vector<std::pair<value_id, any_array>> const& known))

}  // namespace zenith::ir
