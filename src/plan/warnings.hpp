// What a policy asks that is probably not what was meant, said on stderr at
// every run (issue 40), not only with -v: a deny that names nothing that
// exists (it denies nothing, and what the run makes there is as writable as
// its directory), and an allowWrite that holds HOME (every rc file, key and
// cache there writable and persistent). Legal, so warnings, not errors.
#pragma once
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "policy/policy.hpp"

namespace exg::plan {

// `plan` is what compile() made of `pol`; `home` is the invoking user's HOME
// as given (canonicalised here). One line each, without a prefix.
std::vector<std::string> policy_warnings(const policy::Policy& pol, const Plan& plan, const std::string& home);

}  // namespace exg::plan
