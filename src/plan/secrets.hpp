// The sandbox's side of credential injection (DESIGN.md §6): reading each
// secret's value on the host, its placeholder, the masked copies of credential
// files and the trust bundle. compile() puts the results into the Plan.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "plan/secret.hpp"
#include "plan/plan.hpp"
#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::plan {

// "exg_ph_<NAME>_<32 hex from getrandom>": unique per sandbox, recognisable.
Result<std::string> make_placeholder(const std::string& name);

// Whether `host` (a secret's host pattern) is wholly allowed by the network
// rules: some allowedDomains entry covers it and no deniedDomains entry does.
// Nothing when it is; otherwise why not.
std::optional<std::string> secret_host_refusal(const std::string& host, const policy::Network& net);

struct ResolvedSecrets {
  std::vector<Secret> secrets;
  std::map<std::string, std::string> env;  // NAME -> what the variable holds inside (placeholders only)
  std::vector<std::string> source_files;   // canonical host files values were read from: never readable inside
  std::vector<std::string> dropped;        // optional secrets whose source is absent (not declared this run)
};

// Reads every secret's value (the invoking process's environment, or a file),
// makes its placeholder and checks its hosts. `home` is the canonical HOME.
Result<ResolvedSecrets> resolve_secrets(const policy::Policy& pol, const Context& ctx, const std::string& home);

// Every secret's value replaced by its placeholder (longest value first).
std::string mask_values(std::string text, const std::vector<Secret>& secrets);

// File steps for the policy's secretFiles: the host file read now, every
// secret value in it replaced by its placeholder. Each named secret's value
// must be in the file (a mistake otherwise).
// `dropped`: optional secrets left out (resolve_secrets), which an entry may name.
Result<std::vector<Step>> masked_file_steps(const policy::Policy& pol, const std::vector<Secret>& secrets,
                                            const std::string& home, const std::vector<std::string>& dropped = {});

// The CA bundle the sandbox trusts: File steps (trust_bundle) over the system
// bundle paths that exist here, or one under /run/exguardian when none does.
// Sets plan.trust_bundle_path and plan.host_trust_bundle.
std::vector<Step> trust_bundle_steps(Plan& plan);

// The variables that point clients at the trust bundle.
extern const std::vector<std::string> kCaEnvNames;

}  // namespace exg::plan
