# Compiles SRC, which must fail, with output containing the text after "// expect: ".
file(STRINGS ${SRC} first LIMIT_COUNT 1)
string(REGEX REPLACE "^// expect: " "" expect "${first}")
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${EXTRA} ${SRC}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SRC} compiled, but must not")
endif()
string(FIND "${out}${err}" "${expect}" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "${SRC} failed without '${expect}':\n${err}")
endif()
