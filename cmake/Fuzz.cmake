# The fuzz targets (fuzz/, a project of its own built with clang++-16) as the
# target exg_fuzz of this build, in <build>/fuzz; and fuzz.smoke, the ctest
# test that replays every seed and regression input and fuzzes each target for
# a few seconds (`make test` builds exg_fuzz first; `make fuzz` runs longer).
# Not part of `all`: a developer's ordinary build stays as fast as it was.
if(EXG_SANITIZE)
  return()  # the ASan build of cmake/Sanitize.cmake needs none of this
endif()
include(ExternalProject)
find_program(EXG_FUZZ_CXX NAMES clang++-16)
if(EXG_FUZZ_CXX)
  set(exg_fuzz_args -DCMAKE_CXX_COMPILER=${EXG_FUZZ_CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    list(APPEND exg_fuzz_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
  endif()
  cmake_host_system_information(RESULT exg_cores QUERY NUMBER_OF_LOGICAL_CORES)
  ExternalProject_Add(exg_fuzz
    SOURCE_DIR ${CMAKE_SOURCE_DIR}/fuzz
    BINARY_DIR ${CMAKE_BINARY_DIR}/fuzz
    CMAKE_ARGS ${exg_fuzz_args}
    BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> -j ${exg_cores}
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON
    EXCLUDE_FROM_ALL ON)
else()
  add_custom_target(exg_fuzz
    COMMAND ${CMAKE_COMMAND} -E echo "exg_fuzz: clang++-16 not found (make deps installs clang-16, libclang-rt-16-dev and lld)"
    COMMAND false)
endif()
# 1 s of fuzzing per target after the replay (a smoke: `make fuzz` is the long run). Each run
# takes about 1.4 s more than its budget (start-up, the seeds again, the leak check at exit):
# at 2 s the seventeen targets took 71 s here, at 1 s 54 s (CI's budget is tight).
add_test(NAME fuzz.smoke COMMAND bash ${CMAKE_SOURCE_DIR}/fuzz/run.sh ${CMAKE_BINARY_DIR}/fuzz 1)
set_tests_properties(fuzz.smoke PROPERTIES TIMEOUT 300)
