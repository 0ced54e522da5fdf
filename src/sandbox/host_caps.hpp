// What this host and this user can enforce, measured (not guessed): each probe
// runs in a forked child, in its own namespaces where it changes anything, and
// leaves nothing behind on the host.
#pragma once
#include <string>
#include <vector>

namespace exg::sandbox {

struct Capability {
  std::string name;    // e.g. "user namespaces"
  bool ok = false;
  std::string detail;  // one line: why, and what the sandbox uses it for
};

// Every probe, in a fixed order (names are stable: tests and `doctor --json`
// consumers rely on them).
std::vector<Capability> probe_host();

// The probes the layers' availability is decided from (advice.hpp
// layer_status), as probe_host() makes them: what `--layer auto` probes
// before a run, without doctor's other probes.
std::vector<Capability> probe_for_layers();

// "microvm templates": where the microVM layer's saved templates are written
// for this user, how many and how big, and their bound (microvm/snapshot.hpp).
Capability template_cache_capability();

// The capability called `name` in `caps`, or null.
const Capability* find_capability(const std::vector<Capability>& caps, const std::string& name);

}  // namespace exg::sandbox
