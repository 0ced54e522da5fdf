// The options that turn a policy and flags into a Plan, shared by every command
// that compiles one (run, oci-spec, docker-args): the same flags mean the same
// sandbox whichever way it is enforced or exported.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/checked_subcommand.hpp"
#include "plan/plan.hpp"
#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::cli {

// A Plan and the merged policy it came from (layer, audit log, ... are read from it).
struct BuiltPlan {
  plan::Plan plan;
  policy::Policy policy;
};

struct PlanOptions {
  std::vector<std::string> policy_files;  // --policy, repeatable: merged in order
  std::string settings;                   // --settings: srt's option; read instead of ~/.srt-settings.json
  std::string workspace, timeout, memory, pids, cpus, workspace_mode = "live", keep, workspace_at, user_name;
  std::string scratch_disk;  // --scratch-disk
  std::vector<std::string> allow_write, deny_write, deny_read, allow_read, allow_domain, env;
  bool no_policy_files = false, unsafe_no_seccomp = false, allow_planted = false, dns = false;
  // COMMAND [ARGS...]: set by main() from everything after the first "--"
  // (explicit_command), else taken from the subcommand's remaining words.
  std::vector<std::string> command;
  bool explicit_command = false;
  // The plan is exported (oci-spec, docker-args), not run by ExGuardian: no
  // supervisor, so no transparent egress (off unless the policy asks for it,
  // which is then an error).
  bool exported = false;
  // The plan is run now (not --dry-run, not exported): the policy's
  // filesystem.makeDirs directories are made before it is compiled.
  bool make_dirs = false;

  // Registers the options on `sub` (and makes its first non-option word start the command).
  void add_plan_options(CheckedSubcommand* sub);
  // The command after parsing; an error for a stray option or no command.
  Result<void> take_command(CLI::App* sub, const std::string& usage);
  // Sources merged in order (srt settings < user file < project file < --policy
  // < flags), compiled. Warnings (weakened sandboxes, plan warnings) are printed
  // to stderr here, once. `layer_flag`: --layer as given (it beats the
  // policy's "layer"); a Plan for the landlock layer leaves the host's Unix
  // sockets unmasked (plan::Context::mask_host_sockets).
  Result<BuiltPlan> build_plan(const std::string& layer_flag = "") const;
};

// "exguardian: WHAT" on stderr; returns 125 (setup/usage/policy error).
int usage_error(const std::string& what);

}  // namespace exg::cli
