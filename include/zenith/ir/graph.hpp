#pragma once
// The IR: a traced program as data. A graph is a list of values (each with a dtype and a
// shape) and a list of equations, each one op applied to values, giving one new value:
//
//   op name   the op tag's name (`tanh`, `dot_general`, `reduce_sum`, ...), as JAX spells it
//             where JAX has the op
//   inputs    value ids
//   attrs     named attributes: axes, shapes, permutations, a target dtype, ...
//   output    a value id, with its dtype and shape
//
// Values are the graph's inputs (a traced function's arguments), constants (arrays the program
// read but does not differentiate, kept alive by the graph), literals (a C++ number in an
// expression) and equation results. Everything a consumer needs is here, as data: a printer
// (ir/jaxpr.hpp), the tape's backward pass, exporters, a replay. The graph depends on core/
// only, so every layer above it can record into it.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/buffer.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"

namespace zenith::ir {

using value_id = std::uint32_t;

// One attribute's value: an integer, a number, a flag, a list of integers, a dtype or a text.
// A plain tagged struct rather than a std::variant: the code that builds attributes is compiled
// in every program that includes zenith, and std::variant's converting constructors are heavy
// templates to instantiate there.
class attr_value {
 public:
  enum class kind : std::uint8_t { integer, number, flag, integers, dtype, text };

  attr_value() = default;  // the integer 0
  template <std::integral I>
  attr_value(I v) {  // NOLINT: implicit, as attributes are written `{"axis", 1}`
    if constexpr (std::is_same_v<I, bool>) {
      kind_ = kind::flag;
      flag_ = v;
    } else {
      integer_ = std::int64_t(v);
    }
  }
  attr_value(double x) : kind_(kind::number), number_(x) {}                                // NOLINT
  attr_value(std::vector<std::int64_t> l) : kind_(kind::integers), ints_(std::move(l)) {}  // NOLINT
  attr_value(zenith::dtype d) : kind_(kind::dtype), dtype_(d) {}                           // NOLINT
  attr_value(std::string s) : kind_(kind::text), text_(std::move(s)) {}                    // NOLINT
  attr_value(char const* s) : attr_value(std::string(s)) {}                                // NOLINT

  kind which() const { return kind_; }
  // Whether the value is a T: std::int64_t, double, bool, std::vector<std::int64_t>,
  // zenith::dtype or std::string.
  template <class T>
  bool holds() const {
    return kind_ == kind_of<T>();
  }
  // The value as T; a value of another kind is a value_error.
  template <class T>
  T const& get() const {
    if (!holds<T>()) throw value_error("ir: attribute value of another kind");
    if constexpr (std::is_same_v<T, std::int64_t>)
      return integer_;
    else if constexpr (std::is_same_v<T, double>)
      return number_;
    else if constexpr (std::is_same_v<T, bool>)
      return flag_;
    else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>)
      return ints_;
    else if constexpr (std::is_same_v<T, zenith::dtype>)
      return dtype_;
    else
      return text_;
  }

 private:
  template <class T>
  static constexpr kind kind_of() {
    if constexpr (std::is_same_v<T, std::int64_t>)
      return kind::integer;
    else if constexpr (std::is_same_v<T, double>)
      return kind::number;
    else if constexpr (std::is_same_v<T, bool>)
      return kind::flag;
    else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>)
      return kind::integers;
    else if constexpr (std::is_same_v<T, zenith::dtype>)
      return kind::dtype;
    else {
      static_assert(std::is_same_v<T, std::string>,
                    "zenith: an attribute value is std::int64_t, double, bool, "
                    "std::vector<std::int64_t>, zenith::dtype or std::string");
      return kind::text;
    }
  }

  kind kind_ = kind::integer;
  bool flag_ = false;
  zenith::dtype dtype_ = zenith::dtype::float32;
  std::int64_t integer_ = 0;
  double number_ = 0;
  std::vector<std::int64_t> ints_;
  std::string text_;
};

struct attr {
  std::string_view name;  // static storage: attribute names are literals
  attr_value value;
};

class attributes {
 public:
  attributes() = default;
  attributes(std::initializer_list<attr> l) : list_(l) {}

  void set(std::string_view name, attr_value v) {
    for (auto& a : list_)
      if (a.name == name) {
        a.value = std::move(v);
        return;
      }
    list_.push_back({name, std::move(v)});
  }
  attr_value const* find(std::string_view name) const {
    for (auto const& a : list_)
      if (a.name == name) return &a.value;
    return nullptr;
  }
  // The attribute as T; a missing attribute or one of another kind is a value_error naming it.
  template <class T>
  T const& get(std::string_view name) const {
    attr_value const* v = find(name);
    if (!v || !v->holds<T>())
      throw value_error("ir: attribute '" + std::string(name) + "' missing or of another kind");
    return v->get<T>();
  }
  auto begin() const { return list_.begin(); }
  auto end() const { return list_.end(); }
  bool empty() const { return list_.empty(); }

 private:
  std::vector<attr> list_;
};

enum class value_kind { input, constant, literal, result };

struct value {
  zenith::dtype dtype = zenith::dtype::float32;
  zenith::shape shape;
  value_kind kind = value_kind::result;
  double literal = 0;                            // kind literal: the number
  std::shared_ptr<buffer const> data = nullptr;  // kind constant: the array's memory, kept alive
  void const* ptr = nullptr;                     // its first element
};

struct equation {
  std::string_view op;  // static storage: the op tag's name
  std::vector<value_id> inputs;
  value_id output = 0;
  attributes attrs;
};

class graph {
 public:
  value_id add_input(zenith::dtype d, zenith::shape s) {
    value_id id = push({d, s, value_kind::input});
    inputs_.push_back(id);
    return id;
  }
  value_id add_constant(zenith::dtype d, zenith::shape s, std::shared_ptr<buffer const> data,
                        void const* ptr) {
    value v{d, s, value_kind::constant};
    v.data = std::move(data);
    v.ptr = ptr;
    value_id id = push(std::move(v));
    constants_.push_back(id);
    return id;
  }
  value_id add_literal(zenith::dtype d, double x) {
    value v{d, {}, value_kind::literal};
    v.literal = x;
    return push(std::move(v));
  }
  // Appends `op(inputs)` with the given attributes; its result has dtype d and shape s.
  value_id add_equation(std::string_view op, std::vector<value_id> in, zenith::dtype d,
                        zenith::shape s, attributes attrs = {}) {
    for (value_id i : in)
      if (i >= values_.size())
        throw value_error("ir: equation " + std::string(op) + " reads value " + std::to_string(i) +
                          " of a graph with " + std::to_string(values_.size()));
    value_id out = push({d, s, value_kind::result});
    equations_.push_back({op, std::move(in), out, std::move(attrs)});
    return out;
  }
  void add_output(value_id v) { outputs_.push_back(v); }

  value const& at(value_id v) const { return values_.at(v); }
  // For a pass that rewrites what it has just appended (autodiff/ir_vjp.hpp retypes a rule
  // recorded in double): values from `first_value` and equations from `first_equation` on.
  template <class F>
  void rewrite_since(value_id first_value, std::size_t first_equation, F&& f) {
    for (std::size_t v = first_value; v < values_.size(); ++v) f(values_[v]);
    for (std::size_t e = first_equation; e < equations_.size(); ++e) f(equations_[e]);
  }
  std::vector<value> const& values() const { return values_; }
  std::vector<equation> const& equations() const { return equations_; }
  std::vector<value_id> const& inputs() const { return inputs_; }
  std::vector<value_id> const& constants() const { return constants_; }
  std::vector<value_id> const& outputs() const { return outputs_; }

 private:
  value_id push(value v) {
    values_.push_back(std::move(v));
    return value_id(values_.size() - 1);
  }
  std::vector<value> values_;
  std::vector<equation> equations_;
  std::vector<value_id> inputs_, constants_, outputs_;
};

}  // namespace zenith::ir
