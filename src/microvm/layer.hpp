// The microVM layer as a Layer (layer/layer.hpp): the guest kernel is the
// wall around the command; qemu, which runs it, is itself in the Plan's
// process-layer sandbox on the host (namespaces, ExGuardian's seccomp filter,
// Landlock, the cgroup), launch.hpp. The guest's pid 1 always runs the agent,
// so a plain run drives the command through it (run_front_end.hpp).
#pragma once
#include "layer/layer.hpp"
#include "microvm/accel_probe.hpp"
#include "microvm/launch.hpp"
#include "walls/landlock.hpp"

namespace exg::microvm {

class MicrovmLayer final : public layer::Layer {
 public:
  // `landlock`: what this kernel offers qemu's sandbox (landlock_features());
  // given, so that describe() and enforces() are pure.
  // The accelerator is KVM only where doctor's boot proved it (accel_probe.hpp).
  MicrovmLayer(LayerOptions opt, walls::LandlockFeatures landlock) : opt_(opt), landlock_(landlock) {
    opt_.accel = chosen_accel(&opt_.accel_why);
  }
  layer::Kind kind() const override { return layer::Kind::Microvm; }
  std::vector<std::string> describe(const plan::Plan& plan) const override { return describe_layer(plan, opt_); }
  layer::Enforcement enforces(const plan::Plan& plan) const override;
  // Sessions: the guest's agent on its virtio-serial port, the same protocol.
  Result<void> supports_agent() const override;
  bool command_through_agent() const override { return true; }
  bool carries_host_unix_sockets() const override { return false; }  // 9p carries no sockets
  // LaunchOptions::agent is ignored: the agent always runs, in the guest.
  Result<layer::Sandbox> launch(const plan::Plan& plan, const layer::LaunchOptions& opt) override {
    return microvm::launch(plan, opt, opt_);
  }

 private:
  LayerOptions opt_;
  walls::LandlockFeatures landlock_;
};

}  // namespace exg::microvm
