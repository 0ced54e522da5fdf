// `exguardian oci-init -- COMMAND...`: pid 1 inside a container layer.
#pragma once

namespace exg::cli {

// argv: COMMAND [ARGS...] (after "--"). Never returns on success paths.
int oci_init_main(int argc, char** argv);

}  // namespace exg::cli
