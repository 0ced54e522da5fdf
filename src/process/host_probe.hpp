// The process layer's answer for this host (doctor, recommend, `--layer auto`:
// doctor/host_caps.hpp): the namespaces, seccomp and Landlock it builds every
// sandbox with, and (`all`) idmapped mounts, overlayfs in a user namespace and
// the cgroup controllers its limits need. In doctor's order; each probe that
// changes anything does so in a forked child's own namespaces.
#pragma once
#include <vector>

#include "util/host_probe.hpp"

namespace exg::process {

void probe_host(std::vector<util::Capability>& out, bool all);

}  // namespace exg::process
