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

# In the ordinary build: asan.unit_tests, the ctest test that runs the unit
# tests of <build>/asan, built with the sanitizers by tests/make_test.sh
# (`make test`, while the rest of the suite runs) or by `make test-asan`.
if(NOT EXG_SANITIZE)
  add_test(NAME asan.unit_tests COMMAND ${CMAKE_SOURCE_DIR}/tests/asan/run_unit_tests.sh ${CMAKE_BINARY_DIR}/asan)
  set_tests_properties(asan.unit_tests PROPERTIES TIMEOUT 900)
endif()
