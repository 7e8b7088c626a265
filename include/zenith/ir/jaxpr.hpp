#pragma once
// A graph printed in JAX's jaxpr text format:
//
//   { lambda ; a:f32[4,3] b:f32[3,2]. let
//       c:f32[4,2] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b
//       d:f32[4,2] = tanh c
//     in (d,) }
//
// Constants (arrays the function read without differentiating them) are the variables before
// the `;`, inputs after it; literals print inline as `2.0:f32[]`. Variables are named a, b, ...,
// z, ba, bb, ... in order of appearance, as JAX names them, and attributes print sorted by name.
// A jaxpr that fits in 80 columns prints on one line.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "../core/runtime_instance.hpp"
#include "graph.hpp"

namespace zenith::ir {

// JAX's short dtype names: f32, bf16, i32, bool, ...
inline std::string_view short_dtype_name(zenith::dtype d) {
  switch (d) {
    case zenith::dtype::bool_:
      return "bool";
    case zenith::dtype::int32:
      return "i32";
    case zenith::dtype::int64:
      return "i64";
    case zenith::dtype::bfloat16:
      return "bf16";
    case zenith::dtype::float16:
      return "f16";
    case zenith::dtype::float32:
      return "f32";
    case zenith::dtype::float64:
      return "f64";
  }
  return "?";
}

// `f32[4,3]`, `f64[]`.
inline std::string aval_str(zenith::dtype d, zenith::shape const& s) {
  std::string out(short_dtype_name(d));
  out += '[';
  for (std::size_t k = 0; k < s.size(); ++k) out += (k ? "," : "") + std::to_string(s[k]);
  return out + ']';
}

namespace detail {

// Shortest text that reads back as the same number of the value's dtype, with ".0" on whole
// numbers (Python's repr of a NumPy scalar).
template <class = void>
std::string number_str(double x, zenith::dtype d) {
  if (d == zenith::dtype::bool_) return x != 0 ? "True" : "False";
  if (d == zenith::dtype::int32 || d == zenith::dtype::int64)
    return std::to_string(static_cast<long long>(x));
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = d == zenith::dtype::float64 ? std::to_chars(buf, buf + sizeof buf, x)
                                       : std::to_chars(buf, buf + sizeof buf, float(x));
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}
ZENITH_RUNTIME_INSTANCE(std::string number_str<>(double x, zenith::dtype d))

inline std::string ints_str(std::vector<std::int64_t> const& v, bool brackets = false) {
  std::string s = brackets ? "[" : "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (!brackets && v.size() == 1) s += ',';
  return s + (brackets ? "]" : ")");
}

template <class = void>
std::string attr_str(attr_value const& v) {
  using kind = attr_value::kind;
  switch (v.which()) {
    case kind::integer:
      return std::to_string(v.get<std::int64_t>());
    case kind::number:
      return number_str(v.get<double>(), zenith::dtype::float64);
    case kind::flag:
      return v.get<bool>() ? "True" : "False";
    case kind::integers:
      return ints_str(v.get<std::vector<std::int64_t>>());
    case kind::dtype:
      return std::string(dtype_name(v.get<zenith::dtype>()));
    case kind::text:
      break;
  }
  return v.get<std::string>();
}
ZENITH_RUNTIME_INSTANCE(std::string attr_str<>(attr_value const& v))

// An equation's attributes as sorted `k=v` texts. dot_general's four dimension lists print as
// JAX's one dimension_numbers parameter.
template <class = void>
std::vector<std::string> params_of(equation const& e) {
  std::vector<std::string> kv;
  bool dot = e.op == "dot_general";
  if (dot) {
    auto l = [&](std::string_view n) {
      auto const* v = e.attrs.find(n);
      return v ? ints_str(v->get<std::vector<std::int64_t>>(), true) : std::string("[]");
    };
    kv.push_back("dimension_numbers=((" + l("lhs_contracting") + ", " + l("rhs_contracting") +
                 "), (" + l("lhs_batch") + ", " + l("rhs_batch") + "))");
  }
  for (auto const& a : e.attrs) {
    if (dot && (a.name.ends_with("_contracting") || a.name.ends_with("_batch"))) continue;
    kv.push_back(std::string(a.name) + "=" + attr_str(a.value));
  }
  std::sort(kv.begin(), kv.end());
  return kv;
}
ZENITH_RUNTIME_INSTANCE(std::vector<std::string> params_of<>(equation const& e))

// JAX's variable names: a..z, then ba, bb, ... (base 26, no leading a).
inline std::string var_name(std::size_t n) {
  std::string s;
  do {
    s.insert(s.begin(), char('a' + n % 26));
    n /= 26;
  } while (n);
  return s;
}

}  // namespace detail

// The graph as jaxpr text.
template <class = void>
std::string to_jaxpr(graph const& g) {
  std::vector<std::string> names(g.values().size());
  std::size_t next = 0;
  auto name = [&](value_id v) -> std::string const& {
    if (names[v].empty()) names[v] = detail::var_name(next++);
    return names[v];
  };
  auto operand = [&](value_id v) {
    value const& x = g.at(v);
    if (x.kind == value_kind::literal)
      return detail::number_str(x.literal, x.dtype) + ":" + aval_str(x.dtype, x.shape);
    return name(v);
  };
  auto binder = [&](value_id v) { return name(v) + ":" + aval_str(g.at(v).dtype, g.at(v).shape); };

  std::string head = "{ lambda ";
  for (std::size_t i = 0; i < g.constants().size(); ++i)
    head += (i ? " " : "") + binder(g.constants()[i]);
  head += "; ";
  for (std::size_t i = 0; i < g.inputs().size(); ++i)
    head += (i ? " " : "") + binder(g.inputs()[i]);
  head += ". let";

  // Each equation on one line, and with its attributes one per line where the line up to their
  // closing bracket is wider than 80 columns (JAX's layout).
  std::vector<std::string> lines, long_lines;
  for (equation const& e : g.equations()) {
    std::vector<std::string> params = detail::params_of(e);
    std::string lhs = binder(e.output) + " = " + std::string(e.op), args;
    for (value_id v : e.inputs) args += " " + operand(v);
    std::string flat;
    for (std::size_t i = 0; i < params.size(); ++i) flat += (i ? " " : "") + params[i];
    std::string line = lhs + (params.empty() ? "" : "[" + flat + "]") + args;
    if (!params.empty() && 4 + line.size() - args.size() > 80) {
      std::string broken = lhs + "[\n";
      for (auto const& p : params) broken += "      " + p + "\n";
      long_lines.push_back(broken + "    ]" + args);
    } else {
      long_lines.push_back(line);
    }
    lines.push_back(std::move(line));
  }
  std::string tail = "in (";
  for (std::size_t i = 0; i < g.outputs().size(); ++i)
    tail += (i ? ", " : "") + operand(g.outputs()[i]);
  tail += g.outputs().size() == 1 ? ",) }" : ") }";

  std::string one_line = head;
  for (std::size_t i = 0; i < lines.size(); ++i) one_line += (i ? "; " : " ") + lines[i];
  one_line += " " + tail;
  if (one_line.size() <= 80) return one_line;
  std::string out = head + "\n";
  for (auto const& l : long_lines) out += "    " + l + "\n";
  return out + "  " + tail;
}
ZENITH_RUNTIME_INSTANCE(std::string to_jaxpr<>(graph const& g))

}  // namespace zenith::ir
