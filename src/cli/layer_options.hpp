// The layer a command runs on (--layer, --runtime, --rootfs, the policy's
// "layer"), and the Plan as --dry-run and -v show it on that layer: shared by
// `run` and `session`.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/checked_subcommand.hpp"
#include "layer/layer.hpp"
#include "plan/plan.hpp"
#include "policy/policy.hpp"
#include "doctor/layer_choice.hpp"
#include "util/error.hpp"

namespace exg::cli {

struct LayerFlags {
  std::string layer, runtime, rootfs;
  std::string min_layer;      // --min-layer
  bool microvm_root = false;  // --microvm-root
  bool gvisor_root = false;   // --gvisor-root
  // After choose() with --layer auto / "layer": "auto": the choice, for the
  // stderr line, the plan (--dry-run, -v) and the audit log (doctor/layer_choice.hpp).
  std::optional<doctor::AutoChoice> auto_choice;

  void add_to(CheckedSubcommand* sub);
  // The layer to run on (cli::make_layer); an error names the flag that is
  // wrong, or (auto, or a layer below the minimum) why no layer may run.
  Result<std::unique_ptr<layer::Layer>> choose(const policy::Policy& pol, const plan::Plan& plan);
  // The plan as --dry-run and -v show it: the layer's lines, and the auto choice's after the first.
  std::string plan_text(const plan::Plan& plan, const layer::Layer& chosen) const;
  // The audit log's line for the choice (null without auto).
  nlohmann::json audit_event() const;
};

// Every line of `text` on stderr, prefixed "exguardian: " (-v).
void narrate(const std::string& text);

}  // namespace exg::cli
