#include "process/layer.hpp"

#include "process/launch.hpp"

namespace exg::process {

std::vector<std::string> ProcessLayer::describe(const plan::Plan&) const { return {"layer: process"}; }

layer::Enforcement ProcessLayer::enforces(const plan::Plan& plan) const {
  layer::Enforcement e;
  e.landlock = landlock_.fs;
  if (!landlock_.fs) {
    e.landlock_text = "not available on this kernel: writes are guarded by the mounts only";
  } else {
    e.landlock_text = "ABI " + std::to_string(landlock_.abi) + ": filesystem writes" +
                      (landlock_.scope ? ", signal and abstract-unix scoping"
                                       : " (no signal/abstract-unix scoping: needs ABI 6)");
  }
  e.seccomp = plan.seccomp;
  e.seccomp_by = plan.seccomp ? "exguardian" : "";
  e.seccomp_notify = plan.seccomp;
  e.seccomp_text = plan.seccomp ? "filter installed, refusals reported to the supervisor" : "OFF (--unsafe-no-seccomp)";
  return e;
}

Result<layer::Sandbox> ProcessLayer::launch(const plan::Plan& plan, const layer::LaunchOptions& opt) {
  return process::launch(plan, opt);
}

}  // namespace exg::process
