// `--layer auto`: the strongest layer whose walls this host can put up for
// this policy, and why the stronger ones cannot. The one judgement that
// `run`/`session` (--layer auto, "layer": "auto"), `doctor` and `recommend`
// make: layer_status() over the host's capabilities (advice.hpp), then what the
// policy asks of a layer that some layers cannot give. Pure: the host is read
// by probe_for_layers() / probe_host(), so that every branch is unit-tested
// with hand-made capabilities.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "doctor/host_caps.hpp"
#include "util/layer_kind.hpp"

namespace exg::doctor {

// What a policy asks of a layer that not every layer can give.
struct LayerNeeds {
  // network.allowUnixSockets / allowAllUnixSockets: gVisor's gofer and the
  // microVM's 9p carry no host socket (Layer::carries_host_unix_sockets).
  bool host_unix_sockets = false;
  // "landlock": "required": the host kernel's Landlock, for the layers that
  // apply it there (process, container).
  bool landlock_required = false;
  // Invoked as root with a workspace root owns (plan::Identity synthetic or
  // uid 0): the landlock layer has no idmapped mounts to let an unused uid
  // write it, and refuses (process/landlock_view.hpp).
  bool root_owned_workspace_as_root = false;
};

struct LayerVerdict {
  layer::Kind kind;
  bool runs = false;
  std::string why;  // one line: with what it runs, or why it cannot
};

// Every layer, strongest first (layer::strongest_first()).
std::vector<LayerVerdict> judge_layers(const std::vector<Capability>& caps, const LayerNeeds& needs);

struct AutoChoice {
  std::optional<layer::Kind> chosen;   // empty: none at or above the minimum runs here
  std::optional<layer::Kind> minimum;  // --min-layer / "minLayer"
  std::vector<LayerVerdict> verdicts;  // strongest first

  // "layer auto: chose gvisor (runsc ...); not microvm: ..." (no "exguardian: " prefix).
  std::string line() const;
  // When nothing was chosen: one fact a line, why each layer at or above the
  // minimum cannot run, and what would run below it.
  std::vector<std::string> refusal() const;
  // The audit log's line: {"event": "layer_auto", "chosen", "minimum", "layers": [...]}.
  nlohmann::json audit_event() const;
};

// The first of `verdicts` (strongest first) that runs and is at least `minimum`.
AutoChoice choose_auto(std::vector<LayerVerdict> verdicts, std::optional<layer::Kind> minimum = std::nullopt);

}  // namespace exg::doctor
