// The layer a command runs on (--layer, --runtime, --rootfs, the policy's
// "layer"), and the Plan as --dry-run and -v show it on that layer: shared by
// `run` and `session`.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "oci/layer.hpp"
#include "plan/plan.hpp"
#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::cli {

struct LayerFlags {
  std::string layer, runtime, rootfs;

  void add_to(CLI::App* sub);
  // The microVM layer (run only: src/microvm/run_front_end.hpp); choose() refuses it.
  bool microvm(const policy::Policy& pol) const;
  // Nothing for the process layer; an error names the flag that is wrong.
  Result<std::optional<oci::LayerOptions>> choose(const policy::Policy& pol) const;
};

// The Plan's text with the layer's own lines in place of "layer: process".
std::string plan_text(const plan::Plan& plan, const std::optional<oci::LayerOptions>& oci);

// Every line of `text` on stderr, prefixed "exguardian: " (-v).
void narrate(const std::string& text);

}  // namespace exg::cli
