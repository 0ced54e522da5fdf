// `exguardian-init --seccomp`: pid 1 installs the sandbox's seccomp filter
// itself, first thing, so that it and everything it starts run under it.
// The gVisor layer uses it instead of runsc --oci-seccomp: runsc compiled the
// profile's ~200 rules (JSON) at every start (~12 ms under ptrace), where this
// is the process layer's rules compiled at build time, answered in errno form
// (gVisor has no seccomp notify), plus the pid-1 signal shield that runsc's
// profile carried (walls/seccomp.hpp).
#pragma once
#include <string>

namespace exg::init {

// no_new_privs, the errno program, the shield: "" once all three hold, else
// what failed (pid 1 then runs nothing).
std::string install_sandbox_seccomp();

}  // namespace exg::init
