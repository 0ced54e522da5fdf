// `exguardian run --layer microvm`: the supervisor with the microVM launch and
// the one-command front end (run_front_end.hpp). The one entry point the CLI
// calls, so that plugging the layer in elsewhere is a few lines.
#pragma once
#include <string>

#include "microvm/launch.hpp"
#include "plan/plan.hpp"
#include "sandbox/supervisor.hpp"

namespace exg::microvm {

// The Plan's text with this layer's lines in place of "layer: process".
std::string plan_text(const plan::Plan& plan, const LayerOptions& opt);

// The command's exit status (124 on timeout); an error means nothing ran.
Result<int> run(const plan::Plan& plan, sandbox::SuperviseOptions so, const LayerOptions& opt);

}  // namespace exg::microvm
