// The container and gVisor layers' answer for this host (doctor, recommend,
// `--layer auto`: doctor/host_caps.hpp): crun, runc and runsc in PATH with
// their versions, then the layers as a run would set them up here. In doctor's order.
#pragma once
#include <vector>

#include "util/host_probe.hpp"

namespace exg::oci {

void probe_host(std::vector<util::Capability>& out);

}  // namespace exg::oci
