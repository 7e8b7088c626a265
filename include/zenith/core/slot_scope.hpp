#pragma once
// slot_scope: sets a thread-local pointer slot for the lifetime of the guard and puts the
// previous value back after it, so that scopes nest (the active trace, the active recording).

namespace zenith::detail {

// Slot() returns a reference to the thread's pointer.
template <class T, T*& (*Slot)()>
class slot_scope {
 public:
  explicit slot_scope(T* value) : saved_(Slot()) { Slot() = value; }
  ~slot_scope() { Slot() = saved_; }
  slot_scope(slot_scope const&) = delete;
  slot_scope& operator=(slot_scope const&) = delete;

 private:
  T* saved_;
};

}  // namespace zenith::detail
