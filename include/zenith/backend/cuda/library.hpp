#pragma once
// Opening a CUDA library at run time (cuBLAS, cuDNN): a program links none of them, so it starts
// on any machine, and where one is missing, what needed it says why.
#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <type_traits>

namespace zenith::cuda_backend::detail {

// The first of names that dlopen opens; null where none does, with why saying so.
inline void* open_library(char const* what, std::initializer_list<char const*> names,
                          std::string& why) {
  std::string first;
  for (char const* name : names) {
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
    char const* e = dlerror();
    if (first.empty() && e) first = e;
  }
  why = std::string(what) + " cannot be opened (" + first + ")";
  return nullptr;
}

// fn = lib's symbol name; where lib lacks it, missing says so (the first such only).
template <class Fn>
void bind_symbol(void* lib, Fn& fn, char const* what, char const* name, std::string& missing) {
  fn = reinterpret_cast<std::remove_reference_t<Fn>>(dlsym(lib, name));
  if (!fn && missing.empty()) missing = std::string(what) + " lacks " + name + " (too old?)";
}

}  // namespace zenith::cuda_backend::detail
