// exguardian-init --walls JSON -- COMMAND [ARGS...]: ExGuardian's walls
// (microvm/guest/walls.hpp: Landlock, then the errno-only seccomp filter)
// put up in the process itself, stacked on whatever the OCI runtime applied,
// then COMMAND exec'd in its place (no fork: the engine's process stays the
// one it started, with its pid). `exguardian runtime` (runtime/harden.hpp)
// prepends this to every process of a container, the first and each exec'd
// one: the kernel ANDs seccomp filters, so an engine's own profile is only
// ever narrowed, never replaced.
#pragma once

namespace exg::init {

// Does not return on success; on failure one line on stderr and 125
// (nothing of COMMAND ran).
int exec_with_walls(const char* walls_json, char** argv);

}  // namespace exg::init
