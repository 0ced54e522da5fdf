// filesystem.makeDirs: the directories a policy names to be made on the host
// before a run (an agent's first-run directories under protected names, which
// made inside would be quarantined by the sweep as planted).
#pragma once
#include <string>
#include <vector>

#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::cli {

// Each makeDirs entry must lie in an allowWrite tree or the workspace (it
// grants nothing the sandbox could not do itself there): an error names the
// entry and where it was written. With `make`, the missing ones are made
// (mode 0700, as the agents make theirs), parents first, each said on stderr;
// one that cannot be made is said and left to the run. Returns, for a plan's
// notes, what was (or, without `make`, would be) made.
Result<std::vector<std::string>> make_policy_dirs(const policy::Policy& pol, const std::string& home,
                                                  const std::string& workspace, bool make);

}  // namespace exg::cli
