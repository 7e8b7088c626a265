#pragma once
// A block of memory an array points into, shared by reference count. Either owned (from the
// CPU's caching allocator, or another device's through core/device_memory.hpp) or borrowed
// (zenith::view over a caller's pointer, never freed by zenith).
#include <cstddef>
#include <memory>

#include "allocator.hpp"
#include "device.hpp"
#include "device_memory.hpp"
#include "recording.hpp"

namespace zenith {

class buffer {
 public:
  // bytes on dev; with `from`, host memory page-locked by from's backend (dev is the CPU).
  static std::shared_ptr<buffer> allocate(std::size_t bytes, device dev = cpu,
                                          device_memory const* from = nullptr) {
    auto b = std::make_shared<buffer>(key{});
    b->bytes_ = bytes;
    b->device_ = dev;
    b->memory_ = dev != cpu ? &memory_of(dev) : from;
    if (bytes)
      b->data_ =
          b->memory_ ? b->memory_->allocate(dev, bytes) : cpu_allocator::instance().allocate(bytes);
    b->owned_ = true;
    // A recording keeps what it allocated: its steps point into it (core/recording.hpp).
    if (detail::recording* r = detail::active_recording()) r->allocated.push_back(b);
    return b;
  }
  static std::shared_ptr<buffer> borrow(void* data, std::size_t bytes, device dev = cpu) {
    auto b = std::make_shared<buffer>(key{});
    b->data_ = data;
    b->bytes_ = bytes;
    b->device_ = dev;
    b->owned_ = false;
    return b;
  }
  // A second buffer over the same memory, keeping `of` alive: the same values under a new
  // identity (autodiff tells its traced arguments apart by buffer).
  static std::shared_ptr<buffer> alias(std::shared_ptr<buffer> of) {
    auto b = borrow(of->data_, of->bytes_, of->device_);
    b->keep_ = std::move(of);
    return b;
  }
  // The buffer an alias borrows from (through any chain of aliases), or b itself: the same
  // memory under its owner's identity, for an array that leaves a trace.
  static std::shared_ptr<buffer> origin(std::shared_ptr<buffer> b) {
    while (b && b->keep_) b = b->keep_;
    return b;
  }
  // Made only by the functions above (the key is private); public so that make_shared can put
  // the buffer and its reference count in one allocation, which every array makes.
  struct key {
   private:
    key() = default;
    friend class buffer;
  };
  explicit buffer(key) {}
  buffer(buffer const&) = delete;
  buffer& operator=(buffer const&) = delete;
  ~buffer() {
    if (!owned_ || !data_) return;
    if (memory_)
      memory_->deallocate(device_, data_, bytes_);
    else
      cpu_allocator::instance().deallocate(data_, bytes_);
  }

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  device where() const { return device_; }
  bool owned() const { return owned_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  device device_ = cpu;
  bool owned_ = false;
  device_memory const* memory_ = nullptr;  // where an owned block on another device goes back
  std::shared_ptr<buffer> keep_;           // what an alias borrows from
};

}  // namespace zenith
