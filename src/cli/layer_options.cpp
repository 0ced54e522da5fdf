#include "cli/layer_options.hpp"

#include <sys/stat.h>

#include <cstdio>

#include "plan/paths.hpp"

namespace exg::cli {

void LayerFlags::add_to(CLI::App* sub) {
  std::vector<std::string> names;
  for (auto k : layer::buildable_kinds()) names.emplace_back(layer::name(k));
  sub->add_option("--layer", layer, "process (default), container (crun/runc), gvisor (runsc) or microvm (qemu)")
      ->check(CLI::IsMember(names));
  sub->add_option("--runtime", runtime, "container/gvisor: the runtime binary (default: crun, else runc; runsc)");
  sub->add_option("--rootfs", rootfs, "container/gvisor: root filesystem DIR (default: the host's root, read-only)");
  sub->add_flag("--gvisor-root", gvisor_root,
                "gvisor: run the command as uid 0 of gVisor's own kernel, without capabilities (on the host still one "
                "unprivileged uid)");
  sub->add_flag("--microvm-root", microvm_root,
                "microvm: run the command as root inside the guest (the guest kernel is the wall; qemu stays unprivileged)");
}

Result<std::unique_ptr<layer::Layer>> LayerFlags::choose(const policy::Policy& pol) const {
  // --layer beats the policy's "layer"; process by default (validated: a known name).
  std::string layer_name = !layer.empty() ? layer : pol.layer.value_or(std::string(layer::name(layer::Kind::Process)));
  auto kind = layer::parse_kind(layer_name);
  if (!kind) return fail(Error::msg("layer " + layer_name, "unknown layer"));
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
  return layer::make_layer(*kind, cfg);
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
