// The microVM layer's answer for this host (doctor, recommend, `--layer auto`:
// doctor/host_caps.hpp): qemu at the one path the layer runs, the guest image,
// /dev/kvm and whether a guest really boots under KVM, and (`all`) the
// template cache. In doctor's order.
#pragma once
#include <vector>

#include "util/host_probe.hpp"

namespace exg::microvm {

void probe_host(std::vector<util::Capability>& out, bool all);

// "microvm templates": where the microVM layer's saved templates are written
// for this user, how many and how big, and their bound (snapshot.hpp).
util::Capability template_cache_capability();

}  // namespace exg::microvm
