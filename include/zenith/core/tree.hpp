#pragma once
// Trees of arrays: how parameters are passed to grad and how gradients come back.
//
// A tree is an array<T>, or a std::vector, std::array, std::tuple, std::pair or
// std::map<std::string, ...> of trees, or a user struct that lists its fields once:
//
//   struct mlp_params { zn::array<float> w1, b1, w2, b2; int hidden; };
//   ZENITH_FIELDS(mlp_params, w1, b1, w2, b2)   // at namespace scope, beside the struct
//
// (or a member `auto fields() { return std::tie(w1, b1, w2, b2); }`). Fields not listed are
// copied along untouched. for_each_leaf visits the arrays in a fixed order (containers in
// iteration order, tuples and fields in declaration order); a transform copies a tree (the
// arrays are handles, so that is cheap) and rebinds its leaves, which keeps the structure.
#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "apply.hpp"
#include "array.hpp"

namespace zenith {

// tree_node<T>: how to visit the children of one kind of node. Specialize it to teach trees a
// new container.
template <class T>
struct tree_node {
  static constexpr bool known = false;
};

template <class T>
struct tree_node<array<T>> {
  static constexpr bool known = true;
  static constexpr bool leaf = true;
};

template <class X, class A>
struct tree_node<std::vector<X, A>> {
  static constexpr bool known = true;
  static constexpr bool leaf = false;
  using children = std::tuple<X>;
  template <class V, class F>
  static void visit(V& v, F&& f) {
    for (auto& x : v) f(x);
  }
};

template <class X, std::size_t N>
struct tree_node<std::array<X, N>> {
  static constexpr bool known = true;
  static constexpr bool leaf = false;
  using children = std::tuple<X>;
  template <class V, class F>
  static void visit(V& v, F&& f) {
    for (auto& x : v) f(x);
  }
};

template <class X, class C, class A>
struct tree_node<std::map<std::string, X, C, A>> {
  static constexpr bool known = true;
  static constexpr bool leaf = false;
  using children = std::tuple<X>;
  template <class V, class F>
  static void visit(V& v, F&& f) {
    for (auto& kv : v) f(kv.second);
  }
};

template <class... X>
struct tree_node<std::tuple<X...>> {
  static constexpr bool known = true;
  static constexpr bool leaf = false;
  using children = std::tuple<X...>;
  template <class V, class F>
  static void visit(V& v, F&& f) {
    zenith::detail::apply([&](auto&... x) { (f(x), ...); }, v);
  }
};

template <class A, class B>
struct tree_node<std::pair<A, B>> {
  static constexpr bool known = true;
  static constexpr bool leaf = false;
  using children = std::tuple<A, B>;
  template <class V, class F>
  static void visit(V& v, F&& f) {
    f(v.first);
    f(v.second);
  }
};

namespace detail {
// The fields of a user struct, as a tuple of references: ZENITH_FIELDS's zenith_fields(s)
// (found by argument-dependent lookup) or a fields() member.
template <class S>
concept has_zenith_fields = requires(S& s) {
  zenith_fields(s);
};
template <class S>
concept has_fields_method = requires(S& s) {
  s.fields();
};

template <class S>
decltype(auto) fields_of(S& s) {
  if constexpr (has_zenith_fields<S>)
    return zenith_fields(s);
  else
    return s.fields();
}
template <class S>
using field_types = decltype(zenith::detail::apply(
    [](auto&... f) { return std::tuple<std::remove_cvref_t<decltype(f)>...>{}; },
    fields_of(std::declval<S&>())));
}  // namespace detail

template <class S>
requires(std::is_class_v<S> &&
         (detail::has_zenith_fields<S> || detail::has_fields_method<S>)) struct tree_node<S> {
  static constexpr bool known = true;
  static constexpr bool leaf = false;
  using children = detail::field_types<S>;
  template <class V, class F>
  static void visit(V& v, F&& f) {
    // Read-only visits reach the fields through the same accessor and pass them on as const.
    auto&& fs = detail::fields_of(const_cast<std::remove_const_t<V>&>(v));
    zenith::detail::apply(
        [&](auto&... x) {
          if constexpr (std::is_const_v<V>)
            (f(std::as_const(x)), ...);
          else
            (f(x), ...);
        },
        fs);
  }
};

// Calls f(leaf) on every array of the tree, in the tree's fixed order; f gets array<T>& for a
// mutable tree and array<T> const& for a const one.
template <class Tree, class F>
void for_each_leaf(Tree& t, F&& f) {
  using N = tree_node<std::remove_const_t<Tree>>;
  static_assert(N::known,
                "zenith: not a tree of arrays (arrays, std::vector, std::array, std::tuple, "
                "std::pair, std::map<std::string, ...>, or a struct with ZENITH_FIELDS)");
  if constexpr (N::leaf)
    f(t);
  else
    N::visit(t, [&](auto& child) { for_each_leaf(child, f); });
}

// True if T is a tree whose every leaf satisfies Leaf<array type>::value.
template <class T, template <class> class Leaf>
constexpr bool is_tree_of() {
  using N = tree_node<T>;
  if constexpr (!N::known)
    return false;
  else if constexpr (N::leaf)
    return Leaf<T>::value;
  else
    return []<class... C>(std::tuple<C...>*) {
      return (is_tree_of<C, Leaf>() && ...);
    }(static_cast<typename N::children*>(nullptr));
}

namespace detail {
template <class A>
struct floating_array_leaf : std::false_type {};
template <class T>
struct floating_array_leaf<array<T>> : std::bool_constant<floating_element<T>> {};
template <class A>
struct any_array_leaf : std::false_type {};
template <class T>
struct any_array_leaf<array<T>> : std::true_type {};
}  // namespace detail

// A tree whose leaves are all floating-point arrays: what grad differentiates.
template <class T>
concept differentiable_tree = is_tree_of<std::remove_cvref_t<T>, detail::floating_array_leaf>();

}  // namespace zenith

// ZENITH_FIELDS(Struct, field, ...): lists a struct's array fields once, making it a tree.
// Use it at namespace scope in the struct's namespace (it defines zenith_fields, found by
// argument-dependent lookup).
#define ZENITH_FIELDS(Struct, ...)                                                     \
  [[maybe_unused]] inline auto zenith_fields(Struct& zenith_fields_s) {                \
    return std::tuple_cat(                                                             \
        std::tuple<> {} ZENITH_DETAIL_FOR_EACH(ZENITH_DETAIL_TIE_FIELD, __VA_ARGS__)); \
  }

#define ZENITH_DETAIL_TIE_FIELD(f) , std::tie(zenith_fields_s.f)

// A preprocessor for-each (up to 256 arguments), by rescanning through nested expansions.
#define ZENITH_DETAIL_PARENS ()
#define ZENITH_DETAIL_EXPAND(...) \
  ZENITH_DETAIL_EXPAND3(          \
      ZENITH_DETAIL_EXPAND3(ZENITH_DETAIL_EXPAND3(ZENITH_DETAIL_EXPAND3(__VA_ARGS__))))
#define ZENITH_DETAIL_EXPAND3(...) \
  ZENITH_DETAIL_EXPAND2(           \
      ZENITH_DETAIL_EXPAND2(ZENITH_DETAIL_EXPAND2(ZENITH_DETAIL_EXPAND2(__VA_ARGS__))))
#define ZENITH_DETAIL_EXPAND2(...) \
  ZENITH_DETAIL_EXPAND1(           \
      ZENITH_DETAIL_EXPAND1(ZENITH_DETAIL_EXPAND1(ZENITH_DETAIL_EXPAND1(__VA_ARGS__))))
#define ZENITH_DETAIL_EXPAND1(...) __VA_ARGS__
#define ZENITH_DETAIL_FOR_EACH(macro, ...) \
  __VA_OPT__(ZENITH_DETAIL_EXPAND(ZENITH_DETAIL_FOR_EACH_STEP(macro, __VA_ARGS__)))
#define ZENITH_DETAIL_FOR_EACH_STEP(macro, a, ...) \
  macro(a) __VA_OPT__(ZENITH_DETAIL_FOR_EACH_AGAIN ZENITH_DETAIL_PARENS(macro, __VA_ARGS__))
#define ZENITH_DETAIL_FOR_EACH_AGAIN() ZENITH_DETAIL_FOR_EACH_STEP
