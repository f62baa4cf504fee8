# Configures tests/consumer_subdir (posenc through add_subdirectory) with no
# build type, checks that posenc forced none into the parent's cache, then
# builds and runs the consumer. Unoptimised (no build type) on purpose: it
# is the parent's choice, and it keeps this extra library build short.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR} -G Ninja
                -DPOSENC_SOURCE_DIR=${POSENC_SOURCE_DIR} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the add_subdirectory consumer failed: ${rc}")
endif()
file(STRINGS ${WORK_DIR}/CMakeCache.txt build_type REGEX "^CMAKE_BUILD_TYPE:")
if(NOT build_type STREQUAL "CMAKE_BUILD_TYPE:STRING=")
  message(FATAL_ERROR "posenc changed the parent's build type: '${build_type}'")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR} --target consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the add_subdirectory consumer failed: ${rc}")
endif()
execute_process(COMMAND ${WORK_DIR}/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the add_subdirectory consumer returned ${rc}")
endif()
