#include "cli/make_layer.hpp"

#include <string>

#include "microvm/layer.hpp"
#include "oci/layer.hpp"
#include "walls/landlock.hpp"
#include "process/landlock_layer.hpp"
#include "process/layer.hpp"

namespace exg::cli {

using layer::Kind;
using layer::Layer;
using layer::LayerConfig;

const std::vector<Kind>& buildable_kinds() {
  static const std::vector<Kind> kinds = {Kind::Process, Kind::Container, Kind::Gvisor, Kind::Microvm,
                                              Kind::Landlock};
  return kinds;
}

Result<std::unique_ptr<Layer>> make_layer(Kind kind, const LayerConfig& config) {
  switch (kind) {
    case Kind::Process:
      return std::unique_ptr<Layer>(std::make_unique<process::ProcessLayer>(walls::landlock_features()));
    case Kind::Container:
    case Kind::Gvisor: {
      oci::LayerOptions lo;
      lo.kind = kind;
      auto rt = oci::choose_runtime(kind, config.runtime);
      if (!rt) return fail(rt.error());
      lo.runtime = std::move(*rt);
      lo.rootfs = config.rootfs;
      lo.gvisor_root = config.gvisor_root;
      oci::read_host(lo);
      return std::unique_ptr<Layer>(std::make_unique<oci::OciLayer>(std::move(lo)));
    }
    case Kind::Landlock: {
      // Refused here, before anything is planned, when the kernel cannot carry it (fail closed).
      auto f = walls::landlock_features();
      if (auto why = process::LandlockLayer::missing(f); !why.empty()) return fail(Error::msg("layer landlock", why));
      return std::unique_ptr<Layer>(std::make_unique<process::LandlockLayer>(f));
    }
    case Kind::Microvm: {
      // qemu and the guest image are looked for at launch (--dry-run shows
      // what is missing): the launch fails closed without them.
      microvm::LayerOptions mo;
      mo.guest_root = config.guest_root;
      return std::unique_ptr<Layer>(std::make_unique<microvm::MicrovmLayer>(mo, walls::landlock_features()));
    }
  }
  return fail(Error::msg("layer " + std::string(layer::name(kind)), "unknown layer"));
}

}  // namespace exg::cli
