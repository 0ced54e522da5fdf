// The process layer as a Layer (layer/layer.hpp): the sandbox is our own child
// in its own namespaces (process/launch.hpp, child.hpp), walled by mounts,
// Landlock where the kernel has it, and ExGuardian's seccomp filter, whose
// refusals the supervisor answers and reports (seccomp notify).
#pragma once
#include "layer/layer.hpp"
#include "walls/landlock.hpp"

namespace exg::process {

class ProcessLayer final : public layer::Layer {
 public:
  // `landlock`: what this kernel offers (landlock_features()); given, so that
  // describe() and enforces() are pure.
  explicit ProcessLayer(walls::LandlockFeatures landlock) : landlock_(landlock) {}
  layer::Kind kind() const override { return layer::Kind::Process; }
  std::vector<std::string> describe(const plan::Plan& plan) const override;
  layer::Enforcement enforces(const plan::Plan& plan) const override;
  Result<layer::Sandbox> launch(const plan::Plan& plan, const layer::LaunchOptions& opt) override;

 private:
  walls::LandlockFeatures landlock_;
};

}  // namespace exg::process
