// `exguardian oci-init -- COMMAND...`: pid 1 inside a container layer.
#pragma once

namespace exg::init {

// argv: COMMAND [ARGS...] (after "--"), or "--agent" FD. Never returns on
// success paths. `fresh_signals`: the runtime made this process with every
// signal at its default disposition (gVisor's own kernel does: nothing is
// inherited from the host), so the command needs no reset of the ones an
// ignoring caller would pass on (64 calls, each a trap under gVisor).
int oci_init_main(int argc, char** argv, bool fresh_signals = false);

}  // namespace exg::init
