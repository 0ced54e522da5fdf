#include "cli/layer_options.hpp"

#include <sys/stat.h>

#include <cstdio>

#include "cli/host_setup.hpp"
#include "cli/make_layer.hpp"
#include "doctor/userns_diagnosis.hpp"
#include "plan/paths.hpp"

namespace exg::cli {

void LayerFlags::add_to(CheckedSubcommand* sub) {
  std::vector<std::string> names;
  for (auto k : buildable_kinds()) names.emplace_back(layer::name(k));
  std::vector<std::string> with_auto = names;
  with_auto.emplace_back(layer::kAutoName);
  sub->add_option("--layer", layer,
                  "process (default), container (crun/runc), gvisor (runsc), microvm (qemu), or auto: the strongest "
                  "of microvm > gvisor > container > process that runs here for this policy (said on stderr)")
      ->check(CLI::IsMember(with_auto));
  sub->add_option("--min-layer", min_layer,
                  "the weakest layer this run accepts (with auto: refuse rather than go below it; with a named "
                  "layer below it: refuse); beats the policy's \"minLayer\"")
      ->check(CLI::IsMember(names));
  sub->add_option("--runtime", runtime, "container/gvisor: the runtime binary (default: crun, else runc; runsc)");
  sub->add_option("--rootfs", rootfs, "container/gvisor: root filesystem DIR (default: the host's root, read-only)");
  sub->add_flag("--gvisor-root", gvisor_root,
                "gvisor: run the command as uid 0 of gVisor's own kernel, without capabilities (on the host still one "
                "unprivileged uid)");
  sub->add_flag("--microvm-root", microvm_root,
                "microvm: run the command as root inside the guest (the guest kernel is the wall; qemu stays unprivileged)");
}

Result<std::unique_ptr<layer::Layer>> LayerFlags::choose(const policy::Policy& pol, const plan::Plan& plan) {
  // --layer beats the policy's "layer"; process by default (validated: a known name or auto).
  std::string layer_name = !layer.empty() ? layer : pol.layer.value_or(std::string(layer::name(layer::Kind::Process)));
  const std::string min_name = !min_layer.empty() ? min_layer : pol.min_layer.value_or("");
  std::optional<layer::Kind> minimum;
  if (!min_name.empty()) {
    minimum = layer::parse_kind(min_name);
    if (!minimum) return fail(Error::msg("minimum layer " + min_name, "unknown layer"));
  }
  auto_choice.reset();
  if (layer_name == layer::kAutoName) {
    if (!runtime.empty() || !rootfs.empty() || microvm_root || gvisor_root)
      return fail(Error::msg(!runtime.empty() ? "--runtime" : !rootfs.empty() ? "--rootfs"
                             : microvm_root  ? "--microvm-root" : "--gvisor-root",
                             "not with --layer auto (the flag belongs to one layer: name that layer)"));
    doctor::LayerNeeds needs;
    needs.host_unix_sockets = plan.host_unix_sockets_allowed;
    needs.landlock_required = pol.landlock_required.value_or(false);
    needs.root_owned_workspace_as_root =
        plan.identity.invoked_as_root && (plan.identity.synthetic || plan.identity.host_uid == 0);
    const auto caps = doctor::probe_for_layers();
    auto choice = doctor::choose_auto(doctor::judge_layers(caps, needs), minimum);
    if (!choice.chosen) {
      auto lines = choice.refusal();
      // Why the host refuses the user namespace every layer makes (or root's
      // setgroups), and the ways out.
      const auto* groups = doctor::find_capability(caps, "supplementary groups");
      for (const auto& l : doctor::userns_refusal_for(layer::Kind::Process, groups && !groups->ok ? "setgroups" : "",
                                                       installed_container_runtime()))
        lines.push_back(l);
      std::string text;
      for (const auto& l : lines) text += (text.empty() ? "" : "\n") + l;
      return fail(Error::msg(text, ""));
    }
    auto_choice = std::move(choice);
    return make_layer(*auto_choice->chosen, {});
  }
  auto kind = layer::parse_kind(layer_name);
  if (!kind) return fail(Error::msg("layer " + layer_name, "unknown layer"));
  if (minimum && !layer::at_least(*kind, *minimum))
    return fail(Error::msg("layer " + layer_name, "below the minimum layer " + min_name +
                                                      " (--min-layer / \"minLayer\"; --layer auto takes the strongest "
                                                      "that runs here)"));
  const bool oci = *kind == layer::Kind::Container || *kind == layer::Kind::Gvisor;
  if (!oci && (!runtime.empty() || !rootfs.empty()))
    return fail(Error::msg(!runtime.empty() ? "--runtime" : "--rootfs", "only with --layer container or gvisor"));
  if (microvm_root && *kind != layer::Kind::Microvm)
    return fail(Error::msg("--microvm-root", "only with --layer microvm"));
  if (gvisor_root && *kind != layer::Kind::Gvisor) return fail(Error::msg("--gvisor-root", "only with --layer gvisor"));
  layer::LayerConfig cfg;
  cfg.guest_root = microvm_root;
  cfg.gvisor_root = gvisor_root;
  if (oci) {
    cfg.runtime = runtime;
    if (!rootfs.empty()) {
      auto canon = plan::canonical(rootfs);
      struct stat st;
      if (!canon || ::stat(canon->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return fail(Error::msg("--rootfs " + rootfs, "not a directory"));
      cfg.rootfs = *canon;
    }
  }
  return make_layer(*kind, cfg);
}

std::string LayerFlags::plan_text(const plan::Plan& plan, const layer::Layer& chosen) const {
  auto lines = chosen.describe(plan);
  if (auto_choice) lines.insert(lines.begin() + (lines.empty() ? 0 : 1), auto_choice->line());
  return plan.to_text(lines);
}

nlohmann::json LayerFlags::audit_event() const { return auto_choice ? auto_choice->audit_event() : nlohmann::json(); }

void narrate(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::fprintf(stderr, "exguardian: %.*s\n", static_cast<int>(nl - pos), text.data() + pos);
    pos = nl + 1;
  }
}

}  // namespace exg::cli
