# OpenSSL and zlib in exguardian, bound on first use (cmake/lazy_stubs.py says
# why and how; util/lazy_libs.cpp is the binder): the stubs are generated from
# the functions exguardian's objects call, and with --as-needed the libraries
# are then no DT_NEEDED of the binary. The build fails if one still is, or if
# any library but libc and its loader is one (libm came in unnoticed once). The
# sanitizer build links them as usual (its runtime wants to see every library).
if(NOT EXG_SANITIZE)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(EXG_LAZY_STUBS ${CMAKE_BINARY_DIR}/generated/lazy_stubs.cpp)
  set(EXG_LAZY_LIST ${CMAKE_BINARY_DIR}/generated/lazy_libs.txt)
  add_custom_command(OUTPUT ${EXG_LAZY_STUBS} ${EXG_LAZY_LIST}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/generated
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/cmake/lazy_stubs.py
            --out ${EXG_LAZY_STUBS} --list-out ${EXG_LAZY_LIST}
            --lib $<TARGET_FILE:OpenSSL::SSL> --lib $<TARGET_FILE:OpenSSL::Crypto> --lib $<TARGET_FILE:ZLIB::ZLIB>
            $<TARGET_OBJECTS:exg_cli> $<TARGET_FILE:exg_service> $<TARGET_FILE:exg_core>
    COMMAND_EXPAND_LISTS
    DEPENDS exg_cli exg_service exg_core $<TARGET_FILE:exg_service> $<TARGET_FILE:exg_core> ${EXG_CLI_SOURCES} ${CMAKE_SOURCE_DIR}/cmake/lazy_stubs.py
    COMMENT "Lazy-binding stubs for OpenSSL and zlib")
  target_sources(exguardian PRIVATE ${EXG_LAZY_STUBS})
  add_custom_command(TARGET exguardian POST_BUILD
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/cmake/lazy_stubs.py --check-binary $<TARGET_FILE:exguardian>
            --list-in ${EXG_LAZY_LIST}
    VERBATIM)
endif()
