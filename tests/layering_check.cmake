# The layers' include rules (shared/DESIGN.md, issue #33): one backend never includes the other,
# and the autodiff, IR and transforms layers reach the CUDA backend's lowering only through what
# their nodes expose (backend/cuda/lower.hpp), never by including it. Fails naming every header
# and include that breaks a rule.
#   cmake -DINCLUDE=<repo>/include -P tests/layering_check.cmake
if(NOT INCLUDE)
  message(FATAL_ERROR "layering_check: pass -DINCLUDE=<the include folder>")
endif()
set(root "${INCLUDE}/zenith")
# folder (under include/zenith) | folders its headers must not include
set(rules
  "backend/cpu|backend/cuda"
  "backend/cuda|backend/cpu"
  "core|backend/cpu backend/cuda autodiff transforms"
  "expr|backend/cpu backend/cuda autodiff transforms"
  "autodiff|backend/cuda transforms"
  "ir|backend/cuda transforms")
set(broken "")
set(checked 0)
foreach(rule ${rules})
  string(REPLACE "|" ";" parts "${rule}")
  list(GET parts 0 folder)
  list(GET parts 1 banned)
  string(REPLACE " " ";" banned "${banned}")
  file(GLOB_RECURSE headers "${root}/${folder}/*.hpp")
  foreach(h ${headers})
    math(EXPR checked "${checked} + 1")
    file(STRINGS "${h}" lines REGEX "^#include \"")
    get_filename_component(dir "${h}" DIRECTORY)
    foreach(line ${lines})
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
      get_filename_component(target "${dir}/${inc}" ABSOLUTE)
      file(RELATIVE_PATH rel "${root}" "${target}")
      foreach(b ${banned})
        if(rel MATCHES "^${b}/")
          file(RELATIVE_PATH hrel "${root}" "${h}")
          string(APPEND broken "\n  ${hrel} includes ${rel}")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "layering_check: no headers under ${root}")
endif()
if(broken)
  message(FATAL_ERROR "layering_check: includes across layers:${broken}")
endif()
message(STATUS "layering_check: ${checked} headers follow the include rules")
