# Installs zenith into a scratch prefix and builds a consumer with find_package(zenith CONFIG),
# then builds the same consumer through add_subdirectory.
file(REMOVE_RECURSE ${WORK})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGV}\n${out}\n${err}")
  endif()
endfunction()
run(${CMAKE_COMMAND} -S ${SRC} -B ${WORK}/build -DZENITH_BUILD_TESTS=OFF -DZENITH_BUILD_BENCH=OFF
    -DZENITH_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX=${WORK}/prefix)
run(${CMAKE_COMMAND} --install ${WORK}/build)
foreach(mode find_package add_subdirectory)
  run(${CMAKE_COMMAND} -S ${SRC}/tests/consumer -B ${WORK}/consumer_${mode} -DMODE=${mode}
      -DZENITH_SOURCE=${SRC} -DCMAKE_PREFIX_PATH=${WORK}/prefix)
  run(${CMAKE_COMMAND} --build ${WORK}/consumer_${mode})
  run(${WORK}/consumer_${mode}/consumer)
  run(${WORK}/consumer_${mode}/consumer_host)
  if(mode STREQUAL "find_package")
    run(${WORK}/consumer_${mode}/consumer_runtime)
  endif()
endforeach()
