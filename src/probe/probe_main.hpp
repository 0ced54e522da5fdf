// `exguardian probe NAME` and exguardian-probe: one probe of src/probe/probes.cpp
// run and reported (the same code in both programs).
#pragma once
#include <string>

namespace exg::probe {

// Exit 0 when the probe behaved as a sandbox requires, 1 when not, 2 unknown.
// `tag`: the process name the probe takes (escape-test's batches credit audit lines by it).
int probe_main(const std::string& name, bool list, const std::string& tag);

}  // namespace exg::probe
