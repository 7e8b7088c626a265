#pragma once
// The command that compiles a generated kernel's host translation for the stand-in GPU: the
// build's compiler (ZENITH_TEST_CXX) at -O0 with the shim precompiled by the build
// (tests/CMakeLists.txt; clang reads it with -include-pch, GCC finds the .gch in an include
// directory). Most of such a compile was parsing the shim's standard headers.
#include <filesystem>
#include <string>

namespace emulated {

inline std::string host_compile_command(std::filesystem::path const& cpp,
                                        std::filesystem::path const& so) {
  std::filesystem::path pch = ZENITH_TEST_SHIM_PCH;
  std::string use_pch = pch.extension() == ".pch" ? "-include-pch " + pch.string()
                                                  : "-I" + pch.parent_path().string();
  return std::string(ZENITH_TEST_CXX) + " -std=c++20 -O0 -shared -fPIC -w " + use_pch + " -I" +
         ZENITH_TEST_INCLUDE + " -I" + ZENITH_TEST_SHIM_DIR + " " + cpp.string() + " -o " +
         so.string();
}

}  // namespace emulated
