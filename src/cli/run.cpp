// `exguardian run`: policy sources + flags -> Plan -> sandbox.
#include "cli/commands.hpp"

#include <cstdio>
#include <optional>

#include "cli/host_setup.hpp"
#include "cli/checked_subcommand.hpp"
#include "layer/layer.hpp"
#include "plan/plan.hpp"
#include "microvm/run_front_end.hpp"
#include "sandbox/supervisor.hpp"
#include "util/step_timer.hpp"

namespace exg::cli {

void RunOptions::add_to(CLI::App& app) { sub = CheckedSubcommand::add_to(app, "run", "Run a command in a sandbox"); }

void RunOptions::add_options() {
  CheckedSubcommand* run = sub;
  add_plan_options(run);
  run->add_option("--audit-log", audit_log, "Append every refusal and every egress decision as JSON lines to FILE");
  run->add_flag("--dry-run", dry_run, "Print the compiled plan and run nothing");
  run->add_flag("-v,--verbose", verbose, "Say what the sandbox does");
  run->add_flag("-q,--quiet", quiet,
                "No summary of what was refused (hosts and their rules, syscalls, planted files) at the end of a "
                "run that refused something");
  LayerFlags::add_to(run);
}

int RunOptions::execute() {
  if (auto c = take_command(sub, "exguardian run [options] -- COMMAND [ARGS...]"); !c) return usage_error(c.error().str());
  // -v: where the time goes, step by step, on one line at the end.
  StepTimer timer;
  if (verbose && !dry_run) timer.start();
  make_dirs = !dry_run;
  auto built = build_plan(layer);
  if (!built) return usage_error(built.error().str());
  timer.mark("plan");
  const policy::Policy& pol = built->policy;
  auto plan = &built->plan;
  auto chosen = choose(pol, *plan);
  if (!chosen) return usage_error(chosen.error().str());
  timer.mark("layer choice");
  // --layer auto: which layer, and why not a stronger one, on every run.
  if (auto_choice) std::fprintf(stderr, "exguardian: %s\n", auto_choice->line().c_str());
  if (dry_run) {
    std::fputs(plan_text(*plan, **chosen).c_str(), stdout);
    return 0;
  }
  if (verbose) {
    narrate(plan_text(*plan, **chosen));  // the whole plan, as --dry-run shows it, then the run itself
    timer.mark("plan narration");
  }
  sandbox::SuperviseOptions so;
  so.verbose = verbose;
  so.refusal_summary = !quiet;
  so.audit_log = !audit_log.empty() ? audit_log : pol.audit_log.value_or("");
  so.layer_choice = audit_event();
  // Once per process, before the launch: signals, fd limit, groups, stale cgroups.
  auto host = HostProcess::prepare(plan->identity.invoked_as_root);
  if (!host) return usage_error(explain_start_failure(host.error(), (*chosen)->kind()));
  timer.mark("host setup");
  so.signal_fd = host->signal_fd();
  // A layer whose pid 1 is always the agent (microvm: the guest's) runs the
  // Plan's command through it, as a session of one command.
  std::optional<microvm::RunFrontEnd> through_agent;
  if ((*chosen)->command_through_agent()) {
    through_agent.emplace(*plan, verbose);
    so.agent = &*through_agent;
  }
  if (timer.on()) so.timer = &timer;
  StdioIo io(/*relay_terminal=*/true);
  auto status = sandbox::supervise(**chosen, *plan, io, so);
  timer.mark("cleanup");  // what supervise() left to destructors: the cgroup's removal above all
  if (timer.on()) io.say("timing: " + timer.summary());
  if (!status) return usage_error(explain_start_failure(status.error(), (*chosen)->kind()));
  return *status;
}

}  // namespace exg::cli
