# zenith's dependencies, found the same way in the build tree and after installation.
include_guard(GLOBAL)
find_package(Threads REQUIRED)
find_package(xtl QUIET)  # Debian's xsimd target names xtl
find_package(xsimd REQUIRED)
if(NOT TARGET zenith::openblas)
  # Debian's OpenBLASConfig.cmake sets variables only; wrap them in a target.
  find_package(OpenBLAS CONFIG QUIET)
  if(OpenBLAS_FOUND)
    set(_zenith_blas_inc ${OpenBLAS_INCLUDE_DIRS})
    set(_zenith_blas_lib ${OpenBLAS_LIBRARIES})
  else()
    find_path(_zenith_blas_inc cblas.h PATH_SUFFIXES openblas)
    find_library(_zenith_blas_lib NAMES openblas)
  endif()
  if(NOT _zenith_blas_inc OR NOT _zenith_blas_lib)
    message(FATAL_ERROR "zenith: OpenBLAS (CBLAS) not found; install libopenblas-dev")
  endif()
  add_library(zenith::openblas INTERFACE IMPORTED)
  set_target_properties(zenith::openblas PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_zenith_blas_inc}"
    INTERFACE_LINK_LIBRARIES "${_zenith_blas_lib}")
endif()
# The CUDA toolkit, for the CUDA backend's NVRTC (optional: ZENITH_CUDA in CMakeLists.txt).
# zenith::nvrtc is NVRTC alone: CMake's CUDA::nvrtc also links the driver (libcuda), which only a
# machine with a GPU driver has, so a program linked to it would not even start without one.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND AND CUDA_nvrtc_LIBRARY AND NOT TARGET zenith::nvrtc)
  add_library(zenith::nvrtc INTERFACE IMPORTED)
  set_target_properties(zenith::nvrtc PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${CUDA_nvrtc_LIBRARY}")
endif()
