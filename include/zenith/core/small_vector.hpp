#pragma once
// small_vector<T, N>: a vector whose first N elements live inside the object. The few entries
// one autodiff call holds (traced buffers, cotangent slots, a gradient's fused loops) then cost
// no heap allocation; more than N move to the heap, as a std::vector would grow.
//
// Like std::vector, any insertion that grows past the capacity invalidates pointers to
// elements; so does moving a vector whose elements are inline.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace zenith::detail {

template <class T, std::size_t N>
class small_vector {
  static_assert(N >= 1, "small_vector: at least one element inline");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = T const*;

  // User-provided, so that value-initialization (`{}`, a std::tuple member) does not zero the
  // inline storage first: that memset was 6% of a small gradient.
  small_vector() noexcept {}
  small_vector(small_vector const& o) { append_copies(o); }
  small_vector(small_vector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    take(std::move(o));
  }
  small_vector& operator=(small_vector const& o) {
    if (this != &o) {
      clear();
      append_copies(o);
    }
    return *this;
  }
  small_vector& operator=(small_vector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      clear();
      release_heap();
      take(std::move(o));
    }
    return *this;
  }
  ~small_vector() {
    clear();
    release_heap();
  }

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }

  T* data() { return data_; }
  T const* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  T const* begin() const { return data_; }
  T const* end() const { return data_ + size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  T const& operator[](std::size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  T const& back() const { return data_[size_ - 1]; }

  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == cap_) {
      // The arguments may refer to an element (v.push_back(v[0])): build the new one first.
      T v(std::forward<Args>(args)...);
      grow(2 * cap_);
      T* p = std::construct_at(data_ + size_, std::move(v));
      ++size_;
      return *p;
    }
    T* p = std::construct_at(data_ + size_, std::forward<Args>(args)...);
    ++size_;
    return *p;
  }
  void push_back(T const& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() { std::destroy_at(data_ + --size_); }

  // Destroys the elements; the capacity stays.
  void clear() {
    std::destroy(data_, data_ + size_);
    size_ = 0;
  }

  // n default-constructed elements (or the first n).
  void resize(std::size_t n) {
    if (n > cap_) grow(n);
    while (size_ > n) pop_back();
    while (size_ < n) emplace_back();
  }

 private:
  bool on_heap() const { return data_ != inline_data(); }
  T* inline_data() { return reinterpret_cast<T*>(inline_); }
  T const* inline_data() const { return reinterpret_cast<T const*>(inline_); }

  void grow(std::size_t cap) {
    T* fresh = static_cast<T*>(::operator new(cap * sizeof(T), std::align_val_t(alignof(T))));
    std::size_t i = 0;
    try {
      for (; i < size_; ++i) std::construct_at(fresh + i, std::move_if_noexcept(data_[i]));
    } catch (...) {
      std::destroy(fresh, fresh + i);
      ::operator delete(fresh, std::align_val_t(alignof(T)));
      throw;
    }
    std::destroy(data_, data_ + size_);
    release_heap();
    data_ = fresh;
    cap_ = cap;
  }
  void release_heap() {
    if (on_heap()) ::operator delete(data_, std::align_val_t(alignof(T)));
    data_ = inline_data();
    cap_ = N;
  }
  // From an empty, inline this: o's heap block, or its inline elements moved one by one.
  void take(small_vector&& o) {
    if (o.on_heap()) {
      data_ = std::exchange(o.data_, o.inline_data());
      cap_ = std::exchange(o.cap_, N);
      size_ = std::exchange(o.size_, 0);
      return;
    }
    for (T& v : o) emplace_back(std::move(v));
    o.clear();
  }
  void append_copies(small_vector const& o) {
    if (o.size_ > cap_) grow(o.size_);
    for (T const& v : o) emplace_back(v);
  }

  alignas(T) std::byte inline_[N * sizeof(T)];
  T* data_ = inline_data();
  std::size_t size_ = 0;
  std::size_t cap_ = N;
};

}  // namespace zenith::detail
