// exguardian runtime ... (also reached as exguardian-runtime[-HANDLER]): a
// runc-compatible OCI runtime for Podman, Docker, containerd and Kubernetes
// (issue 17; docs/kubernetes.md). It wraps crun (runsc for a gVisor
// handler), rewrites the bundle's config.json on create (runtime/harden.hpp) and
// gives each container its own egress proxy (runtime/egress_holder.hpp).
#pragma once
#include <string>

namespace exg::cli {

// argv after "runtime" (or after the program name when invoked as
// exguardian-runtime*); `argv0_handler` is the handler named by the program
// name (exguardian-runtime-gvisor -> "gvisor"), "" if none.
int runtime_main(int argc, char** argv, const std::string& argv0_handler);

}  // namespace exg::cli
