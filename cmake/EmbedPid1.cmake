# The static pid-1 program of the container and gVisor sandboxes (exguardian-init
# today, the agent later), carried inside exguardian so that one copied binary
# runs every layer, and installed beside it for the layer to bind when its bytes
# are the same (src/pid1/provide.hpp).
#
#   exg_embed_pid1(TARGET)
#
# strips TARGET's executable to pid1/TARGET in the build tree, makes the static
# library exg_pid1_image holding those bytes behind exg::pid1::embedded()
# (src/pid1/image.hpp), and installs the same file as
# ${EXG_INSTALL_PKGLIBDIR}/TARGET. Naming another program is this one call.
include(GNUInstallDirs)
set(EXG_INSTALL_PKGLIBDIR "lib/exguardian" CACHE STRING
    "Where the sandbox's pid-1 program is installed, relative to the prefix")

function(exg_embed_pid1 target)
  set(dir ${CMAKE_BINARY_DIR}/pid1)
  set(image ${dir}/${target})
  add_custom_command(OUTPUT ${image}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${CMAKE_STRIP} --strip-all -o ${image} $<TARGET_FILE:${target}>
    DEPENDS ${target}
    COMMENT "Stripping ${target}, the sandbox's pid 1, to embed it in exguardian"
    VERBATIM)
  # The installed copy, as the binary in bin/ reaches it.
  file(RELATIVE_PATH relpath /prefix/${CMAKE_INSTALL_BINDIR} /prefix/${EXG_INSTALL_PKGLIBDIR}/${target})
  set(EXG_PID1_IMAGE ${image})
  set(EXG_PID1_NAME ${target})
  set(EXG_PID1_RELPATH ${relpath})
  configure_file(${CMAKE_SOURCE_DIR}/src/pid1/embedded.cpp.in ${dir}/embedded.cpp @ONLY)
  # Re-assembled whenever the program changes (.incbin reads the file).
  set_source_files_properties(${dir}/embedded.cpp PROPERTIES OBJECT_DEPENDS ${image})
  add_library(exg_pid1_image STATIC ${dir}/embedded.cpp ${image})
  target_include_directories(exg_pid1_image PRIVATE ${CMAKE_SOURCE_DIR}/src)
  install(FILES ${image} DESTINATION ${EXG_INSTALL_PKGLIBDIR}
          PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endfunction()
