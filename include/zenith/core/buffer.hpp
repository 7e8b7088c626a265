#pragma once
// A block of memory an array points into, shared by reference count. Either owned (from the
// caching allocator) or borrowed (zenith::view over a caller's pointer, never freed by zenith).
#include <cstddef>
#include <memory>

#include "allocator.hpp"
#include "device.hpp"

namespace zenith {

class buffer {
 public:
  static std::shared_ptr<buffer> allocate(std::size_t bytes, device dev = cpu) {
    auto b = std::shared_ptr<buffer>(new buffer());
    b->bytes_ = bytes;
    b->device_ = dev;
    b->owned_ = true;
    b->data_ = bytes ? cpu_allocator::instance().allocate(bytes) : nullptr;
    return b;
  }
  static std::shared_ptr<buffer> borrow(void* data, std::size_t bytes, device dev = cpu) {
    auto b = std::shared_ptr<buffer>(new buffer());
    b->data_ = data;
    b->bytes_ = bytes;
    b->device_ = dev;
    b->owned_ = false;
    return b;
  }
  buffer(buffer const&) = delete;
  buffer& operator=(buffer const&) = delete;
  ~buffer() {
    if (owned_ && data_) cpu_allocator::instance().deallocate(data_, bytes_);
  }

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  device where() const { return device_; }
  bool owned() const { return owned_; }

 private:
  buffer() = default;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  device device_ = cpu;
  bool owned_ = false;
};

}  // namespace zenith
