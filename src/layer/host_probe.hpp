// Every layer's answer for this host, in doctor's order (process, container
// and gVisor, microVM): each layer's probes are its own (process/, oci/ and
// microvm/host_probe.hpp), put together in layer/factory.cpp, the one place
// that knows every layer. `all` false: only what the layers' availability is
// decided from (sandbox/host_caps.hpp probe_for_layers()).
#pragma once
#include <vector>

#include "util/host_probe.hpp"

namespace exg::layer {

void probe_host(std::vector<util::Capability>& out, bool all);

}  // namespace exg::layer
