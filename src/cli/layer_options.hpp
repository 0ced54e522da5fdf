// The layer a command runs on (--layer, --runtime, --rootfs, the policy's
// "layer"), and the Plan as --dry-run and -v show it on that layer: shared by
// `run` and `session`.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "layer/layer.hpp"
#include "plan/plan.hpp"
#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::cli {

struct LayerFlags {
  std::string layer, runtime, rootfs;
  bool microvm_root = false;  // --microvm-root
  bool gvisor_root = false;   // --gvisor-root

  void add_to(CLI::App* sub);
  // The layer to run on (layer::make_layer); an error names the flag that is wrong.
  Result<std::unique_ptr<layer::Layer>> choose(const policy::Policy& pol) const;
};

// Every line of `text` on stderr, prefixed "exguardian: " (-v).
void narrate(const std::string& text);

}  // namespace exg::cli
