// `exguardian run`: policy sources + flags -> Plan -> sandbox.
#include "cli/commands.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <optional>

#include "oci/layer.hpp"
#include "plan/paths.hpp"
#include "plan/plan.hpp"
#include "sandbox/supervisor.hpp"

namespace exg::cli {

void RunOptions::add_to(CLI::App& app) {
  auto* run = app.add_subcommand("run", "Run a command in a sandbox");
  add_plan_options(run);
  run->add_option("--audit-log", audit_log, "Append every refusal (and later every egress decision) as JSON lines to FILE");
  run->add_flag("--dry-run", dry_run, "Print the compiled plan and run nothing");
  run->add_flag("-v,--verbose", verbose, "Say what the sandbox does");
  run->add_option("--layer", layer, "process (default), container (crun/runc) or gvisor (runsc)")
      ->check(CLI::IsMember({"process", "container", "gvisor"}));
  run->add_option("--runtime", runtime, "container/gvisor: the runtime binary (default: crun, else runc; runsc)");
  run->add_option("--rootfs", rootfs, "container/gvisor: root filesystem DIR (default: the host's root, read-only)");
  sub = run;
}

int RunOptions::execute() {
  if (auto c = take_command(sub, "exguardian run [options] -- COMMAND [ARGS...]"); !c) return usage_error(c.error().str());
  auto built = build_plan();
  if (!built) return usage_error(built.error().str());
  const policy::Policy& pol = built->policy;
  // The layer: --layer beats the policy's "layer"; process by default.
  std::string layer_name = !layer.empty() ? layer : pol.layer.value_or("process");
  if (layer_name == "microvm") return usage_error("layer microvm: not available yet");
  std::optional<oci::LayerOptions> oci_opt;
  if (layer_name == "container" || layer_name == "gvisor") {
    oci::LayerOptions lo;
    lo.layer = layer_name == "gvisor" ? oci::Layer::Gvisor : oci::Layer::Container;
    auto rt = oci::choose_runtime(lo.layer, runtime);
    if (!rt) return usage_error(rt.error().str());
    lo.runtime = std::move(*rt);
    if (!rootfs.empty()) {
      auto canon = plan::canonical(rootfs);
      struct stat st;
      if (!canon || ::stat(canon->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return usage_error("--rootfs " + rootfs + ": not a directory");
      lo.rootfs = *canon;
    }
    oci_opt = std::move(lo);
  } else if (!runtime.empty() || !rootfs.empty()) {
    return usage_error(std::string(!runtime.empty() ? "--runtime" : "--rootfs") + ": only with --layer container or gvisor");
  }
  auto plan = &built->plan;
  std::string text = plan->to_text();
  if (oci_opt) {
    // The Plan is layer-independent; say how this layer runs it.
    std::string lines;
    for (const auto& l : oci::describe_layer(*plan, *oci_opt)) lines += l + "\n";
    if (auto at = text.find("layer: process\n"); at != std::string::npos) text.replace(at, 15, lines);
    else text = lines + text;
  }
  if (dry_run) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (verbose) {
    // Narrate: the whole plan, as --dry-run shows it, then the run itself.
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      std::fprintf(stderr, "exguardian: %.*s\n", static_cast<int>(nl - pos), text.data() + pos);
      pos = nl + 1;
    }
  }
  sandbox::SuperviseOptions so;
  so.verbose = verbose;
  so.audit_log = !audit_log.empty() ? audit_log : pol.audit_log.value_or("");
  if (oci_opt) so.oci = &*oci_opt;
  auto status = sandbox::supervise(*plan, so);
  if (!status) return usage_error(status.error().str());
  return *status;
}

}  // namespace exg::cli
