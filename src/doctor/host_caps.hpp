// What this host and this user can enforce, measured (not guessed): each probe
// runs in a forked child, in its own namespaces where it changes anything, and
// leaves nothing behind on the host. Each layer answers for its own probes
// (process/, oci/ and microvm/host_probe.hpp); these add what every layer needs.
#pragma once
#include <string>
#include <vector>

#include "util/host_probe.hpp"

namespace exg::doctor {

using Capability = util::Capability;  // (util/host_probe.hpp)

// Every probe, in a fixed order (names are stable: tests and `doctor --json`
// consumers rely on them).
std::vector<Capability> probe_host();

// The probes the layers' availability is decided from (advice.hpp
// layer_status), as probe_host() makes them: what `--layer auto` probes
// before a run, without doctor's other probes.
std::vector<Capability> probe_for_layers();

// The capability called `name` in `caps`, or null.
const Capability* find_capability(const std::vector<Capability>& caps, const std::string& name);

}  // namespace exg::doctor
