# zenith_precompiled_runtime(<target>... [NAME <library>])
#
# Compiles zenith's runtime (the IR's interpreter and derivative rules, the tape's runtime:
# include/zenith/core/runtime_instance.hpp) once, into a static library, and builds the targets
# against it: each is compiled with ZENITH_PRECOMPILED_RUNTIME and links the library, so none of
# their files compiles the runtime again. A program of several files that differentiate then
# builds faster, and a program of one file builds its runtime beside itself, on another core.
#
# The library is compiled with the first target's options, definitions and include directories
# (everything it gets from the libraries it links as well, e.g. -march and ZENITH_WITH_NVRTC from
# zenith::zenith): it holds the same code the program would otherwise compile, and one definition
# is kept of each. Call it after the first target's flags are set. The other targets must be
# compiled the same way (same -march, same zenith target); a program whose configuration differs
# from its runtime's fails to link, naming the configuration it needs
# (zenith::detail::runtime_built_for_...). NAME names the library (default <target>_zenith_runtime).
include_guard(GLOBAL)
# The source: src/ in zenith's tree; an installed package's config names its installed copy.
if(NOT ZENITH_RUNTIME_SOURCE_FILE)
  set(ZENITH_RUNTIME_SOURCE_FILE "${CMAKE_CURRENT_LIST_DIR}/../src/zenith_runtime.cpp"
      CACHE INTERNAL "zenith's precompiled runtime source")
endif()

function(zenith_precompiled_runtime first)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "NAME" "")
  set(name ${first}_zenith_runtime)
  if(arg_NAME)
    set(name ${arg_NAME})
  endif()
  if(NOT EXISTS "${ZENITH_RUNTIME_SOURCE_FILE}")
    message(FATAL_ERROR "zenith_precompiled_runtime: ${ZENITH_RUNTIME_SOURCE_FILE} not found")
  endif()
  foreach(t ${first} ${arg_UNPARSED_ARGUMENTS})
    if(NOT TARGET ${t})
      message(FATAL_ERROR "zenith_precompiled_runtime: no target '${t}'")
    endif()
  endforeach()
  add_library(${name} STATIC "${ZENITH_RUNTIME_SOURCE_FILE}")
  # The transitive values: the first target's own and those of everything it links.
  set_target_properties(${name} PROPERTIES
    COMPILE_OPTIONS "$<TARGET_PROPERTY:${first},COMPILE_OPTIONS>"
    COMPILE_DEFINITIONS "$<TARGET_PROPERTY:${first},COMPILE_DEFINITIONS>"
    POSITION_INDEPENDENT_CODE ON)
  # As system directories: the warnings of zenith's headers are the program's to report, and a
  # library's headers (cblas.h) stay out of -Werror as they are for the program.
  target_include_directories(${name} SYSTEM PRIVATE
                             "$<TARGET_PROPERTY:${first},INCLUDE_DIRECTORIES>")
  foreach(p CXX_STANDARD CXX_EXTENSIONS)
    get_target_property(v ${first} ${p})
    if(NOT v STREQUAL "v-NOTFOUND")
      set_target_properties(${name} PROPERTIES ${p} "${v}")
    endif()
  endforeach()
  target_compile_features(${name} PRIVATE cxx_std_20)
  foreach(t ${first} ${arg_UNPARSED_ARGUMENTS})
    target_compile_definitions(${t} PRIVATE ZENITH_PRECOMPILED_RUNTIME)
    target_link_libraries(${t} PRIVATE ${name})
  endforeach()
endfunction()
