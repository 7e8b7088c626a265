#pragma once
// tensor_ref<T, N...>: a fixed-size tensor read where it is.
//
//   zn::tensor<double, 4096> data = ...;
//   auto loss = [&](auto const& w) { return zn::sum(zn::square(w - zn::ref(data))); };
//
// Expressions hold their operands by value, so that an expression never outlives what it reads.
// For a tensor that copy is its elements: a tensor of a few thousand numbers inside an
// expression is copied into the node, and again each time the node is moved into its parent.
// A tensor_ref holds only the tensor's address. It is what a staged tensor function (jit of grad
// on tensors, transforms/staged_grad.hpp) receives for each argument that is not differentiated,
// since those outlive the call; `zn::ref(t)` makes one for any other tensor that outlives the
// expressions built from it (a closure's data, say).
//
// Everywhere an expression operand goes, a tensor_ref reads like the tensor: elementwise math,
// reductions, matmul, element access (y(i), y[i]), data(), and it converts to `tensor const&`.
// It cannot write.
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "expr_base.hpp"
#include "tensor.hpp"

namespace zenith {

template <class T, std::size_t... N>
class tensor_ref : public expr_base<tensor_ref<T, N...>> {
 public:
  using tensor_type = tensor<T, N...>;
  using value_type = T;
  using static_shape = typename tensor_type::static_shape;
  static constexpr bool fixed = true;
  static constexpr bool dense = true;  // the dynamic evaluator reads data() / shape() as a leaf
  static constexpr std::size_t rank = tensor_type::rank;
  static constexpr std::size_t count = tensor_type::count;
  static constexpr auto dims = tensor_type::dims;

  explicit constexpr tensor_ref(tensor_type const& t) : t_(&t) {}
  explicit tensor_ref(tensor_type&&) = delete;  // would dangle

  constexpr tensor_type const& get() const { return *t_; }
  constexpr operator tensor_type const&() const { return *t_; }  // NOLINT: reads as the tensor

  zenith::shape shape() const { return t_->shape(); }
  static constexpr std::size_t ndim() { return rank; }
  static constexpr std::size_t size() { return count; }
  constexpr T const* data() const { return t_->data(); }
  constexpr T const* begin() const { return t_->begin(); }
  constexpr T const* end() const { return t_->end(); }
  constexpr std::array<T, count> const& values() const { return t_->values(); }
  template <std::integral... I>
  constexpr T const& operator()(I... idx) const {
    return (*t_)(idx...);
  }
  constexpr T const& operator[](std::size_t i) const { return (*t_)[i]; }
  constexpr std::uint8_t entry_flags(std::size_t i) const { return t_->entry_flags(i); }

  // The fixed-size evaluation protocol (see map_node::at).
  ZENITH_FIXED_INLINE constexpr compute_t<T> at(std::size_t i) const { return t_->at(i); }
  template <class F>
  void for_each_array(F&&) const {}  // holds no array

  constexpr operator T() const requires(rank == 0) { return T(*t_); }  // NOLINT

 private:
  tensor_type const* t_;
};

template <class T, std::size_t... N>
tensor_ref(tensor<T, N...> const&) -> tensor_ref<T, N...>;

// t read in place inside expressions; t must outlive them.
template <class T, std::size_t... N>
constexpr tensor_ref<T, N...> ref(tensor<T, N...> const& t) {
  return tensor_ref<T, N...>(t);
}
template <class T, std::size_t... N>
void ref(tensor<T, N...>&&) = delete;  // a temporary would dangle

namespace detail {
template <class E>
struct is_tensor_ref : std::false_type {};
template <class T, std::size_t... N>
struct is_tensor_ref<tensor_ref<T, N...>> : std::true_type {};
}  // namespace detail

template <class E>
inline constexpr bool is_tensor_ref_v = detail::is_tensor_ref<std::remove_cvref_t<E>>::value;

// A tensor or a reference to one: its elements are in memory, at data(), in row-major order.
template <class E>
inline constexpr bool is_tensor_like_v = is_tensor_v<E> || is_tensor_ref_v<E>;

}  // namespace zenith
