# -DEXG_SANITIZE=ON: AddressSanitizer and UndefinedBehaviorSanitizer on
# everything that links exg_core (exguardian, the unit tests, the benchmark),
# for `make test-asan`. Any finding aborts the process (no recovery), so a test
# that provokes one fails. exguardian-init stays as it is: a static program
# (pid 1 of containers and gVisor), which the sanitizers' runtimes cannot be.
option(EXG_SANITIZE "build exg_core and what links it with -fsanitize=address,undefined" OFF)
if(EXG_SANITIZE)
  set(EXG_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # -O1: the usual trade for ASan (fast enough, readable stacks, shorter builds).
  target_compile_options(exg_core PUBLIC ${EXG_SANITIZE_FLAGS} -O1)
  target_link_options(exg_core PUBLIC -fsanitize=address,undefined)
  # A static libstdc++ in the executable would bring its own operator new and
  # delete ahead of the ones ASan provides (mismatches would go unseen).
  get_target_property(exg_cli_link_options exguardian LINK_OPTIONS)
  list(REMOVE_ITEM exg_cli_link_options -static-libstdc++ -static-libgcc)
  set_target_properties(exguardian PROPERTIES LINK_OPTIONS "${exg_cli_link_options}")
endif()
