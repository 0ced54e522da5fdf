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

Result<void> MicrovmLayer::supports_agent() const {
  return fail(Error::msg("layer microvm", "only for `exguardian run` yet (sessions in a guest are not tested)"));
}

std::vector<std::string> MicrovmLayer::cautions(const plan::Plan& plan) const {
  // The guest has no network device and its proxy ports are not carried to
  // the supervisor's proxy yet: allowed destinations stay unreachable (fail
  // closed), said once so that a refused download is not a mystery.
  if (plan.network.allowed_domains.empty() && plan.network.allowed_cidrs.empty()) return {};
  return {"microvm: egress is not carried into the guest yet: the policy's allowed destinations are unreachable "
          "from it (no network device; nothing listens on 127.0.0.1:3128/1080)"};
}

}  // namespace exg::microvm
