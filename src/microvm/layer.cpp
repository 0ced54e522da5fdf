#include "microvm/layer.hpp"

#include "process/layer.hpp"

namespace exg::microvm {

layer::Enforcement MicrovmLayer::enforces(const plan::Plan& plan) const {
  // qemu's sandbox is the process layer's, so are its walls; the command's
  // syscalls meet the guest kernel first, which neither of them sees.
  layer::Enforcement e = process::ProcessLayer(landlock_).enforces(plan);
  e.landlock_text = "on qemu (host side): " + e.landlock_text + "; inside the guest its own kernel is the wall";
  e.seccomp_text = "on qemu (host side): " + e.seccomp_text + "; the command's syscalls go to the guest kernel";
  return e;
}

Result<void> MicrovmLayer::supports_agent() const { return {}; }

std::vector<std::string> MicrovmLayer::cautions(const plan::Plan& plan) const {
  // Egress streams reach the proxy (egress_bridge.hpp); the in-sandbox DNS
  // resolver (UDP) is not carried: said once, so that a failing lookup in the
  // guest is not a mystery (tools that use the proxy need none).
  if (!plan.proxy.resolver) return {};
  return {"microvm: the in-sandbox resolver (network.resolver / --dns) is not carried into the guest: "
          "names resolve through the proxy only (HTTP(S)_PROXY, SOCKS5 with remote names)"};
}

}  // namespace exg::microvm
