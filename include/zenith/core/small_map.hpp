#pragma once
// Maps and sets keyed by pointer for the few entries one autodiff call holds (the buffers a trace
// traces, their tangents and cotangents): a vector searched linearly, which costs no allocation
// per entry and no hashing, plus a hash index once it outgrows a linear search (long runtime
// loops trace thousands of buffers). A gradient of a small function spent a fifth of its time in
// std::unordered_map/set nodes before these.
//
// The first few entries live inside the map (small_vector.hpp): most calls allocate nothing.
//
// Erasing moves the last entry into the hole, so order is not kept, and any insertion or erasure
// invalidates pointers and references to values.
#include <cstddef>
#include <optional>
#include <unordered_map>
#include <utility>

#include "small_vector.hpp"

namespace zenith::detail {

template <class K, class V, std::size_t Inline = 4>
class small_map {
 public:
  // Entries searched linearly; beyond this, index_ maps each key to its position.
  static constexpr std::size_t linear_limit = 32;

  small_map() {}  // user-provided: see small_vector's

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

  V* find(K k) {
    std::size_t i = position(k);
    return i == npos ? nullptr : &items_[i].second;
  }
  V const* find(K k) const {
    std::size_t i = position(k);
    return i == npos ? nullptr : &items_[i].second;
  }
  bool contains(K k) const { return position(k) != npos; }

  // The value for k, default-constructed if k is new.
  V& operator[](K k) {
    std::size_t i = position(k);
    if (i != npos) return items_[i].second;
    return append(k, V{});
  }
  void insert_or_assign(K k, V v) {
    std::size_t i = position(k);
    if (i != npos)
      items_[i].second = std::move(v);
    else
      append(k, std::move(v));
  }
  // Removes k; returns how many entries went (0 or 1).
  std::size_t erase(K k) {
    std::size_t i = position(k);
    if (i == npos) return 0;
    if (i != items_.size() - 1) items_[i] = std::move(items_.back());
    items_.pop_back();
    if (items_.size() <= linear_limit) {
      index_.reset();  // back to a linear search
    } else {
      index_->erase(k);
      if (i < items_.size()) (*index_)[items_[i].first] = i;
    }
    return 1;
  }
  void clear() {
    items_.clear();
    index_.reset();
  }

  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  static constexpr std::size_t npos = std::size_t(-1);

  std::size_t position(K k) const {
    if (items_.size() > linear_limit) {
      auto it = index_->find(k);
      return it == index_->end() ? npos : it->second;
    }
    for (std::size_t i = 0; i < items_.size(); ++i)
      if (items_[i].first == k) return i;
    return npos;
  }

  V& append(K k, V v) {
    items_.emplace_back(k, std::move(v));
    if (items_.size() > linear_limit) {
      if (!index_) {  // just outgrew the linear search: index everything
        index_.emplace();
        for (std::size_t i = 0; i < items_.size(); ++i) index_->emplace(items_[i].first, i);
      } else {
        index_->emplace(k, items_.size() - 1);
      }
    }
    return items_.back().second;
  }

  small_vector<std::pair<K, V>, Inline> items_;
  // Present exactly while there are more than linear_limit entries: most maps never have one,
  // and an empty std::unordered_map still clears its bucket array when destroyed.
  std::optional<std::unordered_map<K, std::size_t>> index_;
};

template <class K>
class small_set {
 public:
  small_set() {}  // user-provided: see small_vector's
  std::size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  bool contains(K k) const { return map_.contains(k); }
  std::size_t count(K k) const { return map_.contains(k) ? 1 : 0; }
  // Adds k; false if it was there already.
  bool insert(K k) {
    if (map_.contains(k)) return false;
    map_.insert_or_assign(k, {});
    return true;
  }
  std::size_t erase(K k) { return map_.erase(k); }
  void clear() { map_.clear(); }

 private:
  struct none {};
  small_map<K, none> map_;
};

}  // namespace zenith::detail
