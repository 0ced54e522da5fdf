# -DEXG_SANITIZE=ON: AddressSanitizer and UndefinedBehaviorSanitizer on
# everything that links exg_core (exguardian, the unit tests, the benchmark),
# for `make test-asan`. Any finding aborts the process (no recovery), so a test
# that provokes one fails. exguardian-init stays as it is: a static program
# (pid 1 of containers and gVisor), which the sanitizers' runtimes cannot be.
option(EXG_SANITIZE "build exg_core and what links it with -fsanitize=address,undefined" OFF)
if(EXG_SANITIZE)
  set(EXG_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # -O0 -g1: the build is what costs (CI: 2 cores); line tables are enough for
  # the reports' stacks. Measured on intercept_session.cpp: 14 s at -O0 -g1,
  # 25 s at -O1 -g; the tests under it are bound by the kernel, not the CPU.
  target_compile_options(exg_core PUBLIC ${EXG_SANITIZE_FLAGS} -O0 -g1)
  target_link_options(exg_core PUBLIC -fsanitize=address,undefined)
  # A static libstdc++ in the executable would bring its own operator new and
  # delete ahead of the ones ASan provides (mismatches would go unseen).
  get_target_property(exg_cli_link_options exguardian LINK_OPTIONS)
  list(REMOVE_ITEM exg_cli_link_options -static-libstdc++ -static-libgcc)
  set_target_properties(exguardian PROPERTIES LINK_OPTIONS "${exg_cli_link_options}")
endif()

# In the ordinary build: the unit tests built again with the sanitizers, in
# <build>/asan (target exg_asan_unit, not part of `all`; `make test` builds it),
# and asan.unit_tests, the ctest test that runs them. `make test-asan` builds
# more of that tree and runs the integration tests of the supervisor and the
# proxy in it too.
if(NOT EXG_SANITIZE)
  include(ExternalProject)
  set(exg_asan_args -DEXG_SANITIZE=ON -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE})
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    list(APPEND exg_asan_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
  endif()
  cmake_host_system_information(RESULT exg_cores QUERY NUMBER_OF_LOGICAL_CORES)
  ExternalProject_Add(exg_asan_unit
    SOURCE_DIR ${CMAKE_SOURCE_DIR}
    BINARY_DIR ${CMAKE_BINARY_DIR}/asan
    CMAKE_ARGS ${exg_asan_args}
    BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> -j ${exg_cores} --target exg_unit_tests
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON
    EXCLUDE_FROM_ALL ON)
  add_test(NAME asan.unit_tests COMMAND ${CMAKE_SOURCE_DIR}/tests/asan/run_unit_tests.sh ${CMAKE_BINARY_DIR}/asan)
  set_tests_properties(asan.unit_tests PROPERTIES TIMEOUT 900)
endif()
