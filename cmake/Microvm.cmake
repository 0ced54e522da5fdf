# The microVM layer's guest (src/microvm/): the static guest init, and the
# kernel and initramfs built from Debian's kernel package into
# ${CMAKE_BINARY_DIR}/microvm (cmake/microvm_guest_image.py). The .deb is
# fetched once with `apt-get download` and kept there; nothing is downloaded
# when a sandbox runs. EXG_MICROVM_KERNEL_DEB names a .deb to use instead.
# The host side (src/microvm/*.cpp, not guest/) is part of exg_core, with the one
# engine of the egress channel both ends run (guest/egress_mux.cpp).
file(GLOB EXG_MICROVM_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/microvm/*.cpp)
target_sources(exg_core PRIVATE ${EXG_MICROVM_SOURCES} ${CMAKE_SOURCE_DIR}/src/microvm/guest/egress_mux.cpp)

option(EXG_MICROVM_GUEST "Build the microVM layer's guest kernel and initramfs" ON)
set(EXG_MICROVM_KERNEL_DEB "" CACHE FILEPATH "A linux-image-*-amd64 .deb for the microVM guest (default: apt-get download)")

# The walls the init puts around the agent reuse the process layer's code
# (Landlock, the prebuilt errno-only seccomp program, rlimits), not libseccomp;
# transparent egress the process layer's netlink capture (capture_rules.cpp).
add_executable(exguardian-guest-init src/microvm/guest/init.cpp src/microvm/guest/walls_apply.cpp
               src/microvm/guest/egress_mux.cpp src/agent/agent.cpp src/agent/file_metadata.cpp src/agent/protocol.cpp src/util/json_parse.cpp src/walls/landlock.cpp
               src/walls/seccomp_prebuilt.cpp src/walls/seccomp_install.cpp src/walls/rlimits.cpp
               src/walls/capture_rules.cpp)
add_dependencies(exguardian-guest-init exg_seccomp_inc)
target_include_directories(exguardian-guest-init PRIVATE src ${CMAKE_BINARY_DIR}/generated)
target_link_libraries(exguardian-guest-init PRIVATE nlohmann_json::nlohmann_json)
target_link_options(exguardian-guest-init PRIVATE -static)

if(EXG_MICROVM_GUEST)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(dir ${CMAKE_BINARY_DIR}/microvm)
  set(deb_arg)
  if(EXG_MICROVM_KERNEL_DEB)
    set(deb_arg --deb ${EXG_MICROVM_KERNEL_DEB})
  endif()
  add_custom_command(
    OUTPUT ${dir}/vmlinux ${dir}/initramfs.cpio ${dir}/kernel-version
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${CMAKE_STRIP} --strip-all -o ${dir}/guest-init $<TARGET_FILE:exguardian-guest-init>
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/cmake/microvm_guest_image.py --out ${dir} --init ${dir}/guest-init ${deb_arg}
    DEPENDS exguardian-guest-init ${CMAKE_SOURCE_DIR}/cmake/microvm_guest_image.py
    COMMENT "microVM guest: kernel from Debian's linux-image package, initramfs with the guest init"
    VERBATIM)
  add_custom_target(microvm-guest ALL DEPENDS ${dir}/vmlinux ${dir}/initramfs.cpio)
  # Where an installed exguardian looks (bin/../lib/exguardian/microvm: microvm/guest_image.cpp):
  # `make install` and `make deb` carry the guest, so the layer works from the package too.
  install(FILES ${dir}/vmlinux ${dir}/initramfs.cpio ${dir}/kernel-version DESTINATION ${EXG_INSTALL_PKGLIBDIR}/microvm)
endif()
