#pragma once
// The command that compiles generated kernels' host translation for the stand-in GPU: the
// build's compiler and flags (ZENITH_TEST_CXX, ZENITH_TEST_KERNEL_FLAGS) with the shim that the
// build precompiled with them (tests/CMakeLists.txt; clang reads it with -include-pch, GCC finds
// the .gch in an include directory). Without it, most of such a compile is parsing the shim's
// standard headers.
#include <filesystem>
#include <string>

namespace emulated {

inline std::string host_compile_command(std::filesystem::path const& cpp,
                                        std::filesystem::path const& so) {
  std::filesystem::path pch = ZENITH_TEST_SHIM_PCH;
  std::string use_pch = pch.extension() == ".pch" ? "-include-pch " + pch.string()
                                                  : "-I" + pch.parent_path().string();
  return std::string(ZENITH_TEST_CXX) + " " + ZENITH_TEST_KERNEL_FLAGS + " -shared " + use_pch +
         " -I" + ZENITH_TEST_INCLUDE + " -I" + ZENITH_TEST_SHIM_DIR + " " + cpp.string() + " -o " +
         so.string();
}

}  // namespace emulated
