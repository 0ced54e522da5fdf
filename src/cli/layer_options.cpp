#include "cli/layer_options.hpp"

#include <sys/stat.h>

#include <cstdio>

#include "plan/paths.hpp"

namespace exg::cli {

void LayerFlags::add_to(CLI::App* sub) {
  sub->add_option("--layer", layer, "process (default), container (crun/runc), gvisor (runsc) or microvm (qemu)")
      ->check(CLI::IsMember({"process", "container", "gvisor", "microvm"}));
  sub->add_option("--runtime", runtime, "container/gvisor: the runtime binary (default: crun, else runc; runsc)");
  sub->add_option("--rootfs", rootfs, "container/gvisor: root filesystem DIR (default: the host's root, read-only)");
}

bool LayerFlags::microvm(const policy::Policy& pol) const {
  return (!layer.empty() ? layer : pol.layer.value_or("process")) == "microvm";
}

Result<std::optional<oci::LayerOptions>> LayerFlags::choose(const policy::Policy& pol) const {
  // --layer beats the policy's "layer"; process by default.
  std::string layer_name = !layer.empty() ? layer : pol.layer.value_or("process");
  if (layer_name == "microvm") return fail(Error::msg("layer microvm", "only for `exguardian run` yet"));
  if (layer_name != "container" && layer_name != "gvisor") {
    if (!runtime.empty() || !rootfs.empty())
      return fail(Error::msg(!runtime.empty() ? "--runtime" : "--rootfs", "only with --layer container or gvisor"));
    return std::optional<oci::LayerOptions>{};
  }
  oci::LayerOptions lo;
  lo.layer = layer_name == "gvisor" ? oci::Layer::Gvisor : oci::Layer::Container;
  auto rt = oci::choose_runtime(lo.layer, runtime);
  if (!rt) return fail(rt.error());
  lo.runtime = std::move(*rt);
  if (!rootfs.empty()) {
    auto canon = plan::canonical(rootfs);
    struct stat st;
    if (!canon || ::stat(canon->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return fail(Error::msg("--rootfs " + rootfs, "not a directory"));
    lo.rootfs = *canon;
  }
  return std::optional<oci::LayerOptions>(std::move(lo));
}

std::string plan_text(const plan::Plan& plan, const std::optional<oci::LayerOptions>& oci) {
  std::string text = plan.to_text();
  if (oci) {
    // The Plan is layer-independent; say how this layer runs it.
    std::string lines;
    for (const auto& l : oci::describe_layer(plan, *oci)) lines += l + "\n";
    if (auto at = text.find("layer: process\n"); at != std::string::npos) text.replace(at, 15, lines);
    else text = lines + text;
  }
  return text;
}

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
