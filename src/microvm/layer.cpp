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

}  // namespace exg::microvm
