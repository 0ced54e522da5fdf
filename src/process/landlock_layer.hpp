// The landlock layer: a sandbox without namespaces, for hosts that refuse
// them (user namespaces off, AppArmor's restriction, a container engine's
// seccomp profile). The command is our child in the host's own namespaces,
// walled by Landlock (filesystem: process/landlock_view.hpp; TCP connect to
// the proxy's ports only, no TCP bind; signals and abstract unix sockets
// scoped), ExGuardian's seccomp table with the supervisor's gate (every inet
// connect/sendto to anything but the proxy on loopback refused) and a second
// filter refusing UDP and other inet sockets, no_new_privs, a session of its
// own, rlimits, the Plan's environment; the proxy listens on the host's
// loopback behind a per-run token. What it cannot do that the process layer
// does is in docs/layers.md ("landlock").
//
// It needs Landlock ABI 6 (network rules, ABI 4; scoping, ABI 6): without
// them it refuses to start, saying which is missing.
#pragma once
#include <optional>
#include <string>

#include "layer/layer.hpp"
#include "process/landlock_view.hpp"
#include "walls/landlock.hpp"

namespace exg::process {

class LandlockLayer final : public layer::Layer {
 public:
  explicit LandlockLayer(walls::LandlockFeatures landlock) : landlock_(landlock) {}
  layer::Kind kind() const override { return layer::Kind::Landlock; }
  std::vector<std::string> describe(const plan::Plan& plan) const override;
  layer::Enforcement enforces(const plan::Plan& plan) const override;
  Result<void> supports_agent() const override;
  std::vector<std::string> cautions(const plan::Plan& plan) const override;
  Result<layer::Sandbox> launch(const plan::Plan& plan, const layer::LaunchOptions& opt) override;
  void after_run(const plan::Plan& plan) override;

  // Why this kernel's Landlock cannot carry the layer; empty when it can.
  static std::string missing(const walls::LandlockFeatures& f);
  // The run's own writable directory (TMPDIR): made at launch, removed after the run.
  static std::string private_tmp(const plan::Plan& plan);

 private:
  // The Plan's view (its denied paths' directories listed): made once per
  // sandbox for cautions() and launch(), which the supervisor calls in turn.
  Result<LandlockView> view_of(const plan::Plan& plan) const;

  walls::LandlockFeatures landlock_;
  mutable std::optional<std::pair<std::string, LandlockView>> view_;  // sandbox id, its view
};

}  // namespace exg::process
