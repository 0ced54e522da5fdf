// `exguardian run`: policy sources + flags -> Plan -> sandbox.
#include "cli/commands.hpp"

#include <cstdio>
#include <optional>

#include "oci/layer.hpp"
#include "plan/plan.hpp"
#include "microvm/run.hpp"
#include "sandbox/supervisor.hpp"

namespace exg::cli {

void RunOptions::add_to(CLI::App& app) {
  auto* run = app.add_subcommand("run", "Run a command in a sandbox");
  add_plan_options(run);
  run->add_option("--audit-log", audit_log, "Append every refusal (and later every egress decision) as JSON lines to FILE");
  run->add_flag("--dry-run", dry_run, "Print the compiled plan and run nothing");
  run->add_flag("-v,--verbose", verbose, "Say what the sandbox does");
  LayerFlags::add_to(run);
  run->add_flag("--microvm-root", microvm_root,
                "microvm: run the command as root inside the guest (the guest kernel is the wall; qemu stays unprivileged)");
  sub = run;
}

int RunOptions::execute() {
  if (auto c = take_command(sub, "exguardian run [options] -- COMMAND [ARGS...]"); !c) return usage_error(c.error().str());
  auto built = build_plan();
  if (!built) return usage_error(built.error().str());
  const policy::Policy& pol = built->policy;
  if (microvm(pol)) return run_microvm(*built);
  if (microvm_root) return usage_error(Error::msg("--microvm-root", "only with --layer microvm").str());
  auto oci_opt = choose(pol);
  if (!oci_opt) return usage_error(oci_opt.error().str());
  auto plan = &built->plan;
  std::string text = plan_text(*plan, *oci_opt);
  if (dry_run) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (verbose) narrate(text);  // the whole plan, as --dry-run shows it, then the run itself
  sandbox::SuperviseOptions so;
  so.verbose = verbose;
  so.audit_log = !audit_log.empty() ? audit_log : pol.audit_log.value_or("");
  if (*oci_opt) so.oci = &**oci_opt;
  auto status = sandbox::supervise(*plan, so);
  if (!status) return usage_error(status.error().str());
  return *status;
}

int RunOptions::run_microvm(const BuiltPlan& built) {
  if (!runtime.empty() || !rootfs.empty())
    return usage_error(Error::msg(!runtime.empty() ? "--runtime" : "--rootfs", "only with --layer container or gvisor").str());
  microvm::LayerOptions mo;
  mo.guest_root = microvm_root;
  std::string text = microvm::plan_text(built.plan, mo);
  if (dry_run) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (verbose) narrate(text);
  sandbox::SuperviseOptions so;
  so.verbose = verbose;
  so.audit_log = !audit_log.empty() ? audit_log : built.policy.audit_log.value_or("");
  auto status = microvm::run(built.plan, so, mo);
  if (!status) return usage_error(status.error().str());
  return *status;
}

}  // namespace exg::cli
