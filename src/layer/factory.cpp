// make_layer: the one place that knows every layer implementation.
#include <string>

#include "layer/layer.hpp"
#include "oci/layer.hpp"
#include "process/landlock.hpp"
#include "process/layer.hpp"

namespace exg::layer {

const std::vector<Kind>& buildable_kinds() {
  static const std::vector<Kind> kinds = {Kind::Process, Kind::Container, Kind::Gvisor};
  return kinds;
}

Result<std::unique_ptr<Layer>> make_layer(Kind kind, const LayerConfig& config) {
  switch (kind) {
    case Kind::Process:
      return std::unique_ptr<Layer>(std::make_unique<process::ProcessLayer>(process::landlock_features()));
    case Kind::Container:
    case Kind::Gvisor: {
      oci::LayerOptions lo;
      lo.kind = kind;
      auto rt = oci::choose_runtime(kind, config.runtime);
      if (!rt) return fail(rt.error());
      lo.runtime = std::move(*rt);
      lo.rootfs = config.rootfs;
      oci::read_host(lo);
      return std::unique_ptr<Layer>(std::make_unique<oci::OciLayer>(std::move(lo)));
    }
    case Kind::Microvm:
      break;
  }
  return fail(Error::msg("layer " + std::string(name(kind)), "not available yet"));
}

}  // namespace exg::layer
