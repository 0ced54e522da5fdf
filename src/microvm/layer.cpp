#include "microvm/layer.hpp"

#include "process/layer.hpp"

namespace exg::microvm {

layer::Enforcement MicrovmLayer::enforces(const plan::Plan& plan) const {
  // qemu's sandbox is the process layer's, so are its walls; the command's
  // syscalls meet the guest kernel first, which neither of them sees, and
  // that kernel's own filter and Landlock domain (the guest's init applies
  // them: guest_walls(); what it applied is said when the guest is up).
  layer::Enforcement e = process::ProcessLayer(landlock_).enforces(plan);
  guest::Walls in = guest_walls(plan, opt_);
  e.landlock_text = "on qemu (host side): " + e.landlock_text + "; in the guest: " +
                    (!in.landlock ? std::string("none (root inside the guest)")
                                  : in.landlock->required ? "the plan's rules (required)"
                                                          : "the plan's rules where its kernel has Landlock");
  e.seccomp_text = "on qemu (host side): " + e.seccomp_text + "; in the guest: " +
                   (in.seccomp ? "the same rules, errno-only (refusals answered by the guest's filter, not audited)"
                               : !plan.seccomp ? "OFF (--unsafe-no-seccomp)" : "none (root inside the guest)");
  return e;
}

Result<void> MicrovmLayer::supports_agent() const { return {}; }

std::vector<std::string> MicrovmLayer::cautions(const plan::Plan& plan) const {
  // Egress streams reach the proxy (egress_bridge.hpp); the in-sandbox DNS
  // resolver (UDP) is not carried: said once, so that a failing lookup in the
  // guest is not a mystery (tools that use the proxy need none).
  // (The resolver that transparent egress brings is not asked for: the guest
  // has no capture either, see describe().)
  if (!plan.proxy.resolver || !plan.network.resolver.value_or(false)) return {};
  return {"microvm: the in-sandbox resolver (network.resolver / --dns) is not carried into the guest: "
          "names resolve through the proxy only (HTTP(S)_PROXY, SOCKS5 with remote names)"};
}

}  // namespace exg::microvm
